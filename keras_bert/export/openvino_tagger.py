"""A tagger's OpenVINO IR tokenizer: raw text in, the windows of whole words its SavedModel's
serving_default reads out (``ner.export.token_classifier_window_outputs``), in OpenVINO ops.

A word is a piece that does not start with "##" (or a text's first piece) and the pieces after
it. A window starting at word w holds the words that fit in ``seq_length - 2`` pieces (at least
w); the next starts at the first word ``stride`` pieces after w's start (after w, and no later
than the window's end); a text's windows start at its first word and follow that successor
until a window reaches the text's end (``alignment.window_word_ranges``). Where the SavedModel
walks that chain in a loop, here each text's k-th window is the successor applied k times,
by doubling: tables of the 1st, 2nd, 4th... successor, ``_LEVELS`` of them, each a gather of
the one before. The model's part (``TaskExport.openvino_word_windows``: the probabilities and
their merge into one row per text, ``ner.export._merge_windows``) is converted from TensorFlow.
"""

from __future__ import annotations

import numpy as np

from keras_bert.export.openvino_tokenizer import (TEXT_INDEX, i32, last_dropped, named_model,
                                                  pack_rows, range_owners, refuse_beyond,
                                                  word_ids)

# What the tokenizer gives the merge besides the packed windows, int32 each: every window's
# text, pieces and words ([windows]), each word's first piece ([words]), the pieces' ids
# ([pieces]) and each text's pieces ([texts]), the request's texts one after another.
WORD_WINDOW_INPUTS = (TEXT_INDEX, "window_starts", "window_ends", "first_word", "end_word",
                      "word_first", "piece_ids", "text_begins", "text_ends")
# Windows a text can have: up to 2**_LEVELS (a million; max_windows refuses long before).
_LEVELS = 20


def _places_at_most(opset, places, size):
    """For the sorted int32 ``places``: how many are at most x, for each x of [0, size)."""
    counts = opset.scatter_elements_update(opset.broadcast(i32(0), opset.unsqueeze(size, i32(0))),
                                           opset.minimum(places, opset.subtract(size, i32(1))),
                                           opset.broadcast(i32(1), opset.shape_of(places, "i32")),
                                           i32(0), reduction="sum")
    return opset.cumsum(counts, i32(0))


