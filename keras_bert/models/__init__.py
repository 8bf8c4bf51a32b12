"""The BERT network and the task models built on it."""

from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer

__all__ = ["BertEncoder", "BertPretrainer"]
