"""Google's BasicTokenizer as TensorFlow ops: raw text in, normalized text with words separated by
spaces out, giving exactly the words of the Python tokenizer (``basic.basic_tokenize``).

Stock tensorflow-text normalizers differ from Google (NFKC case folding, ICU's newer Unicode
tables, control characters turned into spaces), so the per-character work is driven by tables
built here from the running Python's ``unicodedata`` (see ``chars``). Rows that are pure ASCII
take a short regex path; the others are decoded to code points and mapped through the tables:

- every code point maps to a fixed output sequence: deleted (control), a space (whitespace),
  spaced out (CJK, punctuation), and, when uncased, ``NFD(c.lower())`` without Mn marks;
- the capital sigma depends on its neighbours (``str.lower()``'s final-sigma rule): three regex
  passes with Python's cased and case-ignorable classes decide it before the table;
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
        cased: RE2 class of the characters ``str.lower()`` counts as cased (and not
            case-ignorable) before a sigma; empty when cased mode.
        case_ignorable: RE2 class of the characters it skips (deleted ones included).
    """
    flags: np.ndarray
    pool_offsets: np.ndarray
    pool: np.ndarray
    combining_class: np.ndarray
    cased: str
    case_ignorable: str


@functools.cache
def build_tables(lower_case: bool) -> NormalizationTables:
    """Builds the tables from ``unicodedata`` (about a second; cached per process)."""
    space_case = chars.case_class(" ")
    flags = np.full(chars.MAX_CODE_POINT + 1, 1 | _STARTS_RUN_BIT, dtype=np.uint8)
    outputs: dict[int, str] = {}
    marks: dict[int, int] = {}
    cases: dict[int, list[int]] = {chars.CASED: [], chars.CASE_IGNORABLE: []}
    for code_point, char in chars.assigned_chars():  # The others pass through unchanged.
        output = chars.normalized_char(code_point, char, lower_case)
        if len(output) > _LENGTH_MASK:
            raise AssertionError(f"U+{code_point:04X} normalizes to {len(output)} characters")
        value = len(output)
        decomposed = unicodedata.normalize("NFD", char.lower()) if lower_case else char
        if not chars.is_control(char) and unicodedata.combining(decomposed[0]) == 0:
            value |= _STARTS_RUN_BIT
        flags[code_point] = value
        if output and output != char:
            outputs[code_point] = output
        if not lower_case:
            continue
        marks.update((ord(c), unicodedata.combining(c)) for c in decomposed
                     if unicodedata.combining(c) and unicodedata.category(c) != "Mn")
        if chars.is_control(char):
            case = chars.CASE_IGNORABLE  # Deleted before lower-casing: invisible to the rule.
        elif chars.is_whitespace(char):
            case = space_case
        else:
            case = chars.case_class(char)
        if case in cases:
            cases[case].append(code_point)
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
                               combining_class, _regex_class(cases[chars.CASED]),
                               _regex_class(cases[chars.CASE_IGNORABLE]))


