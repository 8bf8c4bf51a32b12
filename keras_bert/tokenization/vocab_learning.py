"""Learning a WordPiece vocabulary from text files: stream the files through tf.data, split them
into Google's basic-tokenizer words in-graph, count the words, then run tensorflow-text's WordPiece
vocabulary learner on the counts.

Only the word counts are held in memory, so corpora larger than memory work. Words are split by
the same normalization as the tokenizers (``GraphNormalizer``), so the vocabulary fits them.
"""

from __future__ import annotations

import collections
import logging

import tensorflow as tf
import tqdm
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from keras_bert import fileio
from keras_bert.tokenization import vocab as vocab_lib
from keras_bert.tokenization.graph_normalizer import GraphNormalizer
from keras_bert.tokenization.wordpiece import SUFFIX_INDICATOR

logger = logging.getLogger(__name__)


def reserved_tokens(num_unused: int = 0) -> list[str]:
    """The tokens at the start of a learned vocabulary, in Google's order.

    ``[PAD]`` is id 0, then ``num_unused`` ``[unusedN]`` slots (free ids for tokens added later;
    Google's English vocabularies have 99 there), then ``[UNK]``, ``[CLS]``, ``[SEP]``, ``[MASK]``.

    >>> reserved_tokens(2)
    ['[PAD]', '[unused0]', '[unused1]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    """
    return ([vocab_lib.PAD] + [f"[unused{i}]" for i in range(num_unused)]
            + [vocab_lib.UNK, vocab_lib.CLS, vocab_lib.SEP, vocab_lib.MASK])


def expand_inputs(patterns: list[str] | str) -> list[str]:
    """Expands file patterns (local or ``gs://``) into a sorted list of files."""
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    files = sorted({path for pattern in patterns for path in fileio.glob(pattern)})
    if not files:
        raise FileNotFoundError(f"no input files match {patterns}")
    return files


def count_words(files: list[str], lower_case: bool = True, batch_size: int = 1024,
                progress: bool = True) -> collections.Counter:
    """Counts Google's basic-tokenizer words in text files, streaming them with tf.data.

    Args:
        files: text files, read line by line.
        lower_case: lower-case and strip accents, as the tokenizer will.
        batch_size: lines per tf.data batch.
        progress: show a progress bar (lines read).

    Returns:
        A Counter word -> occurrences.
    """
    normalizer = GraphNormalizer(lower_case)

    def unique_words(lines):
        words, _, counts = tf.unique_with_counts(tf.strings.split(normalizer(lines)).flat_values)
        return words, counts, tf.size(lines)

    dataset = (tf.data.TextLineDataset(files).batch(batch_size)
               .map(unique_words, num_parallel_calls=tf.data.AUTOTUNE)
               .prefetch(tf.data.AUTOTUNE))
    counts: collections.Counter = collections.Counter()
    with tqdm.tqdm(unit=" lines", disable=not progress, desc="counting words") as bar:
        for words, word_counts, num_lines in dataset.as_numpy_iterator():
            counts.update(dict(zip(words.tolist(), word_counts.tolist())))
            bar.update(int(num_lines))
    return collections.Counter({word.decode("utf-8"): n for word, n in counts.items()})


def learn_vocab(inputs: list[str] | str, vocab_size: int, lower_case: bool = True,
                num_unused: int = 0, progress: bool = True, **learn_params) -> list[str]:
    """Learns a WordPiece vocabulary of exactly ``vocab_size`` tokens.

    Args:
        inputs: text files or patterns (local or ``gs://``), one sentence or paragraph per line.
        vocab_size: the number of tokens, reserved ones included.
        lower_case: learn an uncased vocabulary (lower-cased, accents stripped).
        num_unused: ``[unusedN]`` slots after ``[PAD]``.
        progress: show progress while counting.
        **learn_params: passed to tensorflow-text's ``wordpiece_tokenizer_learner_lib.learn``
            (e.g. ``max_unique_chars``, ``lower_thresh``).

    Returns:
        The tokens, id order. If the learner finds fewer than vocab_size tokens the rest are
        filled with further ``[unusedN]`` tokens; if it finds more, the rarest are dropped.
    """
    reserved = reserved_tokens(num_unused)
    if vocab_size <= len(reserved):
        raise ValueError(f"vocab_size={vocab_size} leaves no room after the {len(reserved)} "
                         f"reserved tokens")
    files = expand_inputs(inputs)
    logger.info("Counting words in %d file(s).", len(files))
    counts = count_words(files, lower_case=lower_case, progress=progress)
    if not counts:
        raise ValueError(f"no words found in {files}")
    logger.info("Learning a %d-token vocabulary from %d distinct words (%d in all).", vocab_size,
                len(counts), sum(counts.values()))
    tokens = learner.learn(counts.items(), vocab_size, reserved, joiner=SUFFIX_INDICATOR,
                           **learn_params)
    if len(tokens) > vocab_size:
        tokens = _drop_rarest(tokens, vocab_size, num_reserved=len(reserved))
    filler = [f"[unused{i}]" for i in range(num_unused, num_unused + vocab_size - len(tokens))]
    if filler:
        logger.info("The learner returned %d tokens; filling ids up to %d with %s..%s.",
                    len(tokens), vocab_size, filler[0], filler[-1])
    return tokens + filler


def _drop_rarest(tokens: list[str], vocab_size: int, num_reserved: int) -> list[str]:
    """Cuts the learner's output (reserved, characters, then tokens by falling count) to
    vocab_size, keeping every character and its ``##`` form so that no word becomes [UNK]."""
    def essential(index_token):
        index, token = index_token
        return index < num_reserved or len(token.removeprefix(SUFFIX_INDICATOR)) == 1

    num_essential = sum(1 for item in enumerate(tokens) if essential(item))
    if num_essential > vocab_size:
        raise ValueError(f"vocab_size={vocab_size} is smaller than the {num_essential} reserved "
                         f"and single-character tokens; raise it or lower max_unique_chars")
    budget = vocab_size - num_essential
    kept = []
    for item in enumerate(tokens):
        if essential(item):
            kept.append(item[1])
        elif budget > 0:
            kept.append(item[1])
            budget -= 1
    logger.info("The learner returned %d tokens; dropped the %d rarest.", len(tokens),
                len(tokens) - len(kept))
    return kept
