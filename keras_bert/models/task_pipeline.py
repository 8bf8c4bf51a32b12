"""tf.data for fine-tuning: examples as tensors, batched, turned into packed ids by a preprocessing
function inside the pipeline, and optionally bucketed by length so that short sequences are not
padded to the longest one. Nothing here runs in the model, so the model only ever sees int32 ids
(what TPUs and every tf.distribute strategy need)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf

from keras_bert.tokenization.packing import INPUT_NAMES  # noqa: F401  (re-exported)

IGNORED_LABEL = -1  # token labels with this value are left out of the loss and the metrics


def is_packed(x) -> bool:
    """Whether ``x`` (arrays, tensors or a tf.data element spec) already holds packed ids."""
    return isinstance(x, dict) and "input_word_ids" in x


def _sequence_length(x) -> tf.Tensor:
    """The longest real length in one example (mask [seq] or [num_choices, seq])."""
    return tf.cast(tf.reduce_max(tf.reduce_sum(tf.cast(x["input_mask"], tf.int32), axis=-1)),
                   tf.int64)


def _trim(x, length, token_level: bool):
    """Cuts packed inputs (and token-level labels) to ``length`` positions; other inputs (a
    classifier's features) have no sequence axis and stay as they are."""
    if not token_level:
        return x
    if isinstance(x, dict):
        return {name: value[..., :length] if name in INPUT_NAMES else value
                for name, value in x.items()}
    return tf.nest.map_structure(lambda t: t[..., :length], x)


def bucket_by_length(dataset: tf.data.Dataset, batch_size: int, bucket_lengths: Sequence[int],
                     token_level_labels: bool = False, drop_remainder: bool = False
                     ) -> tf.data.Dataset:
    """Batches unbatched packed examples in buckets of similar length.

    Each example is cut to its real length, grouped with examples that fit the same bucket, and
    padded to that bucket's length, so a batch has one of ``len(bucket_lengths)`` static shapes
    (XLA and TPUs compile one program per shape).

    Args:
        dataset: unbatched elements ``x`` or ``(x, y)`` or ``(x, y, sample_weight)`` with ``x`` a
            dict of packed int32 ids, [seq] or [num_choices, seq].
        batch_size: examples per batch.
        bucket_lengths: the padded lengths, ascending; the last must be at least the longest
            sequence (the preprocessor's seq_length).
        token_level_labels: labels (and sample weights) have a sequence axis to trim and pad,
            with IGNORED_LABEL (weights with 0).
        drop_remainder: drop each bucket's last partial batch (static batch size for TPUs).

    Returns:
        The batched dataset.

    Example:
    >>> ids = tf.constant([[2, 5, 3, 0, 0, 0], [2, 5, 6, 7, 8, 3]])
    >>> x = {"input_word_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32),
    ...      "input_type_ids": tf.zeros_like(ids)}
    >>> batches = bucket_by_length(tf.data.Dataset.from_tensor_slices(x), 2, [4, 6])
    >>> sorted(b["input_word_ids"].shape[1] for b in batches)
    [4, 6]
    """
    lengths = sorted(int(b) for b in bucket_lengths)

    def trim(*element):
        length = _sequence_length(element[0])
        x = _trim(element[0], length, True)
        rest = tuple(_trim(e, length, token_level_labels) for e in element[1:])
        return (x, *rest) if rest else x

    def padding_values(element_spec):
        def value(spec, label_like):
            if label_like and token_level_labels:
                return tf.constant(IGNORED_LABEL if spec.dtype.is_integer else 0, spec.dtype)
            return tf.constant("" if spec.dtype == tf.string else 0, spec.dtype)
        if isinstance(element_spec, tuple):
            return tuple(tf.nest.map_structure(lambda s, i=i: value(s, i > 0), part)
                         for i, part in enumerate(element_spec))
        return tf.nest.map_structure(lambda s: value(s, False), element_spec)

    dataset = dataset.map(trim, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.bucket_by_sequence_length(
        element_length_func=lambda *e: tf.cast(_sequence_length(e[0]), tf.int32),
        bucket_boundaries=[b + 1 for b in lengths],
        bucket_batch_sizes=[batch_size] * (len(lengths) + 1),
        padding_values=padding_values(dataset.element_spec),
        pad_to_bucket_boundary=True, drop_remainder=drop_remainder)


def make_task_dataset(data: tuple, preprocess: Callable, batch_size: int, shuffle: bool = False,
                      seed: int | None = None, bucket_lengths: Sequence[int] | None = None,
                      token_level_labels: bool = False, drop_remainder: bool = False,
                      preprocess_batch_size: int = 256) -> tf.data.Dataset:
    """A batched dataset of packed ids from in-memory examples.

    Args:
        data: ``(x,)``, ``(x, y)`` or ``(x, y, sample_weight)``, arrays with one row per
            example; ``x`` is raw text (string arrays, a tuple of them for pairs) or packed ids.
        preprocess: maps a batch of ``x`` to the packed ids dict (e.g. a BertPreprocessor); runs
            in the tf.data pipeline.
        batch_size: examples per batch.
        shuffle: reshuffle the examples every epoch.
        seed: shuffle seed.
        bucket_lengths: when given, batch by length (see ``bucket_by_length``).
        token_level_labels: labels have a sequence axis (tagging).
        drop_remainder: only full batches.
        preprocess_batch_size: examples tokenized together when bucketing.

    Returns:
        A prefetching dataset of ``(packed x, y[, sample_weight])`` batches (or ``packed x``).
    """
    dataset = tf.data.Dataset.from_tensor_slices(data)
    if shuffle:
        dataset = dataset.shuffle(int(dataset.cardinality()), seed=seed,
                                  reshuffle_each_iteration=True)

    def apply(*element):
        x = element[0] if is_packed(element[0]) else preprocess(element[0])
        return (x, *element[1:]) if len(element) > 1 else x

    if bucket_lengths:
        dataset = dataset.batch(preprocess_batch_size).map(apply, tf.data.AUTOTUNE).unbatch()
        dataset = bucket_by_length(dataset, batch_size, bucket_lengths, token_level_labels,
                                   drop_remainder)
    else:
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
        dataset = dataset.map(apply, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)
