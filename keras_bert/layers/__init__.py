"""Reusable Keras layers: embeddings, transformer block, pretraining and task heads."""

from keras_bert.layers.embeddings import BertEmbeddings
from keras_bert.layers.heads import MaskedLMHead, NextSentenceHead, gather_positions
from keras_bert.layers.transformer import BertSelfAttention, TransformerBlock, attention_mask_bias

__all__ = ["BertEmbeddings", "BertSelfAttention", "MaskedLMHead", "NextSentenceHead",
           "TransformerBlock", "attention_mask_bias", "gather_positions"]
