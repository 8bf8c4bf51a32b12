"""Sentence and token embeddings (no fine-tuning): the BertEmbedder model, its export and
`keras-bert extract-features`."""

from keras_bert.tasks.embedding import export  # noqa: F401  (registers the export signatures)
from keras_bert.tasks.embedding.model import BertEmbedder

__all__ = ["BertEmbedder"]
