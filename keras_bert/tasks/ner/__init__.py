"""Named-entity tagging (`--task ner`): CoNLL reader, word-to-WordPiece alignment,
BertTokenClassifier, conlleval metric, export."""

from keras_bert.lazy import lazy_attributes
from keras_bert.tasks import export_with_model

__all__ = ["BertTokenClassifier"]
__getattr__, __dir__ = lazy_attributes(__name__, {"BertTokenClassifier": f"{__name__}.model"})
export_with_model(__name__)
