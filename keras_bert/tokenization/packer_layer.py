"""BertPackerLayer: a Keras layer that packs token ids into the TF Hub encoder inputs in-graph,
as ``[CLS] a [SEP] (b [SEP])`` truncated as Google does, with type ids, mask and padding.

The in-graph twin of ``packing.pack_ids``: the same layout and the same truncation, checked on
every pair of lengths by the tests."""

from __future__ import annotations

import keras
import tensorflow as tf

from keras_bert.tokenization.packing import INPUT_NAMES


@keras.saving.register_keras_serializable(package="keras_bert")
class BertPackerLayer(keras.layers.Layer):
    """Token ids of one or two segments -> ``input_word_ids``, ``input_mask``,
    ``input_type_ids`` (int32 [batch, seq_length]).

    Call it on the ids of one segment or on a pair ``(ids_a, ids_b)``, each int [batch,
    (tokens)] (ragged; a dense [batch, tokens] keeps every position). A pair is truncated as
    Google's ``_truncate_seq_pair`` (the longer segment loses its last token until the pair
    fits); a row whose second segment is empty is packed as a single text, as Google's
    run_classifier.py packs an empty text_b. It works in ``tf.data.Dataset.map`` and inside a
    Keras model; ragged inputs keep it out of XLA (``supports_jit = False``).

    Args:
        seq_length: the packed length, [CLS] and [SEP] included.
        cls_id, sep_id, pad_id: the ids of [CLS], [SEP] and [PAD] (``BertPreprocessor`` sets
            them from its vocabulary).
        **kwargs: Keras layer arguments (``name``...).

    >>> packer = BertPackerLayer(seq_length=7, cls_id=2, sep_id=3, pad_id=0)
    >>> packed = packer((tf.ragged.constant([[5, 6, 7]]), tf.ragged.constant([[8]])))
    >>> packed["input_word_ids"].numpy().tolist(), packed["input_type_ids"].numpy().tolist()
    ([[2, 5, 6, 7, 3, 8, 3]], [[0, 0, 0, 0, 0, 1, 1]])
    """

    def __init__(self, seq_length: int = 128, *, cls_id: int, sep_id: int, pad_id: int,
                 **kwargs):
        super().__init__(**kwargs)
        if seq_length < 2:
            raise ValueError(f"seq_length={seq_length} leaves no room for [CLS] and [SEP]")
        self.seq_length = seq_length
        self.cls_id, self.sep_id, self.pad_id = cls_id, sep_id, pad_id
        self.supports_jit = False
        self.built = True

    @tf.autograph.experimental.do_not_convert
    def call(self, inputs) -> dict[str, tf.Tensor]:
        segments = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"BertPackerLayer packs one or two segments, got {len(segments)}")
        if len(segments) == 2 and self.seq_length < 3:
            raise ValueError(f"seq_length={self.seq_length} leaves no room for a pair's [CLS] "
                             f"and two [SEP]")
        for index, ids in enumerate(segments):
            if ids.shape.rank != 2:
                raise ValueError(f"BertPackerLayer: segment {index} must be token ids of rank 2 "
                                 f"([batch, (tokens)]), got rank {ids.shape.rank}")
        return self.pack(*(_as_ragged_ids(ids) for ids in segments))

    @tf.autograph.experimental.do_not_convert
    def pack(self, ids_a: tf.RaggedTensor, ids_b: tf.RaggedTensor | None = None
             ) -> dict[str, tf.Tensor]:
        """Packs token ids as ``[CLS] a [SEP] (b [SEP])``, truncated and padded to seq_length.

        Args:
            ids_a: int32 [batch, (tokens)], the first segments.
            ids_b: int32 [batch, (tokens)], the second segments, or None. A row whose second
                segment is empty is packed as a single text (``[CLS] a [SEP]``, a truncated to
                seq_length - 2).

        Returns:
            ``input_word_ids``, ``input_mask``, ``input_type_ids``: int32 [batch, seq_length].
        """
        return pack_segments(ids_a, ids_b, self.seq_length, cls_id=self.cls_id,
                             sep_id=self.sep_id, pad_id=self.pad_id)

    def compute_output_spec(self, inputs):
        first = inputs[0] if isinstance(inputs, (tuple, list)) else inputs
        shape = (first.shape[0], self.seq_length)
        return {name: keras.KerasTensor(shape, dtype="int32") for name in INPUT_NAMES}

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(seq_length=self.seq_length, cls_id=self.cls_id, sep_id=self.sep_id,
                      pad_id=self.pad_id)
        return config


