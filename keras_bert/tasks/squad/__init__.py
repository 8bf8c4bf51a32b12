"""Extractive question answering (`--task squad`): SQuAD reader, windowed features, answer
post-processing, BertQuestionAnswerer, official metrics, export."""

from keras_bert.lazy import lazy_attributes
from keras_bert.tasks import export_with_model

__all__ = ["BertQuestionAnswerer"]
__getattr__, __dir__ = lazy_attributes(__name__, {"BertQuestionAnswerer": f"{__name__}.model"})
export_with_model(__name__)
