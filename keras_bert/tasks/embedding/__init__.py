"""Sentence and token embeddings (no fine-tuning): the BertEmbedder model, its export and
`keras-bert extract-features`."""

from keras_bert.lazy import lazy_attributes
from keras_bert.tasks import export_with_model

__all__ = ["BertEmbedder"]
__getattr__, __dir__ = lazy_attributes(__name__, {"BertEmbedder": f"{__name__}.model"})
export_with_model(__name__)
