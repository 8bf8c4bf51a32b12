"""Sentence-level pooling of token vectors for embeddings: the [CLS] vector, or the mean over real
(non-padding) tokens as sentence-transformers computes it, optionally L2-normalized."""

from __future__ import annotations

import keras
from keras import ops

from keras_bert.layers.shapes import SEQUENCE, TOKEN_IDS, check_rank

POOLING_MODES = ("cls", "mean")


@keras.saving.register_keras_serializable(package="keras_bert")
class SentencePooling(keras.layers.Layer):
    """Pools token vectors into one vector per sequence, in float32.

    ``"mean"`` is ``sum(h_i * mask_i) / max(sum(mask_i), 1e-9)`` and the normalization is
    ``v / max(||v||, 1e-12)``, the formulas of sentence-transformers' Pooling and Normalize
    modules.

    Args:
        mode: ``"cls"`` (the first token's vector) or ``"mean"`` (masked mean).
        normalize: L2-normalize the result.

    Call args:
        sequence: float [batch, seq, hidden].
        mask: int or bool [batch, seq], 1 for real tokens.

    Returns:
        float32 [batch, hidden].

    Example:
    >>> import numpy as np
    >>> pool = SentencePooling("mean")
    >>> h = np.array([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]], "float32")
    >>> pool(h, np.array([[1, 1, 0]])).numpy().tolist()
    [[2.0, 3.0]]
    """

    def __init__(self, mode: str = "mean", normalize: bool = False, **kwargs):
        super().__init__(**kwargs)
        if mode not in POOLING_MODES:
            raise ValueError(f"unknown pooling mode {mode!r}; expected one of "
                             f"{', '.join(POOLING_MODES)}")
        self.mode = mode
        self.normalize = normalize

    def call(self, sequence, mask):
        self._check_ranks(sequence, mask)
        sequence = ops.cast(sequence, "float32")
        if self.mode == "cls":
            pooled = sequence[:, 0, :]
        else:
            weights = ops.cast(mask, "float32")[:, :, None]
            total = ops.sum(sequence * weights, axis=1)
            pooled = total / ops.maximum(ops.sum(weights, axis=1), 1e-9)
        if self.normalize:
            norm = ops.sqrt(ops.sum(ops.square(pooled), axis=-1, keepdims=True))
            pooled = pooled / ops.maximum(norm, 1e-12)
        return pooled

    def compute_output_shape(self, sequence_shape, mask_shape=None):
        self._check_ranks(sequence_shape, mask_shape)
        return (sequence_shape[0], sequence_shape[-1])

    @staticmethod
    def _check_ranks(sequence, mask) -> None:
        check_rank("SentencePooling", "sequence", sequence, SEQUENCE)
        check_rank("SentencePooling", "mask", mask, TOKEN_IDS)

    def get_config(self):
        config = super().get_config()
        config.update({"mode": self.mode, "normalize": self.normalize})
        return config
