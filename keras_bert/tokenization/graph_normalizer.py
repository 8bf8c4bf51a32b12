"""Google's BasicTokenizer as TensorFlow ops: raw text in, normalized text with words separated by
spaces out, giving exactly the words of the Python tokenizer (``basic.basic_tokenize``).

Stock tensorflow-text normalizers differ from Google (NFKC case folding, ICU's newer Unicode
tables, control characters turned into spaces), so the per-character work is driven by tables
built here from the running Python's ``unicodedata`` (see ``chars``). Rows that are pure ASCII
take a short regex path; the others are decoded to code points and mapped through the tables:

- every code point maps to a fixed output sequence: deleted (control), a space (whitespace),
  spaced out (CJK, punctuation), and, when uncased, ``NFD(c.lower())`` without Mn marks;
- the capital sigma depends on its neighbours (``str.lower()``'s final-sigma rule);
- NFD's canonical reordering can swap two spacing marks (category Mc with a nonzero combining
  class, e.g. musical symbols); runs holding two of them are re-sorted by combining class.
Both take linear time and no ``tf.cond``: inside tf.data, every branch a cond does not take still
costs time per op.
"""

from __future__ import annotations

import dataclasses
import functools
import unicodedata

import numpy as np
import tensorflow as tf

from keras_bert.tokenization import chars

# Bit layout of the per-code-point flags table (uint8).
_LENGTH_MASK = 0x0F        # bits 0-3: length of the output sequence (0 = deleted)
_STARTS_RUN_BIT = 0x10     # bit 4: NFD(lower(c)) starts with a combining class 0 character
_CASE_SHIFT = 6            # bits 6-7: chars.case_class, for the final-sigma rule (bit 5 unused)

_ASCII_CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"
_ASCII_PUNCTUATION = r"[!-/:-@\[-`{-~]"


@dataclasses.dataclass(frozen=True)
class NormalizationTables:
    """Per-code-point lookup tables (NumPy) for one casing mode.

    Args:
        flags: uint8 [0x110000], see the bit layout above.
        pool_offsets: int32 [limit]: where a code point's output starts in ``pool``; -1 when the
            output is the code point itself. Code points >= limit map to themselves.
        pool: int32 [pool_size], the concatenated output sequences.
        combining_class: uint8 [n], the canonical combining class of code points below n; only
            nonzero for the marks that can reach the output (the last entry is 0).
    """
    flags: np.ndarray
    pool_offsets: np.ndarray
    pool: np.ndarray
    combining_class: np.ndarray


def _char_output(code_point: int, char: str, lower_case: bool) -> str:
    """What Google's BasicTokenizer turns one character into, spaces marking word breaks."""
    if chars.is_control(char):
        return ""
    if chars.is_whitespace(char):
        return " "
    if lower_case:
        char_out = chars.strip_accents(char.lower())
    else:
        char_out = char
    if chars.is_cjk(code_point):
        return f" {char_out} "
    return "".join(f" {c} " if chars.is_punctuation(c) else c for c in char_out)


