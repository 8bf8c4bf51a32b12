"""Named-entity tagging (`--task ner`): CoNLL reader, word-to-WordPiece alignment,
BertTokenClassifier, conlleval metric, export."""

from keras_bert.tasks.ner import export  # noqa: F401  (registers the export signatures)
from keras_bert.tasks.ner.model import BertTokenClassifier

__all__ = ["BertTokenClassifier"]
