"""Classification and regression (`--task classification`, `--task regression`): GLUE and JSONL
readers, BertClassifier with optional numeric and categorical features, GLUE metrics, export."""

from keras_bert.tasks.classification import export  # noqa: F401  (registers the export signatures)
from keras_bert.tasks.classification.model import BertClassifier

__all__ = ["BertClassifier"]