def _regex_class(code_points: list[int]) -> str:
    """An RE2 character class matching exactly the given (sorted) code points."""
    ranges: list[list[int]] = []
    for code_point in code_points:
        if ranges and ranges[-1][1] == code_point - 1:
            ranges[-1][1] = code_point
        else:
            ranges.append([code_point, code_point])
    return "[" + "".join(f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in ranges) + "]" if ranges else ""


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
        # str.lower()'s final-sigma rule: a capital sigma followed by cased text (case-ignorable
        # characters skipped) is not final, one that follows cased text otherwise is.
        cased, ignorable = tables.cased, tables.case_ignorable
        self._sigma_not_final = f"{chars.CAPITAL_SIGMA}({ignorable}*{cased})"
        self._sigma_final = f"({cased}{ignorable}*){chars.CAPITAL_SIGMA}"

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
        texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace",
                                             replacement_char=0xFFFD)
        output, output_splits, _, _ = self._normalize_code_points(texts)
        return tf.strings.unicode_encode(
            tf.RaggedTensor.from_row_splits(output, output_splits, validate=False), "UTF-8")

    @tf.autograph.experimental.do_not_convert
    def normalize_unicode_with_offsets(self, texts: tf.Tensor):
        """``normalize_unicode`` as code points, each with the input bytes it came from.

        Args:
            texts: string [batch].

        Returns:
            (code_points, starts, limits): int32 [batch, (chars)], the normalized text; int64
            [batch, (chars)] each, the byte span in ``texts`` of the input character that
            gave each one. In a run of a base character and two or more spacing marks (where
            NFD may reorder them across characters), every character gets the run's span.
        """
        decoded, byte_starts = tf.strings.unicode_decode_with_offsets(
            texts, "UTF-8", errors="replace", replacement_char=0xFFFD)
        # An input character's bytes end where the next one's start, or at the end of its row.
        lengths = tf.cast(tf.strings.length(texts), tf.int64)[:, None]  # bytes
        byte_limits = tf.concat([byte_starts[:, 1:], lengths + tf.zeros_like(byte_starts[:, :1])],
                                axis=1).flat_values
        output, output_splits, source, marks = self._normalize_code_points(
            tf.strings.unicode_encode(decoded, "UTF-8"))
        starts = tf.gather(byte_starts.flat_values, source)
        limits = tf.gather(byte_limits, source)
        if marks is not None:
            positions, run = marks
            run_ids = tf.gather_nd(run, positions)
            count = tf.reduce_max(tf.concat([[-1], run_ids], 0)) + 1
            starts = tf.tensor_scatter_nd_update(starts, positions, tf.gather(
                tf.math.unsorted_segment_min(tf.gather_nd(starts, positions), run_ids, count),
                run_ids))
            limits = tf.tensor_scatter_nd_update(limits, positions, tf.gather(
                tf.math.unsorted_segment_max(tf.gather_nd(limits, positions), run_ids, count),
                run_ids))
        return tuple(tf.RaggedTensor.from_row_splits(values, output_splits, validate=False)
                     for values in (output, starts, limits))

    def _normalize_code_points(self, texts: tf.Tensor):
        """Valid UTF-8 string [batch] -> (output code points [m], their row splits [batch + 1],
        source [m]: the index of the input code point each came from, and for uncased
        normalization the (positions, run ids) of the runs holding two or more spacing marks,
        else None).
        """
        if self.lower_case:
            texts = self._resolve_final_sigma(texts)  # sigmas stay one code point each
        code_points = tf.strings.unicode_decode(texts, "UTF-8")
        values, row_splits = code_points.flat_values, code_points.row_splits
        flags = tf.cast(tf.gather(self._flags, values), tf.int32)
        output, ends, source = self._map(values, flags)
        marks = None
        if self.lower_case:
            output, marks = self._reorder_marks(output, source, flags, row_splits)
        output_splits = tf.cast(tf.gather(tf.concat([[0], ends], axis=0), row_splits), tf.int64)
        return output, output_splits, source, marks

    def _resolve_final_sigma(self, texts):
        """Writes each capital sigma as ``str.lower()`` would lower it: ``σ`` or ``ς``."""
        # A match consumes the cased character after the sigma, which may be the next sigma;
        # the second pass handles those.
        for _ in range(2):
            texts = tf.strings.regex_replace(texts, self._sigma_not_final,
                                             chars.SMALL_SIGMA + r"\1")
        # No two sigmas left can share context now, so one pass finds every final one; the
        # table lower-cases the rest.
        return tf.strings.regex_replace(texts, self._sigma_final, r"\1" + chars.FINAL_SIGMA)

    def _map(self, values, flags):
        """Maps each code point [n] to its output sequence: (output [m], ends [n], source [m]),
        ends being cumulative output lengths and source the input index of each output."""
        lengths = flags & _LENGTH_MASK
        ends = tf.cumsum(lengths)
        index = tf.range(tf.reduce_sum(lengths))
        source = tf.searchsorted(ends, index, side="right")
        position = index - tf.gather(ends - lengths, source)
        source_values = tf.gather(values, source)
        limit = tf.size(self._pool_offsets)
        offsets = tf.where(source_values < limit,
                           tf.gather(self._pool_offsets, tf.minimum(source_values, limit - 1)),
                           -1)
        output = tf.where(offsets < 0, source_values,
                          tf.gather(self._pool, tf.maximum(offsets, 0) + position))
        return output, ends, source

    def _reorder_marks(self, output, source, flags, row_splits):
        """Stable-sorts spacing marks by combining class within each run (a character of class 0
        and the marks after it), as NFD does; only runs holding two or more of them can change.
        Returns the output and (positions [k, 1], run ids [m]) of those runs' characters."""
        size = tf.size(flags)
        row_starts = tf.scatter_nd(tf.cast(row_splits[:-1, None], tf.int32),
                                   tf.ones_like(row_splits[:-1], tf.int32), [size + 1])[:-1]
        run = tf.gather(tf.cumsum(tf.cast(flags & _STARTS_RUN_BIT > 0, tf.int32) + row_starts),
                        source)  # Runs never cross rows.
        table_size = tf.size(self._combining_class)
        combining = tf.cast(tf.gather(self._combining_class, tf.minimum(output, table_size - 1)),
                            tf.int32)
        marks_per_run = tf.math.unsorted_segment_sum(tf.cast(combining > 0, tf.int32), run,
                                                     2 * size + 1)
        positions = tf.where(tf.gather(marks_per_run, run) > 1)
        key = (tf.cast(tf.gather_nd(run, positions), tf.float64) * 256
               + tf.cast(tf.gather_nd(combining, positions), tf.float64))
        reordered = tf.gather(tf.gather_nd(output, positions), tf.argsort(key, stable=True))
        return tf.tensor_scatter_nd_update(output, positions, reordered), (positions, run)
