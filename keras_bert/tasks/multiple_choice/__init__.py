"""Multiple choice (`--task multiple-choice`): SWAG/JSONL reader, BertMultipleChoice, export."""

from keras_bert.tasks.multiple_choice import export  # noqa: F401  (registers the export signatures)
from keras_bert.tasks.multiple_choice.model import BertMultipleChoice

__all__ = ["BertMultipleChoice"]
