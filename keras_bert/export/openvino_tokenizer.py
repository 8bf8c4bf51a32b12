"""Google's BERT tokenization and packing as an OpenVINO graph: raw text (string [batch]) in,
``input_word_ids``, ``input_mask``, ``input_type_ids`` (int32 [batch, seq]) out, with the ids of
our Python tokenizer (``tokenization.BertTokenizer``, Google's FullTokenizer) and the packing of
``BertPackerLayer``.

It is built from our vocab.txt and casing with openvino-tokenizers' operations, without
transformers or tokenizers (their BertTokenizerFast normalizes with newer Unicode tables and
case folding, which Google's tokenizer does not). The steps:

- uncased: each capital sigma is written as Python's ``str.lower()`` writes it (``σ`` or the
  final ``ς``), by the regexes of ``graph_normalizer``, whose classes come from Python's tables;
- CJK ideographs (Google's ranges) are put between spaces (a regex on code-point ranges);
- every other character goes through one ``CharsMapNormalization`` whose map is built here
  from ``chars.normalized_char`` (a SentencePiece "precompiled charsmap": a darts-clone double
  array of the characters that change, and what each becomes): controls deleted, whitespace to
  a space, punctuation between spaces, and when uncased lower-cased without accents, all
  decided by the running Python's ``unicodedata``, as the Python tokenizer decides them;
- bytes that are not UTF-8 (which the map turns into U+FFFD) and NUL are deleted;
- a word of more than 200 characters becomes ``[UNK]`` (Google's max_input_chars_per_word),
  which WordPiece then looks up whole;
- words are split at spaces and looked up with ``WordpieceTokenizer`` (greedy longest match
  first, ``##`` continuations);
- packing as ``[CLS] a [SEP] (b [SEP])`` with Google's pair truncation, padded to the batch's
  longest row (not rounded up: OpenVINO's CPU plugin runs any length, and on short texts every
  padded position is paid for), written with OpenVINO's own operations after
  ``packer_layer.pack_segments``.

Left out: NFD's reordering of two spacing marks of different combining classes in one
character's run (musical symbols and a few others; ``graph_normalizer`` re-sorts them), which
the map cannot express; such text gives other ids than Google's.
"""

from __future__ import annotations

import functools
import struct

import numpy as np

from keras_bert.config import default_window_stride
from keras_bert.tokenization import chars
from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.tokenization.vocab import CLS, PAD, SEP, UNK
from keras_bert.tokenization.wordpiece import MAX_CHARS_PER_WORD, SUFFIX_INDICATOR

# The windowed tokenizer's output that names each row's text.
TEXT_INDEX = "text_index"
# Greater than any word of MAX_CHARS_PER_WORD characters can take (4 UTF-8 bytes each): longer
# words are [UNK] before WordPiece sees them.
MAX_BYTES_PER_WORD = 4 * MAX_CHARS_PER_WORD + 1
_EMPTY_UNIT = 1 << 31  # a leaf of value 0: its label matches no byte, so lookups stop there


# --------------------------------------------------------------------- the characters' map
def _double_array(keys: list[bytes], values: list[int]) -> np.ndarray:
    """A darts-clone double array (uint32 units, as SentencePiece's normalizer reads it) that
    maps each key (no NUL byte; no key a prefix of another) to its value (< 2**31)."""
    trie: dict = {}
    for key, value in zip(keys, values):
        node = trie
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value
    size = 1 << 12
    units = np.full(size, _EMPTY_UNIT, dtype=np.uint64)
    used = np.zeros(size, dtype=bool)
    used_bases: set[int] = set()
    used[0] = True
    free_from = 1
    queue = [(0, trie)]
    while queue:
        position, node = queue.pop()
        labels = [0 if label is None else label for label in node]
        while True:  # the first base whose slots are all free, searched a window at a time
            window = np.arange(free_from & ~0xFF, free_from + 1024)
            while (window[-1] | 0xFF) + 1 >= size:
                size *= 2
                units = np.concatenate([units, np.full(size - len(units), _EMPTY_UNIT,
                                                       dtype=np.uint64)])
                used = np.concatenate([used, np.zeros(size - len(used), dtype=bool)])
            fits = np.ones(len(window), dtype=bool)
            for label in labels:
                fits &= ~used[window ^ label]
            base = next((int(b) for b in window[fits] if b and int(b) not in used_bases), None)
            if base is not None:
                break
            free_from += 1024
        offset = position ^ base
        if offset >= 1 << 21:
            raise ValueError("the character map needs a double array of more than 2**21 units")
        used_bases.add(base)
        unit = (int(units[position]) & 0xFF if position else 0) | offset << 10
        units[position] = unit | (0x100 if None in node else 0)
        for label, child in node.items():
            slot = base ^ (0 if label is None else label)
            used[slot] = True
            if label is None:
                units[slot] = child | _EMPTY_UNIT
            else:
                units[slot] = label  # the offset and leaf bit are set when the child is placed
                queue.append((slot, child))
        while free_from < size and used[free_from]:
            free_from += 1
    last = int(np.flatnonzero(used).max())
    return units[:((last | 0xFF) + 1)].astype(np.uint32)


