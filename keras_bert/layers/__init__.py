"""Reusable Keras layers: embeddings, transformer block, pretraining and task heads."""

from keras_bert.layers.dropout import BertDropout
from keras_bert.layers.embeddings import BertEmbeddings
from keras_bert.layers.features import TabularFeatures
from keras_bert.layers.pretraining_heads import MaskedLMHead, NextSentenceHead, gather_positions
from keras_bert.layers.layer_normalization import BertLayerNormalization
from keras_bert.layers.pooling import SentencePooling
from keras_bert.layers.task_heads import ClassificationHead, SpanHead, TokenClassificationHead
from keras_bert.layers.transformer import BertSelfAttention, TransformerBlock, attention_mask_bias

__all__ = ["BertDropout", "BertEmbeddings", "BertLayerNormalization", "BertSelfAttention",
           "ClassificationHead", "MaskedLMHead", "NextSentenceHead", "SentencePooling",
           "SpanHead", "TabularFeatures", "TokenClassificationHead", "TransformerBlock",
           "attention_mask_bias", "gather_positions"]
