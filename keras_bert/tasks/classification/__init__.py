"""Classification and regression (`--task classification`, `--task regression`): GLUE and JSONL
readers, BertClassifier with optional numeric and categorical features, GLUE metrics, export."""

from keras_bert.lazy import lazy_attributes
from keras_bert.tasks import export_with_model

__all__ = ["BertClassifier"]
__getattr__, __dir__ = lazy_attributes(__name__, {"BertClassifier": f"{__name__}.model"})
export_with_model(__name__)
