"""Google's instance creation and static masking, on token ids: structure and statistics."""

import collections
import random

import pytest

from keras_bert.pretraining_data.instances import InstanceBuilder, create_segment_pairs, truncate_pair
from keras_bert.pretraining_data.masking import StaticMasker, num_tokens_to_mask, random_subset


def _documents(num_documents, rng):
    """Documents whose token ids say where they come from: 10000*doc + 100*sentence + k."""
    return [[[10000 * d + 100 * s + k for k in range(rng.randint(3, 12))]
             for s in range(rng.randint(1, 25))] for d in range(num_documents)]


def _locate(tokens):
    return [(t // 10000, (t % 10000) // 100, t % 100) for t in tokens]


def test_segment_pairs_follow_googles_layout():
    rng = random.Random(0)
    documents = _documents(1000, rng)
    max_seq_length = 64
    counts = collections.Counter()
    for index in range(len(documents)):
        for tokens_a, tokens_b, is_random_next, from_one_sentence in create_segment_pairs(
                documents, index, max_seq_length, 0.1, rng):
            counts[is_random_next, from_one_sentence] += 1
            assert tokens_a and tokens_b
            assert is_random_next or not from_one_sentence
            assert len(tokens_a) + len(tokens_b) <= max_seq_length - 3
            a, b = _locate(tokens_a), _locate(tokens_b)
            # A is a contiguous run of the document (truncation only trims its ends).
            assert {d for d, _, _ in a} == {index}
            assert a == sorted(a)
            if from_one_sentence:
                assert len({s for _, s, _ in a}) == 1
            if is_random_next:
                assert b == sorted(b) and len({d for d, _, _ in b}) == 1
            else:
                # The actual next segment: same document, after A, starting a sentence unless
                # its front was truncated.
                assert {d for d, _, _ in b} == {index} and b[0] > a[-1] and b == sorted(b)
    # Chunks of two or more sentences toss a fair coin.
    tosses = counts[True, False] + counts[False, False]
    assert tosses > 2000 and counts[True, False] / tosses == pytest.approx(0.5, abs=0.03)


def test_truncation_trims_the_longer_segment_from_both_ends():
    fronts = backs = 0
    for seed in range(200):
        a, b = list(range(30)), list(range(100, 110))
        truncate_pair(a, b, 25, random.Random(seed))
        assert len(a) + len(b) == 25 and b == list(range(100, 110))
        fronts += a[0] > 0
        backs += a[-1] < 29
    assert fronts > 150 and backs > 150  # 15 removals from a random end each time


def test_masked_share_and_80_10_10_split():
    vocab_size, mask_id = 1000, 4
    masker = StaticMasker(vocab_size, mask_id, 0.15, 20)
    builder = InstanceBuilder(cls_id=2, sep_id=3, masker=masker)
    rng = random.Random(1)
    totals = collections.Counter()
    for _ in range(3000):
        a = [rng.randrange(5, vocab_size) for _ in range(rng.randint(1, 80))]
        b = [rng.randrange(5, vocab_size) for _ in range(rng.randint(1, 125 - len(a)))]
        instance, counts = builder.build(a, b, False, rng)
        original = [2, *a, 3, *b, 3]
        positions = instance.masked_lm_positions
        assert positions == sorted(set(positions))
        assert len(positions) == num_tokens_to_mask(len(a) + len(b), 0.15, 20)
        assert not {0, len(a) + 1, len(original) - 1} & set(positions)
        assert instance.masked_lm_ids == [original[p] for p in positions]
        for p, token in enumerate(instance.input_ids):
            if p not in positions:
                assert token == original[p]
        # A random replacement may itself be [MASK] or the original token.
        mask = sum(instance.input_ids[p] == mask_id for p in positions)
        kept = sum(instance.input_ids[p] == original[p] for p in positions)
        assert counts.mask + counts.random + counts.kept == len(positions)
        assert counts.mask <= mask <= counts.mask + counts.random
        assert counts.kept <= kept <= counts.kept + counts.random
        totals.update(mask=counts.mask, random=counts.random, kept=counts.kept,
                      masked=len(positions), maskable=len(a) + len(b))
    assert totals["masked"] / totals["maskable"] == pytest.approx(0.15, abs=0.015)
    assert totals["mask"] / totals["masked"] == pytest.approx(0.8, abs=0.015)
    assert totals["random"] / totals["masked"] == pytest.approx(0.1, abs=0.015)
    assert totals["kept"] / totals["masked"] == pytest.approx(0.1, abs=0.015)


def test_masking_count_is_rounded_at_least_one_and_capped():
    assert num_tokens_to_mask(125, 0.15, 20) == 19
    assert num_tokens_to_mask(2, 0.15, 20) == 1
    assert num_tokens_to_mask(500, 0.15, 20) == 20


def test_whole_word_masking_takes_every_piece_of_a_word():
    continuation = frozenset(range(500, 1000))  # ids >= 500 are '##' pieces
    masker = StaticMasker(1000, 4, 0.15, 20, continuation_ids=continuation)
    rng = random.Random(2)
    for _ in range(2000):
        tokens = [2] + [rng.randrange(5, 1000) for _ in range(60)] + [3]
        _, positions, _, _ = masker.mask(tokens, list(range(1, 61)), rng)
        # At most the count (9), unless no word fits it; then exactly one word.
        assert 1 <= len(positions) <= 9 or positions == list(range(positions[0], positions[-1] + 1))
        chosen = set(positions)
        for p in range(2, 61):
            if tokens[p] in continuation:  # same word as p - 1
                assert (p in chosen) == (p - 1 in chosen)


def test_random_subset_is_uniform():
    rng = random.Random(3)
    hits = collections.Counter()
    for _ in range(20000):
        hits.update(random_subset(rng, range(10), 3))
    assert sum(hits.values()) == 60000
    assert all(abs(hits[i] - 6000) < 300 for i in range(10)), hits
