"""Changed copies of a text classifier's texts for the teacher to label (``augmented_texts``):
words dropped and n-grams kept, as ``distill(..., augment=)`` adds them."""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence

import numpy as np

from keras_bert.finetuning.distillation.targets import _inputs

logger = logging.getLogger(__name__)

# augmented_texts' rules (Tang et al., 2019, "Distilling task-specific knowledge from BERT into
# simple neural networks", section 3.3, without the part-of-speech swaps): each word dropped
# with this probability, then with the other only a random n-gram of 1 to 5 words kept.
AUGMENT_DROP = 0.1
AUGMENT_NGRAM = 0.25
AUGMENT_MAX_NGRAM = 5


def augmented_texts(texts: Sequence[str], copies: int, seed: int | None = None,
                    text_pairs: Sequence[str] | None = None) -> tuple[list, list | None]:
    """``copies`` changed copies of each text, for the teacher to label: more texts near the
    training texts, the lever that unlabelled texts are when a task has none (Tang et al., 2019,
    section 3.3; TinyBERT augments its data in the same spirit).

    Each copy drops each whitespace-separated word with probability ``AUGMENT_DROP`` (keeping
    at least one), then with probability ``AUGMENT_NGRAM`` keeps only a random n-gram of 1 to
    ``AUGMENT_MAX_NGRAM`` of its words. The same ``seed`` (None: 0) gives the same copies, so a
    resumed run trains on the texts it started with. A pair's two texts change independently.

    Returns:
        (texts, text_pairs): the copies, copy by copy in the order of ``texts``; text_pairs
        None when ``text_pairs`` is.

    Example:
    >>> copies, _ = augmented_texts(["what is the capital of peru ?"], 2, seed=0)
    >>> len(copies), all(set(c.split()) <= set("what is the capital of peru ?".split())
    ...                  for c in copies)
    (2, True)
    """
    _check_copies(copies)
    rng = random.Random(0 if seed is None else int(seed))  # a NumPy integer too
    changed, changed_pairs = [], None if text_pairs is None else []
    for _ in range(copies):
        for row, text in enumerate(texts):
            changed.append(_augmented(text, rng))
            if text_pairs is not None:
                changed_pairs.append(_augmented(text_pairs[row], rng))
    return changed, changed_pairs


def _check_copies(copies) -> None:
    if isinstance(copies, bool) or not isinstance(copies, (int, np.integer)) or copies < 0:
        raise ValueError(f"augment must be a whole number of copies, 0 or more; got {copies!r}")


def _augmented(text: str, rng: random.Random) -> str:
    words = text.split()
    kept = [word for word in words if rng.random() >= AUGMENT_DROP] or words
    if rng.random() < AUGMENT_NGRAM and len(kept) > 1:
        n = rng.randint(1, min(AUGMENT_MAX_NGRAM, len(kept)))
        start = rng.randint(0, len(kept) - n)
        kept = kept[start:start + n]
    return " ".join(kept)


def _with_augmented(teacher, texts, labels, text_pairs, copies: int, seed) -> tuple:
    """``(texts, labels, text_pairs)`` followed by ``augmented_texts``' copies, unlabelled."""
    texts = list(texts)
    text_pairs = None if text_pairs is None else list(text_pairs)
    _check_augmentable(teacher, texts, text_pairs)
    _inputs(texts, text_pairs)  # the same number of each
    if labels is not None and len(labels) != len(texts):
        raise ValueError(f"got {len(texts)} texts but {len(labels)} labels")
    extra, extra_pairs = augmented_texts(texts, copies, seed, text_pairs)
    logger.info("augment=%d: %d changed copies of the texts join them, labelled by the teacher",
                copies, len(extra))
    unchanged = sum(copy == texts[row % len(texts)] for row, copy in enumerate(extra))
    if unchanged > len(extra) // 2:
        logger.warning("augment=%d: %d of the %d copies equal their text (a copy drops and keeps "
                       "whitespace-separated words: texts of one or two words, or without spaces "
                       "between words as in Chinese or Japanese, barely change); they cost "
                       "training time and teach little", copies, unchanged, len(extra))
    labels = ([None] * len(texts) if labels is None else list(labels)) + [None] * len(extra)
    return (texts + extra, labels,
            None if text_pairs is None else text_pairs + extra_pairs)


def can_augment(teacher) -> bool:
    """Whether ``augment`` can change the teacher's texts: a text classifier's (and a pair's).
    Another task's labels (tags per word, answer spans, choices) would no longer line up with
    the changed words, nor a classifier's features with its texts."""
    from keras_bert.tasks.classification.model import BertClassifier
    return isinstance(teacher, BertClassifier) and not getattr(teacher, "feature_names", None)


def _check_augmentable(teacher, texts, text_pairs) -> None:
    if not can_augment(teacher):
        raise ValueError(f"augment= changes raw texts, for text classifiers; a "
                         f"{type(teacher).__name__}'s labels would no longer match its "
                         f"changed inputs: give it more texts instead")
    for name, values in (("texts", texts), ("text_pairs", text_pairs)):
        if values is None:
            continue
        bad = next((i for i, v in enumerate(values) if not isinstance(v, str)), None)
        if bad is not None:
            raise ValueError(f"augment= changes raw texts; {name}[{bad}] is a "
                             f"{type(values[bad]).__name__}")
