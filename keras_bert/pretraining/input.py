"""The pretraining input pipeline: TFRecord files -> batches of BertPretrainer inputs and labels.

Deterministic for a given seed (fixed file order, seeded shuffles, ``deterministic`` interleave,
stateless masking seeds), so its iterator can be checkpointed with ``tf.train.Checkpoint`` and a
resumed run sees exactly the batches an uninterrupted one would. Reads records written by
google-research/bert or keras_bert.data (original or v2 names, plain or GZIP), sharded by file
across the input pipelines of a multi-worker strategy.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import tensorflow as tf

from keras_bert.pretraining_data.corpus import resolve_input_files
from keras_bert.pretraining.dynamic_masking import DynamicMasker
from keras_bert.pretraining.schema import parse_pretraining_example, restore_masked_tokens
from keras_bert.tokenization.packing import INPUT_NAMES

logger = logging.getLogger(__name__)

MODEL_INPUT_NAMES = (*INPUT_NAMES, "masked_lm_positions")
LABEL_NAMES = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
# The record features (original and v2 names) whose length each setting fixes.
LENGTH_SETTINGS = {
    "max_seq_length": ("input_ids", "input_word_ids", "input_mask", "segment_ids",
                       "input_type_ids"),
    "max_predictions_per_seq": ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"),
}


def _read_records(path: tf.Tensor) -> tf.data.Dataset:
    is_gzip = tf.strings.regex_full_match(path, r".*\.(gz|gzip)")
    return tf.data.TFRecordDataset(path, compression_type=tf.where(is_gzip, "GZIP", ""))


def _first_record_lengths(files: Sequence[str]) -> tuple[str, dict[str, int]] | None:
    """(path, {feature name: number of values}) of the first record in ``files``; None if empty."""
    for path in files:
        for record in _read_records(tf.constant(path)).take(1):
            features = tf.train.Example.FromString(record.numpy()).features.feature
            return path, {name: len(getattr(feature, feature.WhichOneof("kind")).value)
                          for name, feature in features.items()}
    return None


def check_record_lengths(input_files: str | Sequence[str], max_seq_length: int,
                         max_predictions_per_seq: int) -> None:
    """Raises ValueError when the records were written with other lengths than these.

    Reads the first record (local or gs://, plain or GZIP), so that a mismatch is reported
    before a model is built rather than as a parser error in the middle of the training loop.

    Args:
        input_files: comma-separated globs or a list of files.
        max_seq_length, max_predictions_per_seq: the lengths the reader will parse.

    Raises:
        ValueError: naming the file, the feature, the length it has and the setting to pass.
    """
    files = (resolve_input_files(input_files) if isinstance(input_files, str)
             else list(input_files))
    first = _first_record_lengths(files)
    if first is None:
        return
    path, lengths = first
    wanted = {"max_seq_length": max_seq_length,
              "max_predictions_per_seq": max_predictions_per_seq}
    for setting, names in LENGTH_SETTINGS.items():
        for name in (n for n in names if n in lengths and lengths[n] != wanted[setting]):
            found = lengths[name]
            raise ValueError(
                f"pretraining records in {path} were written with {setting}={found} (feature "
                f"{name!r} has {found} values) but {setting}={wanted[setting]} was given; "
                f"pass --{setting} {found} ({setting}={found} in PretrainingSettings)")


def pretraining_dataset(input_files: str | Sequence[str], batch_size: int, max_seq_length: int,
                        max_predictions_per_seq: int, *, is_training: bool = True,
                        seed: int = 0, shuffle_buffer_size: int = 1000,
                        masker: DynamicMasker | None = None,
                        input_context: tf.distribute.InputContext | None = None
                        ) -> tf.data.Dataset:
    """Batches of (inputs, labels) for BertPretrainer from pretraining TFRecords.

    Training repeats forever and shuffles files and records; evaluation reads each record once
    in order. With ``masker`` the static masks in the records are undone and each batch is
    masked afresh (the seed of batch i is (seed, i), so a resumed iterator masks identically).

    Args:
        input_files: comma-separated globs or a list of them.
        batch_size: examples per batch *of this input pipeline* (per replica under a strategy).
        max_seq_length, max_predictions_per_seq: the lengths the records were written with.
        is_training: repeat and shuffle.
        seed: seed of the file and record shuffles and of dynamic masking.
        shuffle_buffer_size: records held for shuffling.
        masker: re-mask dynamically with this DynamicMasker (its max_predictions_per_seq must
            equal ``max_predictions_per_seq``).
        input_context: from ``strategy.distribute_datasets_from_function``; the files are split
            among the input pipelines (records are, if there are fewer files than pipelines).

    Returns:
        A dataset of (inputs, labels) dicts. inputs: input_word_ids, input_mask,
        input_type_ids int32 [batch, max_seq_length], masked_lm_positions int32
        [batch, max_predictions_per_seq]. labels: masked_lm_ids int32 and masked_lm_weights
        float32 [batch, max_predictions_per_seq], next_sentence_labels int32 [batch].

    Example:
        >>> dataset = pretraining_dataset("data/*.tfrecord", 32, 128, 20)
        >>> inputs, labels = next(iter(dataset))
    """
    files = resolve_input_files(input_files if isinstance(input_files, str)
                                else ",".join(input_files))
    if masker is not None and masker.max_predictions_per_seq != max_predictions_per_seq:
        raise ValueError(f"the masker has max_predictions_per_seq="
                         f"{masker.max_predictions_per_seq} but the records have "
                         f"{max_predictions_per_seq}; build it with the same value")
    if tf.executing_eagerly():  # reading a record needs eager execution
        check_record_lengths(files, max_seq_length, max_predictions_per_seq)
    dataset = tf.data.Dataset.from_tensor_slices(files)
    shard_records = False
    if input_context and input_context.num_input_pipelines > 1:
        if len(files) >= input_context.num_input_pipelines:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        else:
            logger.warning("%d input files for %d input pipelines: every pipeline reads all "
                           "files and keeps its share of records; write more shards to read "
                           "less", len(files), input_context.num_input_pipelines)
            shard_records = True
    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    dataset = dataset.interleave(_read_records, cycle_length=min(len(files), 8), block_length=1,
                                 num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if shard_records:
        dataset = dataset.shard(input_context.num_input_pipelines,
                                input_context.input_pipeline_id)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed + 1,
                                  reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=is_training)
    dataset = dataset.map(
        lambda records: parse_pretraining_example(records, max_seq_length,
                                                  max_predictions_per_seq),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if masker is not None:
        dataset = dataset.enumerate().map(
            lambda index, features: _remask(features, masker, seed, index),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    dataset = dataset.map(_to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=True)
    options = tf.data.Options()
    options.deterministic = True
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


def _remask(features: dict[str, tf.Tensor], masker: DynamicMasker, seed: int,
            index: tf.Tensor) -> dict[str, tf.Tensor]:
    """Replaces the records' static masks with fresh ones seeded by (seed, batch index)."""
    token_ids = restore_masked_tokens(features)
    masked = masker(token_ids, features["input_mask"],
                    seed=tf.stack([tf.constant(seed, tf.int64), index]))
    return {**features, **masked}


def _to_model_inputs(features: dict[str, tf.Tensor]):
    inputs = {
        "input_word_ids": features["input_ids"],
        "input_mask": features["input_mask"],
        "input_type_ids": features["segment_ids"],
        "masked_lm_positions": tf.cast(features["masked_lm_positions"], tf.int32),
    }
    labels = {
        "masked_lm_ids": tf.cast(features["masked_lm_ids"], tf.int32),
        "masked_lm_weights": features["masked_lm_weights"],
        "next_sentence_labels": tf.reshape(features["next_sentence_labels"], [-1]),
    }
    return inputs, labels
