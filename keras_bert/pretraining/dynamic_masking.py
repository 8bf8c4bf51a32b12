"""Dynamic masked-LM masking in TensorFlow, for re-masking every epoch inside `tf.data`.

Same rules as the static masking of the TFRecord writer (`masking.py`): `masked_lm_prob` of the
maskable tokens, rounded, at least 1, at most `max_predictions_per_seq`; 80% [MASK], 10% a random
vocabulary token, 10% unchanged; whole-word masking takes all pieces of a word or none, skipping a
word that would overshoot the count (and, if no word fits, taking the first that fits the slots);
positions are sorted.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf

from keras_bert import fileio

_INT32_MAX = 2**31 - 1


def mask_tokens(token_ids: tf.Tensor, seed: tf.Tensor, *, vocab_size: int, mask_token_id: int,
                maskable: tf.Tensor, max_predictions_per_seq: int, masked_lm_prob: float = 0.15,
                continuation: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
    """Chooses and masks the predictions of a batch of sequences (stateless: same seed, same mask).

    Args:
        token_ids: int [batch_size, seq_length] unmasked ids.
        seed: int [2], the stateless random seed.
        vocab_size: random replacements are drawn from [0, vocab_size).
        mask_token_id: id of [MASK].
        maskable: bool [batch_size, seq_length]: positions that may be chosen (not special,
            not padding).
        max_predictions_per_seq: number of prediction slots.
        masked_lm_prob: share of the maskable tokens to predict.
        continuation: bool [batch_size, seq_length]: '##' pieces, for whole-word masking; None
            masks pieces independently.

    Returns:
        input_ids: [batch_size, seq_length] masked ids (dtype of `token_ids`);
        masked_lm_positions, masked_lm_ids: int32 [batch_size, max_predictions_per_seq], sorted
        positions and their original ids, 0-padded; masked_lm_weights: float32, 1.0 per slot used.
    """
    seq_length = tf.shape(token_ids)[1]
    order_seed, decision_seed, random_id_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, 3))
    positions = tf.broadcast_to(tf.range(seq_length), tf.shape(token_ids))

    num_maskable = tf.reduce_sum(tf.cast(maskable, tf.float64), axis=1)
    num_to_mask = tf.clip_by_value(tf.round(num_maskable * masked_lm_prob), 1.0,
                                   float(max_predictions_per_seq))
    num_to_mask = tf.cast(tf.minimum(num_to_mask, num_maskable), tf.int32)  # [batch_size]

    # Words: a maskable piece starts one unless it is '##' right after another maskable piece.
    word_start = maskable
    if continuation is not None:
        after_maskable = tf.pad(maskable[:, :-1], [[0, 0], [1, 0]])
        word_start = maskable & ~(continuation & after_maskable)
    word_id = tf.where(maskable, tf.cumsum(tf.cast(word_start, tf.int32), axis=1) - 1, seq_length)
    word_length = tf.math.bincount(word_id, minlength=seq_length + 1,
                                   maxlength=seq_length + 1, axis=-1)  # [batch, seq_length + 1]

    # Words in a random order: sort the start positions by a uniform priority.
    priority = tf.random.stateless_uniform(tf.shape(token_ids), order_seed)
    order = tf.argsort(tf.where(word_start, priority, 2.0), axis=1)
    length_in_order = tf.where(tf.gather(word_start, order, batch_dims=1),
                               tf.gather(word_length, tf.gather(word_id, order, batch_dims=1),
                                         batch_dims=1), 0)
    if continuation is None:
        taken_in_order = tf.range(seq_length)[None, :] < num_to_mask[:, None]
    else:
        # Greedy over the shuffled words: take a word if it still fits, else skip it.
        def take_if_fits(count, length):
            taken = tf.where(count + length <= num_to_mask, count + length, count)
            return tf.ensure_shape(taken, count.shape)

        counts = tf.scan(take_if_fits, tf.transpose(length_in_order),
                         initializer=tf.zeros_like(num_to_mask))
        previous = tf.concat([tf.zeros_like(counts[:1]), counts[:-1]], axis=0)
        taken_in_order = tf.transpose(counts > previous)
        # If no word fits the count, the first that fits the slots, so that one is masked.
        fits_slots = (length_in_order > 0) & (length_in_order <= max_predictions_per_seq)
        first_fit = tf.one_hot(tf.argmax(tf.cast(fits_slots, tf.int32), axis=1), seq_length,
                               on_value=True, off_value=False)
        taken_in_order |= first_fit & fits_slots & (counts[-1] == 0)[:, None]
    taken_in_order &= length_in_order > 0
    # Back from shuffled order to words, then to every piece of each taken word.
    taken_word = tf.where(taken_in_order, tf.gather(word_id, order, batch_dims=1), seq_length)
    word_taken = tf.math.bincount(taken_word, minlength=seq_length + 1,
                                  maxlength=seq_length + 1, axis=-1) > 0
    selected = tf.gather(word_taken, word_id, batch_dims=1) & maskable

    decision = tf.random.stateless_uniform(tf.shape(token_ids), decision_seed)
    random_ids = tf.random.stateless_uniform(tf.shape(token_ids), random_id_seed, minval=0,
                                             maxval=vocab_size, dtype=tf.int32)
    masked = tf.where(selected & (decision < 0.8), tf.cast(mask_token_id, token_ids.dtype),
                      tf.where(selected & (decision >= 0.8) & (decision < 0.9),
                               tf.cast(random_ids, token_ids.dtype), token_ids))

    # Selected positions first, ascending; then pad (or cut) to max_predictions_per_seq slots.
    slots = tf.argsort(tf.where(selected, positions, positions + seq_length), axis=1)
    slots = tf.pad(slots, [[0, 0], [0, tf.maximum(max_predictions_per_seq - seq_length, 0)]])
    slots = slots[:, :max_predictions_per_seq]
    used = tf.gather(selected, slots, batch_dims=1)
    return {
        "input_ids": masked,
        "masked_lm_positions": tf.where(used, slots, 0),
        "masked_lm_ids": tf.where(used, tf.cast(tf.gather(token_ids, slots, batch_dims=1),
                                                tf.int32), 0),
        "masked_lm_weights": tf.cast(used, tf.float32),
    }


class DynamicMasker(keras.layers.Layer):
    """Masks token ids for masked-LM pretraining, afresh on every call (RoBERTa-style).

    Works in `tf.data.Dataset.map` and inside a model, on one sequence [seq_length] or a batch
    [batch_size, seq_length]. Tokens listed in `unselectable_tokens` and positions where
    `input_mask` is 0 are never chosen.

    Args:
        vocabulary: the tokens in id order, or the path of a vocab file (one token per line).
        max_predictions_per_seq: number of prediction slots in the output.
        masked_lm_prob: share of maskable tokens to predict.
        whole_word_mask: mask all pieces of a word ('##' continuations) together.
        mask_token: the token that replaces 80% of the chosen ones.
        unselectable_tokens: tokens never chosen.
        seed: op-level seed of the random seed drawn when `call` gets none.

    Example:
        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s"]
        >>> masker = DynamicMasker(vocabulary, max_predictions_per_seq=2, masked_lm_prob=0.5)
        >>> dataset = tf.data.Dataset.from_tensor_slices([[2, 5, 6, 7, 3, 0]]).map(masker)
        >>> sorted(next(iter(dataset)))
        ['input_ids', 'masked_lm_ids', 'masked_lm_positions', 'masked_lm_weights']
        >>> next(iter(dataset))["masked_lm_weights"].numpy().tolist()
        [1.0, 1.0]
    """

    def __init__(self, vocabulary: str | Sequence[str], max_predictions_per_seq: int = 20,
                 masked_lm_prob: float = 0.15, whole_word_mask: bool = False,
                 mask_token: str = "[MASK]",
                 unselectable_tokens: Sequence[str] = ("[CLS]", "[SEP]", "[PAD]"),
                 seed: int | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        tokens = vocabulary
        if isinstance(vocabulary, str):
            with fileio.open_file(vocabulary) as f:
                tokens = [line.rstrip("\n").strip() for line in f]
        tokens = list(tokens)
        if mask_token not in tokens:
            raise ValueError(f"mask token {mask_token!r} is not in the vocabulary "
                             f"{vocabulary if isinstance(vocabulary, str) else ''}".rstrip())
        unselectable = set(unselectable_tokens)
        self.vocab_size = len(tokens)
        self.mask_token_id = tokens.index(mask_token)
        self._unselectable = tf.constant([t in unselectable for t in tokens])  # [vocab_size]
        self._continuation = tf.constant([t.startswith("##") for t in tokens])  # [vocab_size]
        self.vocabulary = vocabulary
        self.max_predictions_per_seq = max_predictions_per_seq
        self.masked_lm_prob = masked_lm_prob
        self.whole_word_mask = whole_word_mask
        self.mask_token = mask_token
        self.unselectable_tokens = tuple(unselectable_tokens)
        self.seed = seed

    def call(self, token_ids, input_mask=None, seed=None) -> dict[str, tf.Tensor]:
        """Masks `token_ids` int [..., seq_length]; `seed` int [2] makes the mask reproducible.

        Returns a dict with input_ids [..., seq_length] (masked), and masked_lm_positions,
        masked_lm_ids (int32), masked_lm_weights (float32), each [..., max_predictions_per_seq].
        """
        token_ids = tf.convert_to_tensor(token_ids)
        single = token_ids.shape.rank == 1
        batch = token_ids[None] if single else token_ids
        maskable = ~tf.gather(self._unselectable, batch)
        if input_mask is not None:
            mask = tf.convert_to_tensor(input_mask)
            maskable &= tf.cast(mask[None] if single else mask, tf.bool)
        if seed is None:
            seed = tf.random.uniform([2], maxval=_INT32_MAX, dtype=tf.int32, seed=self.seed)
        outputs = mask_tokens(
            batch, seed, vocab_size=self.vocab_size, mask_token_id=self.mask_token_id,
            maskable=maskable, max_predictions_per_seq=self.max_predictions_per_seq,
            masked_lm_prob=self.masked_lm_prob,
            continuation=tf.gather(self._continuation, batch) if self.whole_word_mask else None)
        return {name: value[0] for name, value in outputs.items()} if single else outputs

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(vocabulary=self.vocabulary,
                      max_predictions_per_seq=self.max_predictions_per_seq,
                      masked_lm_prob=self.masked_lm_prob, whole_word_mask=self.whole_word_mask,
                      mask_token=self.mask_token, unselectable_tokens=self.unselectable_tokens,
                      seed=self.seed)
        return config