@functools.cache
def build_tables(lower_case: bool) -> NormalizationTables:
    """Builds the tables from ``unicodedata`` (about a second; cached per process)."""
    space_case = chars.case_class(" ")
    identity = 1 | _STARTS_RUN_BIT | (chars.UNCASED << _CASE_SHIFT)
    flags = np.full(chars.MAX_CODE_POINT + 1, identity, dtype=np.uint8)
    outputs: dict[int, str] = {}
    marks: dict[int, int] = {}
    for code_point, char in chars.assigned_chars():  # The others pass through unchanged.
        output = _char_output(code_point, char, lower_case)
        if len(output) > _LENGTH_MASK:
            raise AssertionError(f"U+{code_point:04X} normalizes to {len(output)} characters")
        value = len(output)
        decomposed = unicodedata.normalize("NFD", char.lower()) if lower_case else char
        if not chars.is_control(char) and unicodedata.combining(decomposed[0]) == 0:
            value |= _STARTS_RUN_BIT
        if lower_case:
            marks.update((ord(c), unicodedata.combining(c)) for c in decomposed
                         if unicodedata.combining(c) and unicodedata.category(c) != "Mn")
        if chars.is_control(char):
            case = chars.CASE_IGNORABLE  # Deleted before lower-casing: invisible to the rule.
        elif chars.is_whitespace(char):
            case = space_case
        else:
            case = chars.case_class(char) if lower_case else chars.UNCASED
        flags[code_point] = value | (case << _CASE_SHIFT)
        if output and output != char:
            outputs[code_point] = output
    limit = max(outputs) + 1
    pool_offsets = np.full(limit, -1, dtype=np.int32)
    pool: list[int] = []
    for code_point, output in outputs.items():
        pool_offsets[code_point] = len(pool)
        pool.extend(ord(c) for c in output)
    combining_class = np.zeros(max(marks, default=0) + 2, dtype=np.uint8)
    for code_point, value in marks.items():
        combining_class[code_point] = value
    return NormalizationTables(flags, pool_offsets, np.array(pool + [0], dtype=np.int32),
                               combining_class)