@functools.cache
def precompiled_charsmap(lower_case: bool) -> bytes:
    """SentencePiece's precompiled charsmap of Google's per-character normalization (see
    ``chars.normalized_char``), CJK spacing left to a regex: the characters it changes, each to
    what it becomes (about 16,000 uncased, 1,000 cased)."""
    keys, values = [], []
    normalized = bytearray()
    for code_point, char in chars.assigned_chars():
        output = chars.normalized_char(code_point, char, lower_case)
        if chars.is_cjk(code_point):
            output = output.strip(" ")
        if output == char or code_point == 0:
            continue
        keys.append(char.encode("utf-8"))
        values.append(len(normalized))
        normalized += output.encode("utf-8") + b"\0"
    units = _double_array(keys, values)
    blob = units.astype("<u4").tobytes()
    return struct.pack("<I", len(blob)) + blob + bytes(normalized)


# --------------------------------------------------------------------------- the graph
def _cjk_pattern() -> str:
    return "([" + "".join(f"\\x{{{start:x}}}-\\x{{{end:x}}}"
                          for start, end in chars.CJK_RANGES) + "])"


def case_steps(lower_case: bool) -> list:
    """The openvino-tokenizers steps that write each capital sigma as Python's ``str.lower()``
    writes it (uncased; none cased): each character keeps its bytes' length and place."""
    from openvino_tokenizers.tokenizer_pipeline import RegexNormalizationStep

    from keras_bert.tokenization.graph_normalizer import build_tables

    if not lower_case:
        return []
    tables = build_tables(lower_case=True)  # the final-sigma rule, as graph_normalizer writes it
    cased, ignorable = tables.cased, tables.case_ignorable
    not_final = RegexNormalizationStep(f"{chars.CAPITAL_SIGMA}({ignorable}*{cased})",
                                       chars.SMALL_SIGMA + "$1")
    return [not_final, not_final,
            RegexNormalizationStep(f"({cased}{ignorable}*){chars.CAPITAL_SIGMA}",
                                   "$1" + chars.FINAL_SIGMA)]


def character_steps(lower_case: bool) -> list:
    """The openvino-tokenizers steps that normalize each character on its own (after
    ``case_steps``): CJK ideographs and punctuation between spaces, whitespace to a space,
    controls, NUL and bytes that are not UTF-8 deleted, and uncased, lower case without
    accents."""
    from openvino_tokenizers.tokenizer_pipeline import CharsmapStep, RegexNormalizationStep

    return [
        RegexNormalizationStep(_cjk_pattern(), " $1 "),
        CharsmapStep(charsmap=precompiled_charsmap(lower_case), remove_extra_whitespaces=False),
        RegexNormalizationStep("[\\x{0}\\x{fffd}]", ""),
    ]


def normalization_steps(lower_case: bool) -> list:
    """The openvino-tokenizers steps from raw text to words separated by single spaces."""
    from openvino_tokenizers.tokenizer_pipeline import RegexNormalizationStep

    return case_steps(lower_case) + character_steps(lower_case) + [
        RegexNormalizationStep(f"[^ ]{{{MAX_CHARS_PER_WORD + 1},}}", f" {UNK} "),
        # A space in front of every text: RegexSplit loses the batch's rows when all of them
        # are empty (openvino-tokenizers 2026.4).
        RegexNormalizationStep("^", " ", global_replace=False),
    ]


