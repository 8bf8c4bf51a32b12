"""Texts longer than the model as overlapping windows of WordPieces, in-graph: the one cut that
a classifier's ``fit``, ``predict`` and ``evaluate`` and its exported ``serving_default`` all
make, so that an export answers what ``predict`` answers; a question answerer's exported
``serving_default`` cuts contexts with it as ``predict_answers`` cuts them.

A text of n pieces, read ``window_length`` at a time with ``stride`` pieces between window
starts, gives ``1 + ceil(max(n - window_length, 0) / stride)`` windows starting at 0, stride,
2 stride, ...; the last ends at the text's end (it may be shorter), as Google's run_squad.py
cuts documents. A text that fits (an empty one too) is one window, itself.
"""

from __future__ import annotations

import tensorflow as tf


def window_counts(lengths: tf.Tensor, window_length, stride) -> tf.Tensor:
    """The windows of texts of ``lengths`` pieces (int [texts]): int32 [texts], at least 1
    (``window_length`` and ``stride``: ints, or int32 [texts]).

    >>> window_counts(tf.constant([0, 5, 6, 7, 12]), window_length=6, stride=3).numpy().tolist()
    [1, 1, 1, 2, 3]
    """
    lengths = tf.cast(lengths, tf.int32)
    beyond = tf.maximum(lengths - window_length, 0)
    return 1 + (beyond + stride - 1) // stride


def window_spans(lengths: tf.Tensor, window_length, stride, max_windows: int | None = None
                 ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Where each text's windows lie, for texts of ``lengths`` pieces (int [texts]).

    Args:
        lengths: int [texts], each text's pieces.
        window_length: the most pieces in a window: an int, or int32 [texts] (a question
            answerer's windows leave room for each text's question).
        stride: pieces from one window's start to the next, 1 to ``window_length``: an int,
            or int32 [texts].
        max_windows: the most windows a text may have; a longer text fails the call
            (InvalidArgumentError naming the limit, a client's error in TF Serving) instead of
            being cut. None: no limit.

    Returns:
        ``(text_index, starts, ends)``, int32 [windows] each: every text's windows in order
        (texts in order), each window's text and its first and past-the-last piece within it.

    >>> text_index, starts, ends = window_spans(tf.constant([5, 1]), 3, 2)
    >>> text_index.numpy().tolist(), starts.numpy().tolist(), ends.numpy().tolist()
    ([0, 0, 1], [0, 2, 0], [3, 5, 1])
    """
    lengths = tf.cast(lengths, tf.int32)
    counts = window_counts(lengths, window_length, stride)
    checks = []
    if max_windows is not None:
        pieces = (f" of {window_length} WordPieces (stride {stride})"
                  if isinstance(window_length, int) and isinstance(stride, int) else "")
        checks.append(tf.debugging.assert_less_equal(
            tf.reduce_max(tf.concat([counts, [0]], 0)), tf.constant(max_windows, tf.int32),
            message=f"a text is longer than max_windows={max_windows} windows{pieces}; raise "
                    f"max_windows or send shorter texts"))
    with tf.control_dependencies(checks):
        text_index = tf.repeat(tf.range(tf.shape(counts)[0], dtype=tf.int32), counts)
    # Each window's number within its text: 0, 1, ... restarting at every text.
    first_window = tf.cumsum(counts, exclusive=True)
    within = tf.range(tf.shape(text_index)[0], dtype=tf.int32) - tf.gather(first_window,
                                                                          text_index)

    def per_window(value):  # an int, or one value per text, as int32 [windows]
        value = tf.broadcast_to(tf.cast(value, tf.int32), tf.shape(lengths))
        return tf.gather(value, text_index)

    starts = within * per_window(stride)
    ends = tf.minimum(starts + per_window(window_length), tf.gather(lengths, text_index))
    return text_index, starts, ends


def take_windows(ids: tf.RaggedTensor, text_index: tf.Tensor, starts: tf.Tensor,
                 ends: tf.Tensor) -> tf.RaggedTensor:
    """The pieces of the windows ``window_spans`` placed: int32 [windows, (pieces)]."""
    text_start = tf.gather(tf.cast(ids.row_starts(), tf.int32), text_index)
    positions = tf.ragged.range(text_start + starts, text_start + ends)
    return tf.RaggedTensor.from_row_splits(tf.gather(ids.flat_values, positions.flat_values),
                                           tf.cast(positions.row_splits, tf.int64))


def split_windows(ids: tf.RaggedTensor, window_length: int, stride: int,
                  max_windows: int | None = None) -> tuple[tf.RaggedTensor, tf.Tensor]:
    """Each text's pieces as overlapping windows (``window_spans``, then ``take_windows``).

    Args:
        ids: int32 [texts, (pieces)], each text's WordPieces.
        window_length: the most pieces in a window (seq_length - 2 for a single text).
        stride: pieces from one window's start to the next, 1 to ``window_length - 1``.
        max_windows: the most windows a text may have (see ``window_spans``). None: no limit.

    Returns:
        ``(windows, text_index)``: int32 [windows, (pieces)], every text's windows in order
        (texts in order), and int32 [windows], the text of each window.

    >>> windows, text_index = split_windows(tf.ragged.constant([[1, 2, 3, 4, 5], [6]]), 3, 2)
    >>> windows.to_list(), text_index.numpy().tolist()
    ([[1, 2, 3], [3, 4, 5], [6]], [0, 0, 1])
    """
    text_index, starts, ends = window_spans(ids.row_lengths(), window_length, stride,
                                            max_windows)
    return take_windows(ids, text_index, starts, ends), text_index


def segment_min(values: tf.Tensor, segment_ids: tf.Tensor, num_segments) -> tf.Tensor:
    """``tf.math.unsorted_segment_min`` of int32 ``values`` whose segments are all non-empty,
    written with the segment max that OpenVINO's TensorFlow front end converts (it has no
    UnsortedSegmentMin): the exports' merges of windows run in OpenVINO too.

    >>> segment_min(tf.constant([4, 2, 7]), tf.constant([0, 0, 1]), 2).numpy().tolist()
    [2, 7]
    """
    return -tf.math.unsorted_segment_max(-values, segment_ids, num_segments)
