"""Extractive question answering (`--task squad`): SQuAD reader, windowed features, answer
post-processing, BertQuestionAnswerer, official metrics, export."""

from keras_bert.tasks.squad import export  # noqa: F401  (registers the export signatures)
from keras_bert.tasks.squad.model import BertQuestionAnswerer

__all__ = ["BertQuestionAnswerer"]
