"""Word-level tags on WordPieces and back: each word's tag goes on its first WordPiece (the others
are ignored in the loss, as in BERT's NER recipe), predictions are read from first pieces, and
entities are found with conlleval's chunk rules (IOB1, BIO and IOBES).

A sentence (or raw text) longer than ``seq_length`` is cut into overlapping windows of whole
words, as SQuAD cuts documents: each window starts ``window_stride`` pieces after the previous
one. For training every window is a row; for prediction each word takes its tag from the window
where it has the most context on both sides (Google's ``_check_is_max_context`` rule)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import numpy as np

from keras_bert.errors import DataError
from keras_bert.tasks.input_examples import encode_label
from keras_bert.tokenization.packing import INPUT_NAMES

logger = logging.getLogger(__name__)

IGNORED_LABEL = -1


# --------------------------------------------------------------------------- conlleval rules
def split_tag(tag: str) -> tuple[str, str]:
    """conlleval's split at the first hyphen: 'B-PER' -> ('B', 'PER'), 'O' -> ('O', '')."""
    prefix, _, kind = tag.partition("-")
    return prefix, kind


_ENDS = {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")}
_STARTS = {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")}


def chunk_ended(prev_tag: str, tag: str, prev_type: str, kind: str) -> bool:
    """conlleval's endOfChunk: did a chunk end between the previous word and this one?"""
    if (prev_tag, tag) in _ENDS or prev_tag in ("]", "["):
        return True
    return prev_tag not in ("O", ".") and prev_type != kind


def chunk_started(prev_tag: str, tag: str, prev_type: str, kind: str) -> bool:
    """conlleval's startOfChunk: did a chunk start at this word?"""
    if (prev_tag, tag) in _STARTS or tag in ("[", "]"):
        return True
    return tag not in ("O", ".") and prev_type != kind


def entity_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """(type, first word, last word) of each entity, as conlleval delimits them.

    >>> entity_spans(["B-PER", "I-PER", "O", "I-LOC", "B-LOC"])
    [('PER', 0, 1), ('LOC', 3, 3), ('LOC', 4, 4)]
    """
    spans, open_span = [], None
    last, last_type = "O", ""
    for index, tag in enumerate([*tags, "O"]):
        prefix, kind = split_tag(tag)
        if open_span is not None and chunk_ended(last, prefix, last_type, kind):
            spans.append((open_span[0], open_span[1], index - 1))
            open_span = None
        if index < len(tags) and chunk_started(last, prefix, last_type, kind):
            open_span = (kind, index)
        last, last_type = prefix, kind
    return spans


# ---------------------------------------------------------------------------- alignment
@dataclasses.dataclass(frozen=True)
class TaggedFeature:
    """One sentence on WordPieces.

    Args:
        input_word_ids, input_mask, input_type_ids: packed ids, [seq_length].
        labels: per position, the tag index of the word starting there, else IGNORED_LABEL.
        word_starts: per word, the position of its first piece, or -1 when the word has no
            piece (an empty or dropped word), was cut off by ``seq_length``, or lies outside
            this window.
    """
    input_word_ids: list[int]
    input_mask: list[int]
    input_type_ids: list[int]
    labels: list[int]
    word_starts: list[int]


def align_words(tokenizer, words: Sequence[str], word_pieces: Sequence[Sequence[int]] | None,
                tags: Sequence[str] | None, label_names: Sequence[str] | None, seq_length: int,
                path: str | None = None, line: int | None = None) -> TaggedFeature:
    """Packs a sentence's words as ``[CLS] pieces... [SEP]``, labels on first pieces.

    Args:
        tokenizer: a BertTokenizer.
        words: the words.
        word_pieces: each word's piece ids, when already known (from offsets); None tokenizes
            each word on its own.
        tags: one tag per word, or None (labels all IGNORED_LABEL).
        label_names: the tag vocabulary (required with ``tags``).
        seq_length: packed length; words past it are cut off (their starts are -1).
        path, line: where the sentence is, for errors (word i on line + i).

    Raises:
        DataError: an unknown tag, or as many tags as words mismatch.
    """
    if tags is not None and len(tags) != len(words):
        raise DataError(f"{len(words)} words but {len(tags)} tags", path, line)
    if word_pieces is None:
        word_pieces = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(w)) for w in words]
    ids, labels, starts = [tokenizer.cls_id], [IGNORED_LABEL], []
    budget = seq_length - 1
    for index, pieces in enumerate(word_pieces):
        if not pieces or len(ids) + len(pieces) > budget:
            starts.append(-1)
            if pieces and len(ids) < budget:
                ids += list(pieces[:budget - len(ids)])  # the cut word's leading pieces
                labels += [IGNORED_LABEL] * (len(ids) - len(labels))
            continue
        starts.append(len(ids))
        label = IGNORED_LABEL
        if tags is not None:
            label = encode_label(tags[index], label_names, path,
                                 None if line is None else line + index)
        ids += list(pieces)
        labels += [label] + [IGNORED_LABEL] * (len(pieces) - 1)
    cut = sum(1 for s, p in zip(starts, word_pieces) if s < 0 and p)
    if cut:
        logger.debug("%s:%s: %d words past seq_length=%d are predicted as 'O'", path, line, cut,
                     seq_length)
    ids.append(tokenizer.sep_id)
    labels.append(IGNORED_LABEL)
    padding = seq_length - len(ids)
    return TaggedFeature(ids + [tokenizer.pad_id] * padding, [1] * len(ids) + [0] * padding,
                         [0] * seq_length, labels + [IGNORED_LABEL] * padding, starts)