def word_windows_tokenizer(vocabulary: list[str], lower_case: bool, seq_length: int,
                           stride: int, max_windows: int | None):
    """The OpenVINO model of a tagger's raw text -> the packed windows of whole words.

    Args:
        vocabulary, lower_case, seq_length: as ``tokenizer_model``'s.
        stride: pieces from a window's first word to the next window's, at least
            (``alignment.tagger_stride``).
        max_windows: the most windows a text may have: a request with a longer one fails,
            naming ``max_windows_node_name``; None: no limit.

    Returns:
        an ``openvino.Model``: ``text`` string [batch] -> ``input_word_ids``, ``input_mask``,
        ``input_type_ids`` int32 [windows, length] and ``WORD_WINDOW_INPUTS``.
    """
    import openvino as ov
    from openvino import opset15 as opset

    budget = seq_length - 2
    text = opset.parameter([-1], ov.Type.string, name="text")
    text.output(0).set_names({"text"})
    begins, ends, ids = word_ids(text, vocabulary, lower_case)
    num_pieces = opset.squeeze(opset.shape_of(ids, "i32"), i32(0))
    piece = opset.range(i32(0), num_pieces, i32(1), output_type="i32")
    # Words: each starts at a text's first piece or a piece that is not "##...".
    piece_text = range_owners(opset, begins, ends, num_pieces)
    continues = opset.constant(np.array([t.startswith("##") for t in vocabulary]))
    starts_word = opset.logical_or(
        opset.equal(piece, opset.gather(begins, piece_text, i32(0))),
        opset.logical_not(opset.gather(continues, ids, i32(0))))
    words_through = opset.cumsum(opset.convert(starts_word, "i32"), i32(0))
    num_words = opset.reduce_sum(opset.convert(starts_word, "i32"), i32(0))
    word_first = last_dropped(opset, opset.scatter_elements_update(
        opset.broadcast(i32(0), opset.add(opset.unsqueeze(num_words, i32(0)), i32([1]))),
        opset.select(starts_word, opset.subtract(words_through, i32(1)), num_words), piece,
        i32(0), reduction="max"))
    word_end = opset.concat([opset.slice(word_first, i32([1]), i32([2 ** 31 - 1]), i32([1])),
                             opset.unsqueeze(num_pieces, i32(0))], 0)  # the words tile a text
    words_from_zero = opset.concat([i32([0]), words_through], 0)
    text_first_word = opset.gather(words_from_zero, begins, i32(0))
    text_end_word = opset.gather(words_from_zero, ends, i32(0))
    word = opset.range(i32(0), num_words, i32(1), output_type="i32")
    word_text = opset.gather(piece_text, word_first, i32(0))
    last_of_text = opset.gather(text_end_word, word_text, i32(0))
    # Each word as a window's first: the window's end, and the next window's first word.
    reach = opset.add(num_pieces, i32(max(budget, stride) + 1))
    end_of = opset.minimum(opset.maximum(
        opset.gather(_places_at_most(opset, word_end, reach),
                     opset.add(word_first, i32(budget)), i32(0)), opset.add(word, i32(1))),
        last_of_text)
    firsts_before = opset.concat([i32([0]), _places_at_most(opset, word_first, reach)], 0)
    next_of = opset.minimum(opset.maximum(
        opset.gather(firsts_before, opset.add(word_first, i32(stride)), i32(0)),
        opset.add(word, i32(1))), end_of)
    # The k-th window of every text, by doubling: jump[l] is the successor applied 2**l times
    # (num_words: past a text's last window, and stays there).
    last = opset.greater_equal(end_of, last_of_text)
    jumps = [opset.concat([opset.select(last, num_words, next_of),
                           opset.unsqueeze(num_words, i32(0))], 0)]
    for _ in range(_LEVELS - 1):
        jumps.append(opset.gather(jumps[-1], jumps[-1], i32(0)))
    text_words = opset.subtract(text_end_word, text_first_word)
    slots = opset.maximum(text_words, i32(1))  # a text of no words is one (empty) window
    slot_begins = opset.subtract(opset.cumsum(slots, i32(0)), slots)
    num_slots = opset.reduce_sum(slots, i32(0))
    slot_text = range_owners(opset, slot_begins, opset.add(slot_begins, slots), num_slots)
    k = opset.subtract(opset.range(i32(0), num_slots, i32(1), output_type="i32"),
                       opset.gather(slot_begins, slot_text, i32(0)))
    first = opset.gather(text_first_word, slot_text, i32(0))
    has_words = opset.gather(opset.greater(text_words, i32(0)), slot_text, i32(0))
    at = first
    for level, jump in enumerate(jumps):
        bit = opset.not_equal(opset.bitwise_and(k, i32(1 << level)), i32(0))
        at = opset.select(bit, opset.gather(jump, at, i32(0)), at)
    real = opset.logical_or(opset.logical_not(has_words), opset.less(at, num_words))
    # Keep the real windows, in order.
    counts = opset.scatter_elements_update(
        opset.broadcast(i32(0), opset.shape_of(begins, "i32")), slot_text,
        opset.convert(real, "i32"), i32(0), reduction="sum")
    if max_windows is not None:
        counts = refuse_beyond(opset, counts, max_windows)
    num_windows = opset.reduce_sum(counts, i32(0))
    place = opset.select(real, opset.subtract(opset.cumsum(opset.convert(real, "i32"), i32(0)),
                                              i32(1)), num_windows)

    def kept(node):  # [slots] -> [windows]
        size = opset.add(opset.unsqueeze(num_windows, i32(0)), i32([1]))
        return last_dropped(opset, opset.scatter_elements_update(
            opset.broadcast(i32(0), size), place, node, i32(0), reduction="max"))

    window_text, first_word, window_has_words = (kept(node) for node in (
        slot_text, opset.select(has_words, at, first), opset.convert(has_words, "i32")))
    window_has_words = opset.greater(window_has_words, i32(0))
    ends_of = opset.concat([end_of, opset.unsqueeze(num_words, i32(0))], 0)
    end_word = opset.select(window_has_words, opset.gather(ends_of, first_word, i32(0)),
                            first_word)
    text_start = opset.gather(begins, window_text, i32(0))
    firsts = opset.concat([word_first, opset.unsqueeze(num_pieces, i32(0))], 0)
    lasts = opset.concat([word_end, opset.unsqueeze(num_pieces, i32(0))], 0)
    window_starts = opset.select(window_has_words, opset.gather(firsts, first_word, i32(0)),
                                 text_start)
    window_ends = opset.select(window_has_words, opset.gather(
        lasts, opset.maximum(opset.subtract(end_word, i32(1)), i32(0)), i32(0)), text_start)
    outputs = pack_rows([(window_starts, window_ends, ids)], seq_length,
                        {token: index for index, token in enumerate(vocabulary)})
    outputs.update(zip(WORD_WINDOW_INPUTS, (window_text, window_starts, window_ends, first_word,
                                            end_word, word_first, ids, begins, ends)))
    return named_model(outputs, [text], "bert_word_windows_tokenizer")
