"""DynamicMasker: the static rules, in TensorFlow, inside tf.data, reproducible by seed."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.pretraining.dynamic_masking import DynamicMasker
from keras_bert.pretraining_data.masking import num_tokens_to_mask

# 5 specials, 95 whole pieces (5..99), 100 '##' pieces (100..199).
VOCABULARY = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]
              + [f"##p{i}" for i in range(100)])
PAD, CLS, SEP, MASK = 0, 2, 3, 4


def _batch(num_rows, seq_length, seed):
    """[CLS] A [SEP] B [SEP] rows of random lengths, padded; about a third '##' pieces."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((num_rows, seq_length), np.int32)
    for row in range(num_rows):
        length = rng.integers(8, seq_length + 1)
        ids[row, :length] = rng.integers(5, 200, size=length)
        ids[row, 1] = rng.integers(5, 100)  # a word starts after [CLS]
        ids[row, [0, length // 2, length - 1]] = [CLS, SEP, SEP]
    return ids, (ids != PAD).astype(np.int32)


def _check_rows(ids, mask, outputs, max_predictions, whole_word):
    masked = outputs["input_ids"].numpy()
    positions = outputs["masked_lm_positions"].numpy()
    labels = outputs["masked_lm_ids"].numpy()
    weights = outputs["masked_lm_weights"].numpy()
    totals = dict(maskable=0, masked=0, mask=0, random=0, kept=0)
    for row in range(len(ids)):
        used = int(weights[row].sum())
        chosen = positions[row, :used]
        maskable = (mask[row] == 1) & (ids[row] > MASK)
        assert list(chosen) == sorted(set(chosen)), "positions ascending, distinct"
        assert maskable[chosen].all(), "never a special token or padding"
        assert (positions[row, used:] == 0).all() and (labels[row, used:] == 0).all()
        assert (weights[row, :used] == 1).all() and (weights[row, used:] == 0).all()
        np.testing.assert_array_equal(labels[row, :used], ids[row, chosen])
        untouched = np.setdiff1d(np.arange(ids.shape[1]), chosen)
        np.testing.assert_array_equal(masked[row, untouched], ids[row, untouched])
        target = num_tokens_to_mask(int(maskable.sum()), 0.15, max_predictions)
        if whole_word:
            # At most the count, unless no word fits it; then exactly one word (contiguous).
            assert 1 <= used <= target or (np.diff(chosen) == 1).all()
            is_piece = ids[row] >= 100
            for p in range(2, ids.shape[1]):
                if is_piece[p] and maskable[p - 1]:
                    assert (p in chosen) == (p - 1 in chosen), "a word is masked whole"
        else:
            assert used == target
        totals["maskable"] += int(maskable.sum())
        totals["masked"] += used
        totals["mask"] += int((masked[row, chosen] == MASK).sum())
        totals["kept"] += int((masked[row, chosen] == ids[row, chosen]).sum())
    totals["random"] = totals["masked"] - totals["mask"] - totals["kept"]
    return totals


@pytest.mark.parametrize("whole_word", [False, True])
def test_dynamic_masking_statistics(whole_word):
    ids, mask = _batch(1500, 64, seed=0)
    masker = DynamicMasker(VOCABULARY, max_predictions_per_seq=12, whole_word_mask=whole_word)
    totals = _check_rows(ids, mask, masker(ids, mask, seed=tf.constant([7, 1])), 12, whole_word)
    share = totals["masked"] / totals["maskable"]
    assert share == pytest.approx(0.15, abs=0.015 if not whole_word else 0.03)
    assert totals["mask"] / totals["masked"] == pytest.approx(0.8, abs=0.015)
    # A random token may equal the original (1 in 200 here), which counts as kept.
    assert totals["random"] / totals["masked"] == pytest.approx(0.1, abs=0.015)
    assert totals["kept"] / totals["masked"] == pytest.approx(0.1, abs=0.015)


def test_same_seed_same_mask_other_seed_other_mask():
    ids, mask = _batch(8, 32, seed=1)
    masker = DynamicMasker(VOCABULARY, max_predictions_per_seq=6)
    first = masker(ids, mask, seed=tf.constant([1, 2], tf.int64))
    again = masker(ids, mask, seed=tf.constant([1, 2], tf.int64))
    other = masker(ids, mask, seed=tf.constant([1, 3], tf.int64))
    np.testing.assert_array_equal(first["input_ids"], again["input_ids"])
    assert not np.array_equal(first["masked_lm_positions"], other["masked_lm_positions"])


def test_works_in_tf_data_on_single_sequences_and_round_trips_its_config():
    ids, mask = _batch(64, 24, seed=2)
    masker = DynamicMasker(VOCABULARY, max_predictions_per_seq=4, whole_word_mask=True)
    dataset = tf.data.Dataset.from_tensor_slices((ids, mask)).map(
        lambda x, m: masker(x, m), num_parallel_calls=2)
    rows = list(dataset)
    assert rows[0]["input_ids"].shape == (24,) and rows[0]["masked_lm_positions"].shape == (4,)
    stacked = {k: tf.stack([r[k] for r in rows]) for k in rows[0]}
    _check_rows(ids, mask, stacked, 4, whole_word=True)
    clone = DynamicMasker.from_config(masker.get_config())
    seed = tf.constant([3, 4])
    np.testing.assert_array_equal(clone(ids, mask, seed=seed)["input_ids"],
                                  masker(ids, mask, seed=seed)["input_ids"])


def test_more_slots_than_positions_and_missing_mask_token():
    masker = DynamicMasker(VOCABULARY, max_predictions_per_seq=10, masked_lm_prob=0.5)
    out = masker(tf.constant([[CLS, 5, 6, 7, SEP]]), seed=tf.constant([0, 0]))
    assert out["masked_lm_positions"].shape == (1, 10)
    assert out["masked_lm_weights"].numpy().sum() == 2  # round(3 * 0.5) = 2 (half to even)
    with pytest.raises(ValueError, match="mask token"):
        DynamicMasker(["[PAD]", "a"])
