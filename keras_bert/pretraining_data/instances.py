"""Sentence-pair instances for BERT pretraining, built as google-research/bert builds them.

Pure Python over token ids. A document is a list of sentences, a sentence a list of token ids.
`create_segment_pairs` splits one document into `SegmentPair`s (A, B, is_random_next);
`InstanceBuilder` lays a pair out as `[CLS] A [SEP] B [SEP]` and masks it.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Sequence
from typing import NamedTuple

from keras_bert.pretraining_data.masking import MaskingCounts, StaticMasker

# Retries when the random document drawn for a random next segment is the current one.
_RANDOM_DOCUMENT_TRIES = 10


class SegmentPair(NamedTuple):
    """Segments A and B (token ids, non-empty) and whether B is a random next segment.

    `from_one_sentence` marks a pair whose chunk had a single sentence: it cannot be split, so
    its B is always random (Google's rule); the other pairs toss a fair coin.
    """

    tokens_a: list[int]
    tokens_b: list[int]
    is_random_next: bool
    from_one_sentence: bool


def create_segment_pairs(documents: Sequence[Sequence[Sequence[int]]], document_index: int,
                         max_seq_length: int, short_seq_prob: float,
                         rng: random.Random) -> list[SegmentPair]:
    """Splits one document into sentence pairs for masked LM and next sentence prediction.

    The document's sentences are gathered into chunks of about a target length: the maximum
    (`max_seq_length` - 3) or, with probability `short_seq_prob`, a random length in
    [2, maximum]. Each chunk is cut at a random sentence boundary into A and B. Half of the time
    (always, for a one-sentence chunk) B is replaced by sentences from a random other document,
    starting at a random sentence, and the chunk's unused sentences are put back for the next
    chunk. The longer of A and B then loses a token from a random end until both fit.

    Args:
        documents: [num_documents][num_sentences][num_tokens] token ids; the random next
            segments are drawn from these.
        document_index: which document to split.
        max_seq_length: length of `[CLS] A [SEP] B [SEP]` at most; at least 5.
        short_seq_prob: probability of a shorter target length.
        rng: the source of randomness.

    Returns:
        The document's pairs, in order.
    """
    document = documents[document_index]
    max_num_tokens = max_seq_length - 3
    target_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_length = _random_int(rng, 2, max_num_tokens)

    pairs = []
    chunk: list[Sequence[int]] = []
    chunk_length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        if i == len(document) - 1 or chunk_length >= target_length:
            a_end = _random_int(rng, 1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = list(itertools.chain.from_iterable(chunk[:a_end]))
            tokens_b: list[int] = []
            is_random_next = len(chunk) == 1 or rng.random() < 0.5
            if is_random_next:
                target_b_length = target_length - len(tokens_a)
                for _ in range(_RANDOM_DOCUMENT_TRIES):
                    random_index = _random_int(rng, 0, len(documents) - 1)
                    if random_index != document_index:
                        break
                random_document = documents[random_index]
                start = _random_int(rng, 0, len(random_document) - 1)
                for sentence in random_document[start:]:
                    tokens_b.extend(sentence)
                    if len(tokens_b) >= target_b_length:
                        break
                i -= len(chunk) - a_end  # put the unused sentences back
            else:
                for sentence in chunk[a_end:]:
                    tokens_b.extend(sentence)
            truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
            pairs.append(SegmentPair(tokens_a, tokens_b, is_random_next, len(chunk) == 1))
            chunk = []
            chunk_length = 0
        i += 1
    return pairs


def truncate_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int,
                  rng: random.Random) -> None:
    """Drops tokens, in place, from a random end of the longer list until both fit together.

    On a tie, B loses the token. Each token removed is a fair coin toss between the two ends.
    """
    length_a, length_b = len(tokens_a), len(tokens_b)
    # Tokens to drop from the front and the back of A and of B.
    front_a = back_a = front_b = back_b = 0
    random_float = rng.random
    while length_a + length_b > max_num_tokens:
        from_front = random_float() < 0.5
        if length_a > length_b:
            length_a -= 1
            front_a += from_front
            back_a += not from_front
        else:
            length_b -= 1
            front_b += from_front
            back_b += not from_front
    del tokens_a[len(tokens_a) - back_a:], tokens_a[:front_a]
    del tokens_b[len(tokens_b) - back_b:], tokens_b[:front_b]


def _random_int(rng: random.Random, low: int, high: int) -> int:
    """Uniform in [low, high], like `rng.randint` but from one fast `rng.random()` draw."""
    return low + int(rng.random() * (high - low + 1))


@dataclasses.dataclass(frozen=True, slots=True)
class TrainingInstance:
    """One masked sentence pair.

    input_ids: [seq_length] ids of `[CLS] A [SEP] B [SEP]` after masking.
    num_segment_a_tokens: length of `[CLS] A [SEP]` (segment id 0); the rest has segment id 1.
    masked_lm_positions: [num_predictions] ascending positions that were chosen for prediction.
    masked_lm_ids: [num_predictions] the original ids at those positions.
    is_random_next: B comes from another document (next_sentence_labels = 1).
    """

    input_ids: list[int]
    num_segment_a_tokens: int
    masked_lm_positions: list[int]
    masked_lm_ids: list[int]
    is_random_next: bool


@dataclasses.dataclass(frozen=True)
class InstanceBuilder:
    """Lays out a sentence pair as `[CLS] A [SEP] B [SEP]` and masks it.

    Args:
        cls_id: id of [CLS].
        sep_id: id of [SEP].
        masker: the masking rules.
    """

    cls_id: int
    sep_id: int
    masker: StaticMasker

    def build(self, tokens_a: list[int], tokens_b: list[int], is_random_next: bool,
              rng: random.Random) -> tuple[TrainingInstance, MaskingCounts]:
        """The masked instance of one pair, and how its predictions were masked."""
        sep_position = len(tokens_a) + 1
        token_ids = [self.cls_id, *tokens_a, self.sep_id, *tokens_b, self.sep_id]
        candidates = [*range(1, sep_position), *range(sep_position + 1, len(token_ids) - 1)]
        masked_ids, positions, labels, counts = self.masker.mask(token_ids, candidates, rng)
        instance = TrainingInstance(input_ids=masked_ids, num_segment_a_tokens=sep_position + 1,
                                    masked_lm_positions=positions, masked_lm_ids=labels,
                                    is_random_next=is_random_next)
        return instance, counts