def pack_segments(ids_a: tf.RaggedTensor, ids_b: tf.RaggedTensor | None, seq_length,
                  *, cls_id: int, sep_id: int, pad_id: int) -> dict[str, tf.Tensor]:
    """``BertPackerLayer.pack`` with the packed length as an argument: a Python int (the
    outputs' length is then static) or an int32 scalar tensor (chosen at run time, as TF Hub's
    ``bert_pack_inputs(segments, seq_length=...)`` takes it; too short a length fails there).

    Args:
        ids_a, ids_b: int32 [batch, (tokens)] each; ``ids_b`` may be None.
        seq_length: the packed length, [CLS] and [SEP] included.
        cls_id, sep_id, pad_id: the ids of [CLS], [SEP] and [PAD].

    Returns:
        ``input_word_ids``, ``input_mask``, ``input_type_ids``: int32 [batch, seq_length].
    """
    length = seq_length
    if not isinstance(length, int):
        length = tf.convert_to_tensor(length, tf.int32)
        with tf.control_dependencies([tf.debugging.assert_greater_equal(
                length, 2 if ids_b is None else 3,
                message="seq_length leaves no room for [CLS] and the [SEP] of each segment")]):
            length = tf.identity(length)
    position = tf.range(length)[None, :]  # [1, seq_length]
    if ids_b is None:
        keep_a = tf.minimum(tf.cast(ids_a.row_lengths(), tf.int32), length - 2)[:, None]
        b_start = end = keep_a + 2  # No second segment.
    else:
        length_a = tf.cast(ids_a.row_lengths(), tf.int32)
        length_b = tf.cast(ids_b.row_lengths(), tf.int32)
        pair_a, pair_b = pair_lengths(length_a, length_b, length - 3)
        has_b = length_b > 0
        keep_a = tf.where(has_b, pair_a, tf.minimum(length_a, length - 2))[:, None]
        keep_b = tf.where(has_b, pair_b, 0)[:, None]  # [batch, 1]
        b_start = keep_a + 2
        end = tf.where(has_b[:, None], keep_a + keep_b + 3, keep_a + 2)
    word_ids = tf.where(position == 0, cls_id, pad_id)
    word_ids = tf.where((position >= 1) & (position <= keep_a),
                        _shifted(ids_a, position - 1, length), word_ids)
    if ids_b is not None:
        word_ids = tf.where((position >= b_start) & (position < end - 1),
                            _shifted(ids_b, position - b_start, length), word_ids)
    word_ids = tf.where((position == keep_a + 1) | (position == end - 1), sep_id,
                        word_ids)
    return {
        "input_word_ids": word_ids,
        "input_mask": tf.cast(position < end, tf.int32),
        "input_type_ids": tf.cast((position >= b_start) & (position < end), tf.int32),
    }


def _as_ragged_ids(ids) -> tf.RaggedTensor:
    """int ids [batch, (tokens)] or [batch, tokens] -> int32 ragged [batch, (tokens)]."""
    if isinstance(ids, tf.RaggedTensor):
        return tf.cast(ids, tf.int32)
    return tf.RaggedTensor.from_tensor(tf.cast(ids, tf.int32))


def _shifted(ids: tf.RaggedTensor, index: tf.Tensor, length: int) -> tf.Tensor:
    """Row i of ``ids`` read at ``index[i]`` (clipped): int32 [batch, length]."""
    shape = [None, length] if isinstance(length, int) else tf.stack([-1, length])
    dense = ids.to_tensor(0, shape=shape)
    index = tf.clip_by_value(tf.broadcast_to(index, tf.shape(dense)), 0, length - 1)
    return tf.gather(dense, index, batch_dims=1)


def pair_lengths(length_a: tf.Tensor, length_b: tf.Tensor, budget: int):
    """Google's _truncate_seq_pair, in closed form: the lengths it leaves.

    Removing from the longer segment (b on a tie) until the pair fits is the same as giving each
    segment turns, a first: a short segment keeps everything and the other gets the rest;
    otherwise a keeps ceil(budget / 2) and b floor(budget / 2).
    """
    half_a, half_b = (budget + 1) // 2, budget // 2
    keep_a = tf.where(length_a <= half_a, length_a,
                      tf.where(length_b <= half_b, tf.minimum(length_a, budget - length_b),
                               half_a))
    keep_b = tf.where(length_a <= half_a, tf.minimum(length_b, budget - length_a),
                      tf.where(length_b <= half_b, length_b, half_b))
    return keep_a, keep_b
