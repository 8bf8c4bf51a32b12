"""Multiple choice (`--task multiple-choice`): SWAG/JSONL reader, BertMultipleChoice, export."""

from keras_bert.lazy import lazy_attributes
from keras_bert.tasks import export_with_model

__all__ = ["BertMultipleChoice"]
__getattr__, __dir__ = lazy_attributes(__name__, {"BertMultipleChoice": f"{__name__}.model"})
export_with_model(__name__)