def window_word_ranges(piece_counts: Sequence[int], budget: int, stride: int
                       ) -> list[tuple[int, int]]:
    """The [start, end) word ranges of overlapping windows of at most `budget` pieces.

    Each window holds as many whole words as fit (at least one); the next starts at the first
    word at least `stride` pieces after the current start, and never after the current end, so
    every word lies in some window whole (unless it alone exceeds the budget).

    >>> window_word_ranges([2, 1, 3, 1, 2], budget=5, stride=2)
    [(0, 2), (1, 4), (3, 5)]
    """
    if budget < 1 or stride < 1:
        raise ValueError(f"budget and stride must be positive, got {budget} and {stride}")
    starts = [0]
    for count in piece_counts:
        starts.append(starts[-1] + count)
    num_words, ranges, first = len(piece_counts), [], 0
    while True:
        end = first
        while end < num_words and starts[end + 1] - starts[first] <= budget:
            end += 1
        end = max(end, first + 1)
        ranges.append((first, end))
        if end >= num_words:
            return ranges
        following = first + 1
        while following < end and starts[following] - starts[first] < stride:
            following += 1
        first = following


def tagger_stride(window_stride: int | None, seq_length: int) -> int:
    """Pieces from one window's start to the next: ``window_stride``, or half of
    ``seq_length - 2`` (None), as ``align_words_windows`` and the tagger's export cut.

    >>> tagger_stride(None, 10), tagger_stride(3, 10)
    (4, 3)
    """
    return window_stride or max((seq_length - 2) // 2, 1)


def align_words_windows(tokenizer, words: Sequence[str],
                        word_pieces: Sequence[Sequence[int]] | None, tags: Sequence[str] | None,
                        label_names: Sequence[str] | None, seq_length: int,
                        window_stride: int | None = None, path: str | None = None,
                        line: int | None = None) -> list[TaggedFeature]:
    """``align_words`` over windows: one feature when the words fit, else one per window.

    Every window's ``word_starts`` covers all the words (-1 outside the window), so
    ``merge_window_tags`` can put a sentence back together.

    Args:
        window_stride: pieces from one window's start to the next; None: half of
            ``seq_length - 2``.
        Others: as ``align_words``.
    """
    if tags is not None and len(tags) != len(words):
        raise DataError(f"{len(words)} words but {len(tags)} tags", path, line)
    if word_pieces is None:
        word_pieces = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(w)) for w in words]
    budget = seq_length - 2
    counts = [len(pieces) for pieces in word_pieces]
    if sum(counts) <= budget:
        return [align_words(tokenizer, words, word_pieces, tags, label_names, seq_length, path,
                            line)]
    stride = tagger_stride(window_stride, seq_length)
    features = []
    for first, end in window_word_ranges(counts, budget, stride):
        feature = align_words(tokenizer, words[first:end], word_pieces[first:end],
                              None if tags is None else tags[first:end], label_names,
                              seq_length, path, None if line is None else line + first)
        starts = [-1] * first + feature.word_starts + [-1] * (len(words) - end)
        features.append(dataclasses.replace(feature, word_starts=starts))
    return features


def merge_window_tags(probabilities: Sequence[np.ndarray], features: Sequence[TaggedFeature],
                      label_names: Sequence[str], outside: str = "O") -> list[str]:
    """Each word's tag from the window where it has the most context (``outside`` if none).

    A word at piece index i of a window of n pieces scores min(i, n - 1 - i) + 0.01 n, as in
    Google's run_squad.py; the best-scoring window's prediction wins.

    Args:
        probabilities: float [seq, num_labels] per window.
        features: the windows of one sentence (``align_words_windows``).
    """
    num_words = len(features[0].word_starts)
    tags, best_scores = [outside] * num_words, [float("-inf")] * num_words
    for window_probabilities, feature in zip(probabilities, features):
        best = np.argmax(window_probabilities, axis=-1)
        length = sum(feature.input_mask) - 2  # the window's pieces, [CLS] and [SEP] left out
        for word, start in enumerate(feature.word_starts):
            if start < 0:
                continue
            index = start - 1
            score = min(index, length - 1 - index) + 0.01 * length
            if score > best_scores[word]:
                best_scores[word], tags[word] = score, label_names[best[start]]
    return tags


def stack_tagged(features: Sequence[TaggedFeature]) -> tuple[dict, np.ndarray]:
    """(packed inputs int32 [n, seq], labels int32 [n, seq])."""
    x = {name: np.asarray([getattr(f, name) for f in features], dtype=np.int32)
         for name in INPUT_NAMES}
    return x, np.asarray([f.labels for f in features], dtype=np.int32)

