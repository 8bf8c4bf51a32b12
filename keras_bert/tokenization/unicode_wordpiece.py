"""WordPiece on the rows of ``BertTokenizerLayer`` that are not printable ASCII: the text is
normalized as Google does (``GraphNormalizer``), split at spaces, and each word looked up whole
with a ``FastWordpieceTokenizer`` that does no pretokenization; with or without each token's
byte span. Also the two ragged-row helpers the layer puts its routed rows back together with.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert.tokenization import vocab as vocab_lib
from keras_bert.tokenization.graph_normalizer import GraphNormalizer
from keras_bert.tokenization.wordpiece import MAX_CHARS_PER_WORD


def tokenize_unicode(texts: tf.Tensor, normalizer: GraphNormalizer,
                     wordpiece: tf_text.FastWordpieceTokenizer) -> tf.RaggedTensor:
    """string [batch] -> int32 ids [batch, (tokens)]; a word longer than MAX_CHARS_PER_WORD
    characters is [UNK]."""
    words = tf.strings.split(normalizer.normalize_unicode(texts))
    too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
    # The literal "[UNK]" is a vocabulary token, so it maps to [UNK] as one word.
    flat_words = tf.where(too_long, vocab_lib.UNK, words.flat_values)
    pieces = wordpiece.tokenize(flat_words)  # [words, (pieces)]
    return regroup(pieces, words.row_splits)  # Row i: the pieces of row i's words.


def tokenize_unicode_with_offsets(texts: tf.Tensor, normalizer: GraphNormalizer,
                                  wordpiece: tf_text.FastWordpieceTokenizer):
    """``tokenize_unicode`` with each token's byte span in its text: string [batch] ->
    (ids int32, starts int64, limits int64), each [batch, (tokens)]. The words of the
    normalized text are found by code point, and their pieces' byte offsets in the word mapped
    back to the input's bytes."""
    chars, char_starts, char_limits = normalizer.normalize_unicode_with_offsets(texts)
    code_points = chars.flat_values
    in_word = tf.not_equal(code_points, ord(" "))
    row_start = tf.scatter_nd(tf.cast(chars.row_splits[:-1, None], tf.int32),
                              tf.ones_like(chars.row_splits[:-1], tf.int32),
                              tf.shape(code_points) + 1)[:-1] > 0
    word_start = in_word & ~(tf.concat([[False], in_word[:-1]], axis=0) & ~row_start)
    letters = tf.cast(tf.where(in_word)[:, 0], tf.int32)  # word characters -> chars index
    words = tf.RaggedTensor.from_row_starts(  # [words, (characters)]
        tf.gather(code_points, letters),
        tf.cast(tf.where(tf.gather(word_start, letters))[:, 0], tf.int64), validate=False)
    words_before = tf.concat([[0], tf.cumsum(tf.cast(word_start, tf.int64))], axis=0)

    too_long = words.row_lengths() > MAX_CHARS_PER_WORD
    word_texts = tf.where(too_long, vocab_lib.UNK, tf.strings.unicode_encode(words, "UTF-8"))
    pieces, piece_starts, piece_limits = wordpiece.tokenize_with_offsets(word_texts)
    # A byte offset in a word -> the word character it starts: the first bytes of all word
    # characters, counted from the first word on, increase strictly, so a search finds it.
    values = words.flat_values
    letter_bytes = tf.cast(1 + tf.cast(values >= 0x80, tf.int32)
                           + tf.cast(values >= 0x800, tf.int32)
                           + tf.cast(values >= 0x10000, tf.int32), tf.int64)
    letter_byte = tf.cumsum(letter_bytes, exclusive=True)
    piece_word = pieces.value_rowids()
    base = tf.gather(tf.concat([letter_byte, [tf.reduce_sum(letter_bytes)]], 0),
                     tf.gather(words.row_splits, piece_word))
    first = tf.searchsorted(letter_byte, base + piece_starts.flat_values, side="left",
                            out_type=tf.int64)
    last = tf.searchsorted(letter_byte, base + piece_limits.flat_values, side="left",
                           out_type=tf.int64) - 1
    # [UNK] for a word too long to look up covers the whole word.
    long_piece = tf.gather(too_long, piece_word)
    first = tf.where(long_piece, tf.gather(words.row_splits, piece_word), first)
    last = tf.where(long_piece, tf.gather(words.row_splits, piece_word + 1) - 1, last)
    per_word = (pieces,
                pieces.with_flat_values(
                    tf.gather(char_starts.flat_values, tf.gather(letters, first))),
                pieces.with_flat_values(
                    tf.gather(char_limits.flat_values, tf.gather(letters, last))))
    return tuple(regroup(part, tf.gather(words_before, chars.row_splits))
                 for part in per_word)


def merge_rows(first: tf.RaggedTensor, first_rows: tf.Tensor, second: tf.RaggedTensor,
               second_rows: tf.Tensor) -> tf.RaggedTensor:
    """The rows of ``first`` and ``second`` put back in the batch's order: ``first_rows`` and
    ``second_rows`` (int32) say where each came from."""
    order = tf.math.invert_permutation(tf.concat([first_rows, second_rows], axis=0))
    return tf.gather(tf.concat([first, second], axis=0), order)


def regroup(inner: tf.RaggedTensor, outer_splits: tf.Tensor) -> tf.RaggedTensor:
    """Row i: the values of ``inner``'s rows ``outer_splits[i]`` to ``outer_splits[i + 1]``."""
    return tf.RaggedTensor.from_row_splits(inner.flat_values,
                                           tf.gather(inner.row_splits, outer_splits),
                                           validate=False)
