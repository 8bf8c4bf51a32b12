"""The BERT network and the task models built on it."""

from keras_bert.models.encoder import BertEncoder

__all__ = ["BertEncoder"]
