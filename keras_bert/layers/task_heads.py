"""Fine-tuning heads, as in BERT's paper: a K-way layer on the pooled [CLS] vector for
classification, start/end vectors that score every token for span question answering, and a
per-token K-way layer for tagging. Logits come out in float32 under mixed precision too."""

from __future__ import annotations

import keras
from keras import ops

from keras_bert.layers.shapes import POOLED, SEQUENCE, check_rank


def _dense(units: int, initializer_range: float, dtype, name: str) -> keras.layers.Dense:
    return keras.layers.Dense(
        units, kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
        dtype=dtype, name=name)


@keras.saving.register_keras_serializable(package="keras_bert")
class ClassificationHead(keras.layers.Layer):
    """Dropout, then a dense layer to ``num_classes`` logits (1 for regression).

    Google's run_classifier.py: dropout(0.1) on the pooled output, then ``output_weights``
    [num_labels, hidden] (stored here as a Dense kernel [hidden, num_labels]) and a bias.

    Args:
        num_classes: output width K (1 for a regression score).
        dropout: dropout rate on the input (0.1 in BERT).
        initializer_range: stddev of the truncated-normal kernel initializer.

    Call args:
        pooled_output: float [batch, hidden].

    Returns:
        float32 logits [batch, num_classes].

    Example:
    >>> import numpy as np
    >>> head = ClassificationHead(3)
    >>> tuple(head(np.zeros((2, 8), "float32")).shape)
    (2, 3)
    """

    # The input, as the rank check names it, and its axes.
    input_name, input_axes = "pooled_output", POOLED

    def __init__(self, num_classes: int, dropout: float = 0.1, initializer_range: float = 0.02,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        self.dropout = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.dense = _dense(num_classes, initializer_range, self.dtype_policy, "logits")

    def build(self, input_shape):
        self.dense.build(input_shape)

    def call(self, pooled_output, training=None):
        check_rank(type(self).__name__, self.input_name, pooled_output, self.input_axes)
        return ops.cast(self.dense(self.dropout(pooled_output, training=training)), "float32")

    def compute_output_shape(self, input_shape):
        check_rank(type(self).__name__, self.input_name, input_shape, self.input_axes)
        return (*input_shape[:-1], self.num_classes)

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes, "dropout": self.dropout_rate,
                       "initializer_range": self.initializer_range})
        return config


@keras.saving.register_keras_serializable(package="keras_bert")
class TokenClassificationHead(ClassificationHead):
    """Dropout, then a dense layer to ``num_classes`` logits at every position (tagging).

    Call args:
        sequence_output: float [batch, seq, hidden].

    Returns:
        float32 logits [batch, seq, num_classes].

    Example:
    >>> import numpy as np
    >>> head = TokenClassificationHead(5)
    >>> tuple(head(np.zeros((2, 7, 8), "float32")).shape)
    (2, 7, 5)
    """

    input_name, input_axes = "sequence_output", SEQUENCE


PADDING_LOGIT = -10000.0  # SpanHead's score at padding positions (as BERT's attention mask)


@keras.saving.register_keras_serializable(package="keras_bert")
class SpanHead(keras.layers.Layer):
    """Start and end vectors S, E: token i scores ``S . h_i`` as an answer start, ``E . h_i`` as
    an end (Google's run_squad.py ``cls/squad/output_weights`` [2, hidden]).

    Args:
        initializer_range: stddev of the truncated-normal kernel initializer.

    Call args:
        sequence_output: float [batch, seq, hidden].
        input_mask: optional int or bool [batch, seq], 1 at real tokens: padding positions then
            score ``PADDING_LOGIT``, so that no span starts or ends there and the softmax
            over positions (the loss) is the same however far a row is padded.

    Returns:
        (start_logits, end_logits), each float32 [batch, seq].

    Example:
    >>> import numpy as np
    >>> start, end = SpanHead()(np.zeros((2, 7, 8), "float32"))
    >>> tuple(start.shape), tuple(end.shape)
    ((2, 7), (2, 7))
    """

    def __init__(self, initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.dense = _dense(2, initializer_range, self.dtype_policy, "span_logits")

    def build(self, input_shape):
        self.dense.build(input_shape)

    def call(self, sequence_output, input_mask=None):
        check_rank("SpanHead", "sequence_output", sequence_output, SEQUENCE)
        logits = ops.cast(self.dense(sequence_output), "float32")
        start, end = logits[..., 0], logits[..., 1]
        if input_mask is not None:
            real = ops.cast(input_mask, "bool")
            start = ops.where(real, start, PADDING_LOGIT)
            end = ops.where(real, end, PADDING_LOGIT)
        return start, end

    def compute_output_shape(self, input_shape):
        check_rank("SpanHead", "sequence_output", input_shape, SEQUENCE)
        return tuple(input_shape[:-1]), tuple(input_shape[:-1])

    def get_config(self):
        config = super().get_config()
        config["initializer_range"] = self.initializer_range
        return config
