"""Serializes BERT pretraining instances as `tf.train.Example` protos in pure Python.

The encoder writes the protobuf wire format directly (no TensorFlow, no protobuf message objects),
so the data-writing workers stay light and fast. Its output parses with `tf.io.parse_example` and
`tf.train.Example.FromString` like any other Example.
"""

from __future__ import annotations

import struct

from keras_bert.pretraining_data.feature_names import feature_names

# Protobuf tags (field number << 3 | wire type 2 = length-delimited) used by tf.train.Example:
# Example.features = 1, Features.feature (map entry) = 1, entry key = 1, entry value = 2,
# Feature.float_list = 2, Feature.int64_list = 3, Int64List/FloatList.value (packed) = 1.
_TAG_FIELD_1 = b"\x0a"
_TAG_FIELD_2 = b"\x12"
_TAG_FIELD_3 = b"\x1a"


def _varint(value: int) -> bytes:
    """The protobuf base-128 varint of a non-negative integer."""
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _length_delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


class _FeatureHeaders:
    """Caches the bytes before a feature's packed values; they depend only on the values' size.

    One map entry of Features.feature: key -> Feature{int64_list | float_list{packed values}}.
    """

    def __init__(self, key: str, is_float: bool) -> None:
        self.key_field = _length_delimited(_TAG_FIELD_1, key.encode("ascii"))
        self.kind_tag = _TAG_FIELD_2 if is_float else _TAG_FIELD_3
        self.by_size: dict[int, bytes] = {}

    def __call__(self, packed_values: bytes) -> bytes:
        header = self.by_size.get(len(packed_values))
        if header is None:
            value_list_header = _TAG_FIELD_1 + _varint(len(packed_values))
            feature_size = len(value_list_header) + len(packed_values)
            feature_header = self.kind_tag + _varint(feature_size)
            value_size = len(feature_header) + feature_size
            value_header = _TAG_FIELD_2 + _varint(value_size)
            entry_size = len(self.key_field) + len(value_header) + value_size
            header = (_TAG_FIELD_1 + _varint(entry_size) + self.key_field + value_header
                      + feature_header + value_list_header)
            self.by_size[len(packed_values)] = header
        return header + packed_values


class PretrainingExampleEncoder:
    """Turns one masked instance into a serialized `tf.train.Example` with the original schema.

    Features (all fixed length; see DESIGN.md): input_ids, input_mask, segment_ids
    [max_seq_length] int64; masked_lm_positions, masked_lm_ids [max_predictions_per_seq] int64;
    masked_lm_weights [max_predictions_per_seq] float32; next_sentence_labels [1] int64. With
    `v2_feature_names`, input_ids and segment_ids are named input_word_ids and input_type_ids.

    Args:
        vocab_size: ids must lie in [0, vocab_size).
        max_seq_length: length every sequence feature is padded to.
        max_predictions_per_seq: length every masked-LM feature is padded to.
        v2_feature_names: write TF Model Garden's names.

    Example:
        >>> encoder = PretrainingExampleEncoder(vocab_size=100, max_seq_length=8,
        ...                                     max_predictions_per_seq=2)
        >>> record = encoder.encode([2, 7, 3, 9, 3], num_segment_a_tokens=3,
        ...                         masked_lm_positions=[1], masked_lm_ids=[8], is_random_next=False)
    """

    def __init__(self, vocab_size: int, max_seq_length: int, max_predictions_per_seq: int,
                 v2_feature_names: bool = False) -> None:
        self.vocab_size = vocab_size
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        entry = {name: _FeatureHeaders(record_name, name == "masked_lm_weights")
                 for name, record_name in feature_names(v2_feature_names).items()}
        self._ids_entry = entry["input_ids"]
        self._segment_ids_entry = entry["segment_ids"]
        self._positions_entry = entry["masked_lm_positions"]
        self._labels_entry = entry["masked_lm_ids"]
        # Whole entries that depend on a count only, by the count.
        self._input_mask_entries = [
            entry["input_mask"](b"\x01" * n + b"\x00" * (max_seq_length - n))
            for n in range(max_seq_length + 1)]
        self._weights_entries = [
            entry["masked_lm_weights"](struct.pack("<f", 1.0) * n
                                       + b"\x00" * 4 * (max_predictions_per_seq - n))
            for n in range(max_predictions_per_seq + 1)]
        self._next_sentence_entries = [entry["next_sentence_labels"](b"\x00"),
                                       entry["next_sentence_labels"](b"\x01")]
        # Varints of every id and position, looked up instead of computed per value.
        self._varints = [_varint(i) for i in range(max(vocab_size, max_seq_length))]
        # Positions below 128 are one-byte varints: their bytes are the values themselves.
        self._positions_are_bytes = max_seq_length <= 128
        self._example_headers: dict[int, bytes] = {}

    def encode(self, input_ids: list[int], num_segment_a_tokens: int,
               masked_lm_positions: list[int], masked_lm_ids: list[int],
               is_random_next: bool) -> bytes:
        """Serializes one instance.

        Args:
            input_ids: [seq_length <= max_seq_length] ids of `[CLS] A [SEP] B [SEP]`, masked.
            num_segment_a_tokens: length of `[CLS] A [SEP]`; later tokens get segment id 1.
            masked_lm_positions: [num_predictions <= max_predictions_per_seq] sorted positions.
            masked_lm_ids: [num_predictions] the original ids at those positions.
            is_random_next: True if B was drawn from another document (label 1).

        Returns:
            The serialized `tf.train.Example`.
        """
        seq_length = len(input_ids)
        num_predictions = len(masked_lm_positions)
        padding = self.max_seq_length - seq_length
        prediction_padding = self.max_predictions_per_seq - num_predictions
        if padding < 0 or prediction_padding < 0:
            raise ValueError(
                f"instance has {seq_length} tokens and {num_predictions} predictions; "
                f"max_seq_length={self.max_seq_length}, "
                f"max_predictions_per_seq={self.max_predictions_per_seq}")
        varints = self._varints
        try:
            packed_ids = b"".join([varints[i] for i in input_ids])
            packed_labels = b"".join([varints[i] for i in masked_lm_ids])
        except IndexError:
            raise ValueError(f"an id in {input_ids + masked_lm_ids} is outside "
                             f"[0, vocab_size={self.vocab_size})") from None
        packed_positions = (bytes(masked_lm_positions) if self._positions_are_bytes
                            else b"".join([varints[i] for i in masked_lm_positions]))
        body = b"".join((
            self._ids_entry(packed_ids + b"\x00" * padding),
            self._input_mask_entries[seq_length],
            self._segment_ids_entry(b"\x00" * num_segment_a_tokens
                                    + b"\x01" * (seq_length - num_segment_a_tokens)
                                    + b"\x00" * padding),
            self._positions_entry(packed_positions + b"\x00" * prediction_padding),
            self._labels_entry(packed_labels + b"\x00" * prediction_padding),
            self._weights_entries[num_predictions],
            self._next_sentence_entries[is_random_next],
        ))
        header = self._example_headers.get(len(body))
        if header is None:
            header = self._example_headers[len(body)] = _TAG_FIELD_1 + _varint(len(body))
        return header + body
