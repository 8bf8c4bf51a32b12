"""Word-level tags on WordPieces and back: each word's tag goes on its first WordPiece (the others
are ignored in the loss, as in BERT's NER recipe), predictions are read from first pieces, and
entities are found with conlleval's chunk rules (IOB1, BIO and IOBES)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

import numpy as np

from keras_bert.data.task_examples import DataError, TaggedSentence, encode_label

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
            piece (an empty or dropped word) or was cut off by ``seq_length``.
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


def align_sentences(tokenizer, sentences: Sequence[TaggedSentence], label_names, seq_length: int,
                    with_labels: bool = True) -> list[TaggedFeature]:
    """``align_words`` for each sentence (tags used when ``with_labels``)."""
    return [align_words(tokenizer, s.words, None, s.tags if with_labels else None, label_names,
                        seq_length, s.path, s.line) for s in sentences]


def stack_tagged(features: Sequence[TaggedFeature]) -> tuple[dict, np.ndarray]:
    """(packed inputs int32 [n, seq], labels int32 [n, seq])."""
    x = {name: np.asarray([getattr(f, name) for f in features], dtype=np.int32)
         for name in ("input_word_ids", "input_mask", "input_type_ids")}
    return x, np.asarray([f.labels for f in features], dtype=np.int32)


def word_tags(probabilities: np.ndarray, word_starts: Sequence[int],
              label_names: Sequence[str], outside: str = "O") -> list[str]:
    """Each word's tag: the most probable label at its first piece (``outside`` when cut off).

    Args:
        probabilities: float [seq, num_labels] for one sentence.
        word_starts: ``TaggedFeature.word_starts``.
        label_names: the tag vocabulary.
    """
    best = np.argmax(probabilities, axis=-1)
    return [label_names[best[s]] if s >= 0 else outside for s in word_starts]