def word_ids(text, vocabulary: list[str], lower_case: bool):
    """string [batch] -> WordPiece ids, ragged: (begins int32 [batch], ends [batch], ids [n])."""
    from openvino import opset15
    from openvino_tokenizers.tokenizer_pipeline import (RegexSplitStep, TokenizerPipeline,
                                                        WordPieceTokenizationStep)

    nodes = opset15.string_tensor_unpack(text).outputs()
    for step in normalization_steps(lower_case):
        nodes = step.get_ov_subgraph(list(nodes))
    nodes = TokenizerPipeline.add_ragged_dimension(list(nodes))
    nodes = RegexSplitStep(" ", behaviour="remove").get_ov_subgraph(list(nodes))
    wordpiece = WordPieceTokenizationStep(vocab=list(vocabulary), unk_token=UNK,
                                          suffix_indicator=SUFFIX_INDICATOR,
                                          max_bytes_per_word=MAX_BYTES_PER_WORD)
    return wordpiece.get_ov_subgraph(list(nodes[:5]))


def _pair_lengths(opset, length_a, length_b, budget):
    """``packer_layer.pair_lengths`` (Google's _truncate_seq_pair) in OpenVINO ops."""
    half_a = opset.constant(np.int32((budget + 1) // 2))
    half_b = opset.constant(np.int32(budget // 2))
    budget = opset.constant(np.int32(budget))
    a_short = opset.less_equal(length_a, half_a)
    b_short = opset.less_equal(length_b, half_b)
    keep_a = opset.select(a_short, length_a, opset.select(
        b_short, opset.minimum(length_a, opset.subtract(budget, length_b)), half_a))
    keep_b = opset.select(a_short, opset.minimum(length_b, opset.subtract(budget, length_a)),
                          opset.select(b_short, length_b, half_b))
    return keep_a, keep_b


def i32(value):
    """An OpenVINO int32 constant of ``value`` (a number or a list)."""
    from openvino import opset15

    return opset15.constant(np.array(value, dtype=np.int32))


def last_dropped(opset, node):
    """``node``[:-1] along its first axis."""
    return opset.slice(node, i32([0]), i32([-1]), i32([1]))


def range_owners(opset, begins, ends, size):
    """Which of the ranges [begins, ends) (int32 [ranges], one after another from 0, some
    empty) holds each of ``size`` places: int32 [size]. Two scatters and a cumulative sum,
    linear in the places: OpenVINO's SearchSorted takes time that grows with both lengths'
    product."""
    count = opset.squeeze(opset.shape_of(begins, "i32"), i32(0))
    held = opset.greater(ends, begins)
    # Each place: how many non-empty ranges start at or before it, less one.
    starts = opset.scatter_elements_update(
        opset.broadcast(i32(0), opset.add(opset.unsqueeze(size, i32(0)), i32([1]))), begins,
        opset.convert(held, "i32"), i32(0), reduction="sum")
    rank = opset.subtract(opset.slice(opset.cumsum(starts, i32(0)), i32([0]),
                                      opset.unsqueeze(size, i32(0)), i32([1])), i32(1))
    # The non-empty ranges in order (the empty ones written past them, then cut off).
    held_rank = opset.subtract(opset.cumsum(opset.convert(held, "i32"), i32(0)), i32(1))
    ranges = opset.scatter_elements_update(
        opset.broadcast(i32(0), opset.add(opset.unsqueeze(count, i32(0)), i32([1]))),
        opset.select(held, held_rank, count), opset.range(i32(0), count, i32(1),
                                                          output_type="i32"),
        i32(0), reduction="max")
    return opset.gather(ranges, opset.maximum(rank, i32(0)), i32(0))


def max_windows_node_name(max_windows: int) -> str:
    """The name of the node that fails a request with a text of more than ``max_windows``
    windows: what OpenVINO's error message names."""
    return f"a_text_is_longer_than_max_windows_{max_windows}"


def refuse_beyond(opset, counts, max_windows: int):
    """``counts`` (int32 [texts]) unchanged, through a node that fails the request when one of
    them exceeds ``max_windows`` (OpenVINO has no assertion op: a StringTensorPack of one
    string whose begin lies past its end raises, naming the node, and the compiled model runs
    the next request as before)."""
    most = opset.reduce_max(opset.concat([counts, i32([0])], 0), i32(0), keep_dims=True)
    begin = opset.select(opset.greater(most, i32([max_windows])), i32([1]), i32([0]))
    check = opset.string_tensor_pack(begin, i32([0]), opset.constant(np.array([0], np.uint8)))
    check.set_friendly_name(max_windows_node_name(max_windows))
    zero = opset.reduce_sum(opset.string_tensor_unpack(check.output(0)).output(1), i32(0))
    return opset.add(counts, zero)


# The node that fails a request whose inputs have different numbers of rows (what OpenVINO's
# error message names).
UNEQUAL_ROWS_NODE = "the_inputs_have_different_numbers_of_rows"


def with_equal_rows(opset, inputs: list) -> list:
    """``inputs`` (string [rows, ...] each) unchanged, each gathered through a node that fails
    the request when their rows differ (``UNEQUAL_ROWS_NODE``, as ``refuse_beyond`` fails),
    so that no op downstream reads a text that is not there."""
    rows = [opset.gather(opset.shape_of(node, "i32"), i32([0]), i32(0)) for node in inputs]
    differ = opset.reduce_logical_or(opset.concat(
        [opset.not_equal(count, rows[0]) for count in rows], 0), i32(0), keep_dims=True)
    begin = opset.select(differ, i32([1]), i32([0]))
    check = opset.string_tensor_pack(begin, i32([0]), opset.constant(np.array([0], np.uint8)))
    check.set_friendly_name(UNEQUAL_ROWS_NODE)
    zero = opset.reduce_sum(opset.string_tensor_unpack(check.output(0)).output(1), i32(0))
    return [opset.gather(node, opset.add(opset.range(i32(0), opset.squeeze(count, i32(0)),
                                                     i32(1), output_type="i32"), zero), i32(0))
            for node, count in zip(inputs, rows)]


def window_spans(opset, lengths, window_length, stride, max_windows: int | None):
    """``tokenization.windows.window_spans`` in OpenVINO ops: for texts of ``lengths`` pieces
    (int32 [texts]), read ``window_length`` pieces at a time ``stride`` apart (int32 [texts]
    each), every window's text, first and past-the-last piece, int32 [windows] each. A text of
    more than ``max_windows`` windows fails the request (None: no limit)."""
    beyond = opset.maximum(opset.subtract(lengths, window_length), i32(0))
    counts = opset.add(i32(1), opset.divide(opset.add(beyond, opset.subtract(stride, i32(1))),
                                            stride))
    if max_windows is not None:
        counts = refuse_beyond(opset, counts, max_windows)
    last_window = opset.cumsum(counts, i32(0))  # past each text's last window
    total = opset.reduce_sum(counts, i32(0), keep_dims=True)
    window = opset.range(i32(0), opset.squeeze(total, i32(0)), i32(1), output_type="i32")
    # A window's text: how many texts end at or before it ([windows, texts], small).
    ends_by = opset.less_equal(opset.unsqueeze(last_window, i32(0)),
                               opset.unsqueeze(window, i32(1)))
    text_index = opset.reduce_sum(opset.convert(ends_by, "i32"), i32(1))

    def per_window(node):
        return opset.gather(node, text_index, i32(0))

    within = opset.subtract(window, per_window(opset.subtract(last_window, counts)))
    start = opset.multiply(within, per_window(stride))
    end = opset.minimum(opset.add(start, per_window(window_length)), per_window(lengths))
    return text_index, start, end


def _windows(segments, seq_length: int, window_stride: int | None,
             max_windows: int | None = None):
    """``classification.windows.pack_windows``' cut in OpenVINO ops: each text's ragged ids
    (one segment) as its overlapping windows of ``seq_length - 2`` pieces; a pair's first text
    kept as Google's pair truncation keeps it and its second as windows of the rest (two
    segments; ``pack_pair_windows``). Returns the windows' segments, (begins, ends, ids) ragged
    over [windows] each, and each window's text, int32 [windows]. A text that fits is one
    window, itself (an empty one too)."""
    from openvino import opset15 as opset

    lengths = [opset.subtract(ends, begins) for begins, ends, _ in segments]
    ones = opset.broadcast(i32(1), opset.shape_of(lengths[0], "i32"))  # int32 [texts]
    if len(segments) == 1:
        length = seq_length - 2
        stride = default_window_stride(length) if window_stride is None else window_stride
        text_index, start, end = window_spans(opset, lengths[0], opset.multiply(ones, i32(length)),
                                        opset.multiply(ones, i32(stride)), max_windows)
        begins = opset.gather(segments[0][0], text_index, i32(0))
        return [(opset.add(begins, start), opset.add(begins, end), segments[0][2])], text_index
    budget = seq_length - 3  # [CLS] a [SEP] b [SEP]
    kept, _ = _pair_lengths(opset, lengths[0], lengths[1], budget)
    kept = opset.select(opset.greater(lengths[1], i32(0)), kept, lengths[0])
    second_window = opset.maximum(opset.subtract(i32(budget), kept), i32(1))
    stride = (opset.maximum(opset.divide(second_window, i32(2)), i32(1))
              if window_stride is None else opset.multiply(ones, i32(window_stride)))
    stride = opset.minimum(stride, opset.maximum(opset.subtract(second_window, i32(1)), i32(1)))
    text_index, start, end = window_spans(opset, lengths[1], second_window, stride, max_windows)
    first = opset.gather(segments[0][0], text_index, i32(0))
    second = opset.gather(segments[1][0], text_index, i32(0))
    return [(first, opset.add(first, opset.gather(kept, text_index, i32(0))), segments[0][2]),
            (opset.add(second, start), opset.add(second, end), segments[1][2])], text_index


def pack_rows(segments, seq_length: int, ids: dict[str, int]) -> dict:
    """``packer_layer.pack_segments`` then ``trim_to_longest`` in OpenVINO ops: ragged ids of
    one or two segments -> {input name: int32 [batch, length]}, length the longest row (at
    most seq_length)."""
    from openvino import opset15 as opset

    def column(node):  # [batch] -> [batch, 1]
        return opset.unsqueeze(node, i32(1))

    lengths = [opset.subtract(ends, begins) for begins, ends, _ in segments]
    if len(segments) == 1:
        keep_a = opset.minimum(lengths[0], i32(seq_length - 2))
        keep_b = None
        end = opset.add(keep_a, i32(2))
    else:
        pair_a, pair_b = _pair_lengths(opset, lengths[0], lengths[1], seq_length - 3)
        has_b = opset.greater(lengths[1], i32(0))
        keep_a = opset.select(has_b, pair_a, opset.minimum(lengths[0], i32(seq_length - 2)))
        keep_b = opset.select(has_b, pair_b, i32(0))
        end = opset.select(has_b, opset.add(opset.add(keep_a, keep_b), i32(3)),
                           opset.add(keep_a, i32(2)))
    b_start = opset.add(keep_a, i32(2))
    longest = opset.reduce_max(opset.concat([i32([0]), end], 0), i32(0))
    length = opset.minimum(longest, i32(seq_length))
    position = opset.unsqueeze(opset.range(i32(0), length, i32(1), output_type="i32"), i32(0))

    def read(segment, start):  # segment's ids at position - start, [batch, length]
        begins, _, values = segment
        values = opset.concat([values, i32([0])], 0)  # never empty
        index = opset.add(column(begins), opset.subtract(position, start))
        last = opset.subtract(opset.shape_of(values, "i32"), i32([1]))
        index = opset.minimum(opset.maximum(index, i32(0)), last)
        return opset.gather(values, index, i32(0))

    word_ids = opset.select(opset.equal(position, i32(0)), i32(ids[CLS]), i32(ids[PAD]))
    in_a = opset.logical_and(opset.greater_equal(position, i32(1)),
                             opset.less_equal(position, column(keep_a)))
    word_ids = opset.select(in_a, read(segments[0], i32(1)), word_ids)
    end_col, b_start_col = column(end), column(b_start)
    if keep_b is not None:
        in_b = opset.logical_and(opset.greater_equal(position, b_start_col),
                                 opset.less(position, opset.subtract(end_col, i32(1))))
        word_ids = opset.select(in_b, read(segments[1], b_start_col), word_ids)
    is_sep = opset.logical_or(opset.equal(position, opset.add(column(keep_a), i32(1))),
                              opset.equal(position, opset.subtract(end_col, i32(1))))
    word_ids = opset.select(is_sep, i32(ids[SEP]), word_ids)
    in_text = opset.less(position, end_col)
    type_ids = opset.logical_and(opset.greater_equal(position, b_start_col), in_text)
    return {"input_word_ids": word_ids,
            "input_mask": opset.convert(in_text, "i32"),
            "input_type_ids": opset.convert(type_ids, "i32")}


def named_model(outputs: dict, parameters: list, name: str):
    """An ``openvino.Model`` of ``parameters`` whose results are ``outputs`` ({name: node}),
    each named so."""
    import openvino as ov
    from openvino import opset15

    results = []
    for output_name, node in outputs.items():
        result = opset15.result(node)
        result.output(0).set_names({output_name})
        results.append(result)
    return ov.Model(results, parameters, name)


def tokenizer_model(vocabulary: list[str], lower_case: bool, seq_length: int,
                    text_pair: bool = False, windows: bool = False,
                    window_stride: int | None = None, max_windows: int | None = None,
                    num_choices: int | None = None):
    """The OpenVINO model of raw text -> packed ids.

    Args:
        vocabulary: the tokens, id 0 first (with [PAD], [UNK], [CLS] and [SEP]).
        lower_case: lower-case and strip accents (uncased vocabularies).
        seq_length: the longest packed row, [CLS] and [SEP] included.
        text_pair: whether it takes ``text_pair`` beside ``text``.
        windows: False: each text (or pair) is one row, cut at ``seq_length`` as the
            preprocessor cuts it; True: each is the rows of its windows, as a classifier's
            ``pack_windows`` cuts them, and ``text_index`` says each row's text.
        window_stride: with ``windows``, the classifier's ``window_stride`` (None: its
            default).
        max_windows: with ``windows``, the most windows a text may have: a request with a
            longer text fails, naming ``max_windows_node_name``; None: no limit.
        num_choices: multiple choice: ``text`` [batch] and ``choices`` [batch, num_choices]
            in, each (text, choice) packed as a pair, the outputs [batch, num_choices,
            length] (as a multiple-choice model's serving_default packs them).

    Returns:
        an ``openvino.Model``: ``text`` (and ``text_pair``) string [batch] ->
        ``input_word_ids``, ``input_mask``, ``input_type_ids`` int32 [rows, length] (and
        with ``windows``, ``text_index`` int32 [rows]).
    """
    import openvino as ov
    from openvino import opset15 as opset

    positions = {token: index for index, token in enumerate(vocabulary)}
    missing = [t for t in (PAD, UNK, CLS, SEP) if t not in positions]
    if missing:
        raise ValueError(f"the vocabulary has no {', '.join(missing)}; BERT packing needs them")
    names = ["text", "text_pair"] if text_pair else ["text"]
    shapes = [[-1]] * len(names)
    if num_choices is not None:
        names, shapes = ["text", "choices"], [[-1], [-1, num_choices]]
    parameters = [opset.parameter(shape, ov.Type.string, name=name)
                  for name, shape in zip(names, shapes)]
    for parameter, name in zip(parameters, names):
        parameter.output(0).set_names({name})
    texts = parameters if len(parameters) == 1 else with_equal_rows(opset, parameters)
    if num_choices is not None:  # (text, choice) pairs, [batch * num_choices] each
        pairs = opset.multiply(opset.gather(opset.shape_of(texts[0], "i32"), i32(0),
                                            i32(0)), i32(num_choices))
        row = opset.divide(opset.range(i32(0), pairs, i32(1), output_type="i32"),
                           i32(num_choices))
        texts = [opset.gather(texts[0], row, i32(0)), opset.reshape(texts[1], i32([-1]), False)]
    segments = [word_ids(text, vocabulary, lower_case) for text in texts]
    outputs = {}
    if windows:
        segments, outputs[TEXT_INDEX] = _windows(segments, seq_length, window_stride,
                                                 max_windows)
    outputs = {**pack_rows(segments, seq_length, positions), **outputs}
    if num_choices is not None:  # [batch * num_choices, length] -> [batch, num_choices, length]
        length = opset.gather(opset.shape_of(outputs[INPUT_NAMES[0]], "i64"),
                              opset.constant(np.array([1], np.int64)), np.int64(0))
        shape = opset.concat([opset.constant(np.array([-1, num_choices], np.int64)), length], 0)
        outputs = {name: opset.reshape(node, shape, False) for name, node in outputs.items()}
    return named_model(outputs, parameters, "bert_tokenizer")
