"""Static masked-LM masking, as google-research/bert's create_pretraining_data.py does it.

Pure Python over token ids, for the TFRecord writer's workers; `dynamic_masking.py` applies the
same rules inside tf.data.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Collection, Sequence
from typing import TypeVar

T = TypeVar("T")


def num_tokens_to_mask(num_candidates: int, masked_lm_prob: float,
                       max_predictions_per_seq: int) -> int:
    """`masked_lm_prob` of the maskable tokens, rounded, at least 1 and at most the cap."""
    return min(max_predictions_per_seq, max(1, int(round(num_candidates * masked_lm_prob))))


def random_subset(rng: random.Random, population: Sequence[T], k: int) -> list[T]:
    """`k` distinct items of `population` in random order (a partial Fisher-Yates shuffle).

    Like `rng.sample`, but drawing with `rng.random()`, which is several times faster than the
    integer draws `sample` makes; the bias of flooring a 53-bit float is below 1e-13.
    """
    pool = list(population)
    size = len(pool)
    random_float = rng.random
    for i in range(min(k, size)):
        j = i + int(random_float() * (size - i))
        pool[i], pool[j] = pool[j], pool[i]
    return pool[:k]


def whole_word_groups(token_ids: Sequence[int], candidate_positions: Sequence[int],
                      continuation_ids: Collection[int]) -> list[list[int]]:
    """Groups candidate positions into words: a '##' piece joins the piece just before it.

    A continuation piece whose left neighbour is not a candidate (it follows [CLS] or [SEP])
    starts its own group, so a group never spans a special token.
    """
    groups: list[list[int]] = []
    previous = -2
    for position in candidate_positions:
        if groups and position == previous + 1 and token_ids[position] in continuation_ids:
            groups[-1].append(position)
        else:
            groups.append([position])
        previous = position
    return groups


@dataclasses.dataclass
class MaskingCounts:
    """How many positions each masking decision got: [MASK], a random token, or unchanged."""

    mask: int = 0
    random: int = 0
    kept: int = 0

    def add(self, other: MaskingCounts) -> None:
        self.mask += other.mask
        self.random += other.random
        self.kept += other.kept


@dataclasses.dataclass(frozen=True)
class StaticMasker:
    """Chooses and masks the masked-LM predictions of one sequence.

    Rules: `masked_lm_prob` of the candidate (non-special) tokens, rounded, at least 1 and at most
    `max_predictions_per_seq`; each chosen position becomes [MASK] with probability 0.8, a token
    drawn uniformly from the whole vocabulary with 0.1, and stays unchanged with 0.1. With whole-
    word masking, words (a piece and the '##' pieces after it) are taken in random order, all
    pieces together, skipping a word that would overshoot the count; where Google's script would
    then mask nothing (every word is longer than the count), the first word that fits in
    `max_predictions_per_seq` is taken.

    Args:
        vocab_size: random replacements are drawn from [0, vocab_size).
        mask_token_id: id of [MASK].
        masked_lm_prob: share of candidate tokens to predict.
        max_predictions_per_seq: cap on predictions per sequence.
        continuation_ids: ids of '##' pieces; None for per-piece masking.

    Example:
        >>> masker = StaticMasker(vocab_size=100, mask_token_id=4, masked_lm_prob=0.15,
        ...                       max_predictions_per_seq=20)
        >>> ids, positions, labels, counts = masker.mask([2, 50, 51, 3], [1, 2],
        ...                                              random.Random(0))
        >>> len(positions), labels == [[2, 50, 51, 3][positions[0]]]
        (1, True)
    """

    vocab_size: int
    mask_token_id: int
    masked_lm_prob: float
    max_predictions_per_seq: int
    continuation_ids: frozenset[int] | None = None

    def mask(self, token_ids: Sequence[int], candidate_positions: Sequence[int],
             rng: random.Random) -> tuple[list[int], list[int], list[int], MaskingCounts]:
        """Masks `token_ids` [seq_length] at some of `candidate_positions` (ascending).

        Returns:
            (masked ids [seq_length], sorted masked positions [num_predictions], the original
            ids there [num_predictions], the decision counts).
        """
        num_to_mask = num_tokens_to_mask(len(candidate_positions), self.masked_lm_prob,
                                         self.max_predictions_per_seq)
        if self.continuation_ids is None:
            positions = random_subset(rng, candidate_positions, num_to_mask)
        else:
            groups = whole_word_groups(token_ids, candidate_positions, self.continuation_ids)
            groups = random_subset(rng, groups, len(groups))
            positions = []
            for group in groups:
                if len(positions) >= num_to_mask:
                    break
                if len(positions) + len(group) <= num_to_mask:
                    positions.extend(group)
            if not positions:  # no word fits the count: take one that fits the slots
                positions = next((list(group) for group in groups
                                  if len(group) <= self.max_predictions_per_seq), [])
        positions.sort()

        masked_ids = list(token_ids)
        labels = [token_ids[position] for position in positions]
        counts = MaskingCounts()
        random_float = rng.random
        for position in positions:
            if random_float() < 0.8:
                masked_ids[position] = self.mask_token_id
                counts.mask += 1
            elif random_float() < 0.5:
                counts.kept += 1
            else:
                masked_ids[position] = int(random_float() * self.vocab_size)
                counts.random += 1
        return masked_ids, positions, labels, counts
