"""A classifier's long texts: each text split into overlapping windows of WordPieces and packed
(``pack_windows``; a text pair keeps its first text and windows its second), and the windows'
outputs combined back into one row per text (``combine_windows``). ``fit``, ``predict``,
``evaluate`` and the exported ``serving_default`` all run these two functions, so an export
answers what ``predict`` answers."""

from __future__ import annotations

import tensorflow as tf

from keras_bert.config import check_window_stride, default_window_stride
from keras_bert.tokenization.packer_layer import pair_lengths
from keras_bert.tokenization.windows import split_windows, take_windows, window_spans

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
                 max_windows: int | None = None, text_pairs: tf.Tensor | None = None
                 ) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
    """Texts (or text pairs) as the packed ids of their windows.

    A text that fits in ``seq_length`` is one window packed exactly as ``preprocessor(texts)``
    packs it (an empty text is ``[CLS] [SEP]``); a longer one is several (see
    ``tokenization.windows``). Pairs: see ``pack_pair_windows``.

    Args:
        preprocessor: a BertPreprocessor.
        texts: string [texts].
        window_stride: WordPieces from one window's start to the next (None: the default).
        max_windows: the most windows a text may have (None: no limit); a longer text fails
            the call with an InvalidArgumentError naming the limit.
        text_pairs: string [texts], the second text of each pair, or None.

    Returns:
        ``(packed, text_index)``: the encoder inputs, int32 [windows, seq_length] each, and
        int32 [windows], each window's text.
    """
    if text_pairs is not None:
        return pack_pair_windows(preprocessor, texts, text_pairs, window_stride, max_windows)
    seq_length = preprocessor.seq_length
    windows, text_index = split_windows(preprocessor.tokenize(texts), window_length(seq_length),
                                        resolved_stride(window_stride, seq_length), max_windows)
    return preprocessor.pack(windows), text_index


def pack_pair_windows(preprocessor, texts: tf.Tensor, text_pairs: tf.Tensor,
                      window_stride: int | None, max_windows: int | None = None
                      ) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
    """Text pairs as the packed ids of windows of their second text, each window
    ``[CLS] a [SEP] b_window [SEP]`` with the pair's first text ``a`` in every one.

    The first text keeps what Google's pair truncation keeps of it (``packer_layer
    .pair_lengths``): all of it up to ``ceil((seq_length - 3) / 2)`` WordPieces (more where the
    second text is short enough to fit beside it), else that many. The second text is read in
    windows of the rest, ``seq_length - 3`` less the first text's pieces (at least
    ``floor((seq_length - 3) / 2)``), starting ``window_stride`` pieces apart, or half such a
    window with no stride (``config.default_window_stride``'s rule), and never more than one
    less than the window, so that windows overlap. So a pair that fits is one window packed
    exactly as ``preprocessor((texts, text_pairs))`` packs it, and a longer pair's first window
    is Google's packing of it. A pair whose second text is empty is packed as a single text
    (``[CLS] a [SEP]``, ``a`` cut at seq_length - 2), one window, as the preprocessor packs it.

    Args:
        preprocessor: a BertPreprocessor.
        texts, text_pairs: string [texts] each, the pairs' first and second texts.
        window_stride: WordPieces from one window's start to the next (None: half the window).
        max_windows: the most windows a pair may have (None: no limit).

    Returns:
        As ``pack_windows``.
    """
    check_window_stride(window_stride, window_length(preprocessor.seq_length))
    budget = preprocessor.seq_length - 3  # [CLS] a [SEP] b [SEP]
    first, second = preprocessor.tokenize(texts), preprocessor.tokenize(text_pairs)
    first_lengths = tf.cast(first.row_lengths(), tf.int32)
    second_lengths = tf.cast(second.row_lengths(), tf.int32)
    kept, _ = pair_lengths(first_lengths, second_lengths, budget)
    kept = tf.where(second_lengths > 0, kept, first_lengths)  # no second text: the packer cuts
    second_window = tf.maximum(budget - kept, 1)
    stride = (tf.maximum(second_window // 2, 1) if window_stride is None
              else tf.fill(tf.shape(second_window), window_stride))
    stride = tf.minimum(stride, tf.maximum(second_window - 1, 1))
    text_index, starts, ends = window_spans(second_lengths, second_window, stride, max_windows)
    first_kept = take_windows(first, text_index, tf.zeros_like(text_index),
                              tf.gather(kept, text_index))
    return (preprocessor.pack(first_kept, take_windows(second, text_index, starts, ends)),
            text_index)


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
    # A text of one window: the sum of its windows' rows is that row, exactly (segment sums,
    # not a segment minimum, which the OpenVINO export's converter has no rule for).
    alone = tf.math.unsorted_segment_sum(outputs, text_index, num_texts)
    return tf.where((windows == 1)[:, None], alone, combined)