class GraphNormalizer:
    """Normalizes a batch of strings in-graph, as Google's BasicTokenizer would.

    Args:
        lower_case: lower-case and strip accents (uncased models).

    >>> normalizer = GraphNormalizer(lower_case=True)
    >>> tf.strings.split(normalizer(tf.constant(["Héllo, WORLD!"]))).to_list()
    [[b'hello', b',', b'world', b'!']]
    """

    def __init__(self, lower_case: bool):
        self.lower_case = lower_case
        tables = build_tables(lower_case)
        self._flags = tf.constant(tables.flags)
        self._pool_offsets = tf.constant(tables.pool_offsets)
        self._pool = tf.constant(tables.pool)
        self._combining_class = tf.constant(tables.combining_class)

    @tf.autograph.experimental.do_not_convert
    def __call__(self, texts: tf.Tensor) -> tf.Tensor:
        """Maps string [batch] to normalized string [batch]: words separated by spaces."""
        is_ascii = tf.strings.regex_full_match(texts, r"[\x00-\x7f]*")
        ascii_rows = tf.cast(tf.where(is_ascii)[:, 0], tf.int32)
        other_rows = tf.cast(tf.where(~is_ascii)[:, 0], tf.int32)
        return tf.dynamic_stitch(
            [ascii_rows, other_rows],
            [self.normalize_ascii(tf.gather(texts, ascii_rows)),
             self.normalize_unicode(tf.gather(texts, other_rows))])

    @tf.autograph.experimental.do_not_convert
    def normalize_ascii(self, texts: tf.Tensor) -> tf.Tensor:
        """The ASCII-only path: string [batch] -> string [batch]; rows must be ASCII."""
        texts = tf.strings.regex_replace(texts, _ASCII_CONTROL, "")
        if self.lower_case:
            texts = tf.strings.lower(texts)
        return tf.strings.regex_replace(texts, _ASCII_PUNCTUATION, r" \0 ")

    @tf.autograph.experimental.do_not_convert
    def normalize_unicode(self, texts: tf.Tensor) -> tf.Tensor:
        """The table path, right for any text: string [batch] -> string [batch]."""
        code_points = tf.strings.unicode_decode(texts, "UTF-8", errors="replace",
                                                replacement_char=0xFFFD)
        values, row_splits = code_points.flat_values, code_points.row_splits
        flags = tf.cast(tf.gather(self._flags, values), tf.int32)
        if self.lower_case:
            values = self._resolve_final_sigma(values, flags, row_splits)
        output, ends, source = self._map(values, flags)
        if self.lower_case:
            output = self._reorder_marks(output, source, flags, row_splits)
        output_splits = tf.cast(tf.gather(tf.concat([[0], ends], axis=0), row_splits), tf.int64)
        return tf.strings.unicode_encode(
            tf.RaggedTensor.from_row_splits(output, output_splits, validate=False), "UTF-8")

    def _map(self, values, flags):
        """Maps each code point [n] to its output sequence: (output [m], ends [n], source [m]),
        ends being cumulative output lengths and source the input index of each output."""
        lengths = flags & _LENGTH_MASK
        ends = tf.cumsum(lengths)
        source = tf.repeat(tf.range(tf.size(values)), lengths)
        position = tf.range(tf.size(source)) - tf.gather(ends - lengths, source)
        source_values = tf.gather(values, source)
        limit = tf.size(self._pool_offsets)
        offsets = tf.where(source_values < limit,
                           tf.gather(self._pool_offsets, tf.minimum(source_values, limit - 1)),
                           -1)
        output = tf.where(offsets < 0, source_values,
                          tf.gather(self._pool, tf.maximum(offsets, 0) + position))
        return output, ends, source

    def _resolve_final_sigma(self, values, flags, row_splits):
        """Replaces each capital sigma that ``str.lower()`` would make final with ``ς``."""
        case = tf.bitwise.right_shift(flags, _CASE_SHIFT)
        stops = tf.cast(tf.where(case != chars.CASE_IGNORABLE)[:, 0], tf.int32)
        stops_up_to = tf.cumsum(tf.cast(case != chars.CASE_IGNORABLE, tf.int32))
        sigmas = tf.cast(tf.where(tf.equal(values, ord(chars.CAPITAL_SIGMA)))[:, 0], tf.int32)
        rows = tf.searchsorted(tf.cast(row_splits, tf.int32), sigmas, side="right") - 1
        row_start = tf.gather(tf.cast(row_splits, tf.int32), rows)
        row_end = tf.gather(tf.cast(row_splits, tf.int32), rows + 1)
        # The sigma is itself a stop, so the stop before it is number stops_up_to - 2 and the
        # stop after it number stops_up_to (both 0-based).
        before_index = tf.gather(stops_up_to, sigmas) - 2
        after_index = tf.gather(stops_up_to, sigmas)
        before = tf.gather(stops, tf.maximum(before_index, 0))
        after = tf.gather(stops, tf.minimum(after_index, tf.size(stops) - 1))
        cased_before = ((before_index >= 0) & (before >= row_start)
                        & tf.equal(tf.gather(case, before), chars.CASED))
        cased_after = ((after_index < tf.size(stops)) & (after < row_end)
                       & tf.equal(tf.gather(case, after), chars.CASED))
        final = tf.where(cased_before & ~cased_after, ord(chars.FINAL_SIGMA),
                         ord(chars.CAPITAL_SIGMA))
        return tf.tensor_scatter_nd_update(values, sigmas[:, None], final)

    def _reorder_marks(self, output, source, flags, row_splits):
        """Stable-sorts spacing marks by combining class within each run (a character of class 0
        and the marks after it), as NFD does; only runs holding two or more of them can change."""
        starts_run = tf.cast(flags & _STARTS_RUN_BIT > 0, tf.int32)
        row_ids = tf.ragged.row_splits_to_segment_ids(row_splits, out_type=tf.int32)
        run = tf.gather(tf.cumsum(starts_run) + row_ids, source)  # Never shared by two rows.
        size = tf.size(self._combining_class)
        combining = tf.cast(tf.gather(self._combining_class, tf.minimum(output, size - 1)),
                            tf.int32)
        marks_per_run = tf.math.unsorted_segment_sum(
            tf.cast(combining > 0, tf.int32), run, tf.size(flags) + tf.size(row_splits))
        positions = tf.where(tf.gather(marks_per_run, run) > 1)
        key = (tf.cast(tf.gather_nd(run, positions), tf.float64) * 256
               + tf.cast(tf.gather_nd(combining, positions), tf.float64))
        reordered = tf.gather(tf.gather_nd(output, positions), tf.argsort(key, stable=True))
        return tf.tensor_scatter_nd_update(output, positions, reordered)
