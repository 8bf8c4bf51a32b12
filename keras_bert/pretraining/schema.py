"""The BERT pretraining TFRecord schema: feature names, the fixed-length spec and the parser.

Records are byte-compatible with google-research/bert's `run_pretraining.py`. The parser also
accepts TF Model Garden's v2 names (input_word_ids, input_type_ids for input_ids, segment_ids).
"""

from __future__ import annotations

import tensorflow as tf

from keras_bert.pretraining_data.feature_names import ORIGINAL_FEATURE_NAMES, V2_RENAMES, feature_names

__all__ = ["ORIGINAL_FEATURE_NAMES", "V2_RENAMES", "feature_names", "parse_pretraining_example",
           "pretraining_feature_spec", "restore_masked_tokens"]
_SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
_PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def pretraining_feature_spec(max_seq_length: int, max_predictions_per_seq: int,
                             v2_feature_names: bool = False) -> dict[str, tf.io.FixedLenFeature]:
    """The fixed-length `tf.io` spec of one record, as `run_pretraining.py` declares it.

    Args:
        max_seq_length: length of input_ids, input_mask, segment_ids.
        max_predictions_per_seq: length of masked_lm_positions, masked_lm_ids, masked_lm_weights.
        v2_feature_names: key the spec by TF Model Garden's names.

    Returns:
        Record feature name -> `tf.io.FixedLenFeature`; all int64 except masked_lm_weights
        (float32); next_sentence_labels has length 1.
    """
    spec = {}
    for name, record_name in feature_names(v2_feature_names).items():
        length = (max_seq_length if name in _SEQUENCE_FEATURES
                  else max_predictions_per_seq if name in _PREDICTION_FEATURES else 1)
        dtype = tf.float32 if name == "masked_lm_weights" else tf.int64
        spec[record_name] = tf.io.FixedLenFeature([length], dtype)
    return spec


def parse_pretraining_example(serialized: tf.Tensor, max_seq_length: int,
                              max_predictions_per_seq: int,
                              v2_feature_names: bool = False) -> dict[str, tf.Tensor]:
    """Parses serialized pretraining records written with either set of feature names.

    Usable in `tf.data.Dataset.map`, on one record or on a batch of them. Integer features are
    cast to int32 (as `run_pretraining.py` does, for TPUs). A record of the wrong length fails
    with the parser's error; a record with neither input_ids nor input_word_ids fails with an
    InvalidArgumentError naming both.

    Args:
        serialized: [] or [batch_size] string tensor of serialized `tf.train.Example`s.
        max_seq_length: the length the records were written with.
        max_predictions_per_seq: the number of prediction slots the records were written with.
        v2_feature_names: name the outputs input_word_ids / input_type_ids instead of
            input_ids / segment_ids.

    Returns:
        A dict with input_ids (or input_word_ids), input_mask, segment_ids (or input_type_ids):
        int32 [..., max_seq_length]; masked_lm_positions, masked_lm_ids: int32
        [..., max_predictions_per_seq]; masked_lm_weights: float32 [..., max_predictions_per_seq];
        next_sentence_labels: int32 [..., 1].

    Example:
        >>> from keras_bert.pretraining_data.example_encoder import PretrainingExampleEncoder
        >>> record = PretrainingExampleEncoder(100, 8, 2).encode(
        ...     [2, 7, 3, 4, 3], 3, masked_lm_positions=[3], masked_lm_ids=[9],
        ...     is_random_next=True)
        >>> features = parse_pretraining_example(tf.constant(record), 8, 2)
        >>> features["input_ids"].numpy().tolist(), features["segment_ids"].numpy().tolist()
        ([2, 7, 3, 4, 3, 0, 0, 0], [0, 0, 0, 1, 1, 0, 0, 0])
        >>> restore_masked_tokens(features).numpy().tolist()
        [2, 7, 3, 9, 3, 0, 0, 0]
    """
    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    for name, v2_name in V2_RENAMES.items():
        # Either name may be present; -1 (never a valid id) marks the absent one.
        for key in (name, v2_name):
            spec[key] = tf.io.FixedLenFeature([max_seq_length], tf.int64,
                                              default_value=[-1] * max_seq_length)
    parsed = tf.io.parse_example(serialized, spec)
    present = parsed["input_ids"][..., :1] >= 0
    tf.debugging.assert_equal(
        tf.reduce_all(present | (parsed["input_word_ids"][..., :1] >= 0)), True,
        message="pretraining record has neither input_ids nor input_word_ids")
    outputs = {}
    for name in ORIGINAL_FEATURE_NAMES:
        if name in V2_RENAMES:
            value = tf.where(present, parsed.pop(name), parsed.pop(V2_RENAMES[name]))
        else:
            value = parsed[name]
        if value.dtype == tf.int64:
            value = tf.cast(value, tf.int32)
        outputs[V2_RENAMES.get(name, name) if v2_feature_names else name] = value
    return outputs


def restore_masked_tokens(features: dict[str, tf.Tensor],
                          v2_feature_names: bool = False) -> tf.Tensor:
    """The unmasked input ids of a parsed record: masked_lm_ids put back at their positions.

    Lets a pipeline re-mask statically masked records dynamically every epoch.

    Args:
        features: output of `parse_pretraining_example`, one record or a batch.
        v2_feature_names: whether `features` uses the v2 names.

    Returns:
        int32 [..., max_seq_length]: input ids as tokenized, before masking.
    """
    input_ids = features["input_word_ids" if v2_feature_names else "input_ids"]
    positions = features["masked_lm_positions"]
    seq_length = tf.shape(input_ids)[-1]
    # [..., max_predictions_per_seq, max_seq_length]: which slot writes which position.
    slots = tf.one_hot(positions, seq_length, dtype=input_ids.dtype)
    slots *= tf.cast(features["masked_lm_weights"] > 0, input_ids.dtype)[..., None]
    is_masked = tf.reduce_max(slots, axis=-2)
    originals = tf.reduce_sum(slots * features["masked_lm_ids"][..., None], axis=-2)
    return input_ids * (1 - is_masked) + originals
