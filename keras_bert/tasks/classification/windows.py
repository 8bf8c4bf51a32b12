"""A classifier's long texts: each text split into overlapping windows of WordPieces and packed
(``pack_windows``), and the windows' outputs combined back into one row per text
(``combine_windows``). ``fit``, ``predict``, ``evaluate`` and the exported ``serving_default``
all run these two functions, so an export answers what ``predict`` answers."""

from __future__ import annotations

import tensorflow as tf

from keras_bert.config import check_window_stride, default_window_stride
from keras_bert.tokenization.windows import split_windows

# The smallest probability read back as a logit: log(0) would make a window's mean -inf.
_TINY = 1e-30


def window_length(seq_length: int) -> int:
    """The WordPieces of a single text a window holds: ``seq_length`` less [CLS] and [SEP]."""
    return seq_length - 2


def resolved_stride(window_stride: int | None, seq_length: int) -> int:
    """The stride a classifier of ``seq_length`` uses: ``window_stride``, checked, or the
    default (``config.default_window_stride``)."""
    length = window_length(seq_length)
    check_window_stride(window_stride, length)
    return default_window_stride(length) if window_stride is None else window_stride


def pack_windows(preprocessor, texts: tf.Tensor, window_stride: int | None,
                 max_windows: int | None = None) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
    """Texts as the packed ids of their windows.

    A text that fits in ``seq_length`` is one window packed exactly as ``preprocessor(texts)``
    packs it (an empty text is ``[CLS] [SEP]``); a longer one is several (see
    ``tokenization.windows``).

    Args:
        preprocessor: a BertPreprocessor.
        texts: string [texts].
        window_stride: WordPieces from one window's start to the next (None: the default).
        max_windows: the most windows a text may have (None: no limit); a longer text fails
            the call with an InvalidArgumentError naming the limit.

    Returns:
        ``(packed, text_index)``: the encoder inputs, int32 [windows, seq_length] each, and
        int32 [windows], each window's text.
    """
    seq_length = preprocessor.seq_length
    windows, text_index = split_windows(preprocessor.tokenize(texts), window_length(seq_length),
                                        resolved_stride(window_stride, seq_length), max_windows)
    return preprocessor.pack(windows), text_index


def as_logits(outputs: tf.Tensor, activation: str | None) -> tf.Tensor:
    """A classifier's outputs [rows, K] as values whose mean is the mean of the logits, up to
    a constant per row that the activation ignores: log-probabilities for softmax (softmax of
    their mean is softmax of the logits' mean), log-odds for sigmoid, the outputs themselves
    otherwise (logits, scores, another activation's values)."""
    if activation == "softmax":
        return tf.math.log(tf.maximum(outputs, _TINY))
    if activation == "sigmoid":
        probabilities = tf.clip_by_value(outputs, _TINY, 1.0 - 1e-7)
        return tf.math.log(probabilities) - tf.math.log1p(-probabilities)
    return outputs


def combine_windows(outputs: tf.Tensor, text_index: tf.Tensor, num_texts,
                    activation: str | None) -> tf.Tensor:
    """One row per text from its windows' outputs: the activation of the mean of the windows'
    logits (``as_logits``); a text of one window keeps its window's row as it is.

    Args:
        outputs: float32 [windows, K], the classifier's outputs (after its activation).
        text_index: int32 [windows], each window's text.
        num_texts: the texts (an int or an int32 scalar tensor).
        activation: the classifier's output activation ("softmax", "sigmoid", None...).

    Returns:
        float32 [texts, K].
    """
    outputs = tf.convert_to_tensor(outputs, tf.float32)
    mean = tf.math.unsorted_segment_mean(as_logits(outputs, activation), text_index, num_texts)
    if activation == "softmax":
        combined = tf.nn.softmax(mean, axis=-1)
    elif activation == "sigmoid":
        combined = tf.math.sigmoid(mean)
    else:
        combined = mean
    windows = tf.math.unsorted_segment_sum(tf.ones_like(text_index), text_index, num_texts)
    first = tf.gather(outputs, tf.math.unsorted_segment_min(
        tf.range(tf.shape(text_index)[0]), text_index, num_texts))
    return tf.where((windows == 1)[:, None], first, combined)
