"""A question answerer's OpenVINO IR: questions (``text``) and contexts (``text_pair``) in,
the outputs of its SavedModel's serving_default out, the answer cut from the context's own
bytes as serving_default cuts it.

The tokenizer reads each context as ``BertTokenizerLayer.tokenize_with_offsets`` does, with
openvino-tokenizers' operations: the context split into its characters, each normalized on
its own (``openvino_tokenizer.character_steps``: the normalized text is the characters'
outputs one after another, so each normalized byte knows its character), the words split at
spaces and looked up one row per word, and each piece's bytes found from its token's length:
a piece covers the characters its bytes came from, an [UNK] its whole word. The windows,
the packing and every id are those of serving_default (``squad.export``): the question's
first ``query_length`` pieces, then windows of the context ``doc_stride`` pieces apart. The
model's part (``TaskExport.openvino_answers``: the logits, the max-context rule, the best
span over a question's windows and its bytes) is converted from TensorFlow; the answer text
is an OpenVINO StringTensorPack of the context's bytes.

A context that is not valid UTF-8 answers with its invalid bytes as they are, which
OpenVINO's Python API (and so ``keras-bert serve``) reads as U+FFFD, as the SavedModel writes
each; the ids are the same (both delete them).
"""

from __future__ import annotations

import numpy as np

from keras_bert.export.openvino_tokenizer import (MAX_BYTES_PER_WORD, TEXT_INDEX, case_steps,
                                                  character_steps, i32, last_dropped,
                                                  named_model, pack_rows, range_owners,
                                                  window_spans, with_equal_rows, word_ids)
from keras_bert.tokenization.vocab import UNK
from keras_bert.tokenization.wordpiece import MAX_CHARS_PER_WORD, SUFFIX_INDICATOR

# What the tokenizer gives the model's part besides the packed ids, int32 each: every window's
# question and place in its context ([windows]), each question's and context's pieces
# ([texts]), and each context piece's bytes in the request's contexts ([pieces]).
WINDOW_INPUTS = (TEXT_INDEX, "window_starts", "window_ends", "question_lengths",
                 "context_lengths", "piece_starts", "piece_limits")
# The model's part gives each answer's bytes (int32 [texts]); the IR packs them into
# answer_text and does not return them.
ANSWER_BYTES = ("answer_byte_start", "answer_byte_limit")


def context_pieces(text, vocabulary: list[str], lower_case: bool):
    """Each context's WordPieces and the bytes each came from.

    Args:
        text: an OpenVINO string [texts] output.
        vocabulary: the tokens, id 0 first.
        lower_case: as ``tokenizer_model``'s.

    Returns:
        (begins, ends, ids, starts, limits, chars): each text's pieces ragged (begins, ends
        int32 [texts] into ids int32 [pieces]); each piece's bytes (starts, limits int32
        [pieces]) in ``chars``, the texts' bytes one after another (uint8).
    """
    from openvino import opset15 as opset
    from openvino_tokenizers.tokenizer_pipeline import (RegexSplitStep, TokenizerPipeline,
                                                        WordPieceTokenizationStep)

    begins, ends, chars = opset.string_tensor_unpack(text).outputs()
    # One text more, "x", after the others: RegexSplit loses the batch's rows when all of
    # them are empty (openvino-tokenizers 2026.4); its rows are dropped below.
    size = opset.shape_of(chars, "i32")
    nodes = [opset.concat([begins, size], 0), opset.concat([ends, opset.add(size, i32(1))], 0),
             opset.concat([chars, opset.constant(np.frombuffer(b"x", np.uint8))], 0)]
    for step in case_steps(lower_case):  # each character keeps its bytes' place
        nodes = step.get_ov_subgraph(list(nodes))
    nodes = TokenizerPipeline.add_ragged_dimension(list(nodes))
    # Each character an element, at its bytes in the text (newlines and bytes that are not
    # UTF-8 too: the last are the unmatched runs between characters).
    text_first, text_end, char_starts, char_limits, _ = RegexSplitStep(
        "(?s).", behaviour="isolate").get_ov_subgraph(list(nodes))
    normalized = [char_starts, char_limits, nodes[4]]
    for step in character_steps(lower_case):
        normalized = step.get_ov_subgraph(list(normalized))
    char_begins, char_ends, normalized_chars = normalized  # the characters, in order
    ends_from_zero = opset.concat([i32([0]), char_ends], 0)
    words = RegexSplitStep(" ", behaviour="remove").get_ov_subgraph(
        TokenizerPipeline.add_ragged_dimension(
            [opset.gather(ends_from_zero, text_first, i32(0)),
             opset.gather(ends_from_zero, text_end, i32(0)), normalized_chars]))
    word_first, word_end, word_starts, word_limits, _ = words
    # Google's max_input_chars_per_word: a longer word is looked up as "[UNK]", written after
    # the text.
    leads = opset.not_equal(opset.bitwise_and(normalized_chars, opset.constant(np.uint8(0xC0))),
                            opset.constant(np.uint8(0x80)))
    chars_before = opset.concat([i32([0]), opset.cumsum(opset.convert(leads, "i32"), i32(0))], 0)
    too_long = opset.greater(
        opset.subtract(opset.gather(chars_before, word_limits, i32(0)),
                       opset.gather(chars_before, word_starts, i32(0))),
        i32(MAX_CHARS_PER_WORD))
    unk_at = opset.shape_of(normalized_chars, "i32")
    lookup_chars = opset.concat([normalized_chars, opset.constant(np.frombuffer(
        UNK.encode(), np.uint8))], 0)
    num_words = opset.squeeze(opset.shape_of(word_starts, "i32"), i32(0))
    rows = opset.range(i32(0), num_words, i32(1), output_type="i32")
    wordpiece = WordPieceTokenizationStep(vocab=list(vocabulary), unk_token=UNK,
                                          suffix_indicator=SUFFIX_INDICATOR,
                                          max_bytes_per_word=MAX_BYTES_PER_WORD)
    piece_first, piece_end, ids = wordpiece.get_ov_subgraph([
        rows, opset.add(rows, i32(1)),
        opset.select(too_long, opset.squeeze(unk_at, i32(0)), word_starts),
        opset.select(too_long, opset.add(opset.squeeze(unk_at, i32(0)), i32(len(UNK))),
                     word_limits),
        lookup_chars])
    # Each piece's normalized bytes: its word's start plus the pieces before it in the word,
    # each as long as its token (without "##"); an [UNK] is its whole word.
    lengths = np.array([len(token.encode("utf-8")) - (len(SUFFIX_INDICATOR) if
                                                       token.startswith(SUFFIX_INDICATOR) else 0)
                        for token in vocabulary], np.int32)
    piece_length = opset.gather(opset.constant(lengths), ids, i32(0))
    before = opset.subtract(opset.cumsum(piece_length, i32(0)), piece_length)
    word = range_owners(opset, piece_first, piece_end,
                   opset.squeeze(opset.shape_of(ids, "i32"), i32(0)))  # each piece's

    def of_word(node):
        return opset.gather(node, word, i32(0))

    first = opset.add(of_word(word_starts), opset.subtract(
        before, opset.gather(before, of_word(piece_first), i32(0))))
    last = opset.subtract(opset.add(first, piece_length), i32(1))
    unknown = opset.equal(ids, i32(vocabulary.index(UNK)))
    first = opset.select(unknown, of_word(word_starts), first)
    last = opset.select(unknown, opset.subtract(of_word(word_limits), i32(1)), last)
    # ... and the characters those bytes came from.
    char_of = range_owners(opset, char_begins, char_ends,
                      opset.squeeze(opset.shape_of(normalized_chars, "i32"), i32(0)))
    starts = opset.gather(char_starts, opset.gather(char_of, first, i32(0)), i32(0))
    limits = opset.gather(char_limits, opset.gather(char_of, last, i32(0)), i32(0))
    pieces_from_zero = opset.concat([i32([0]), piece_end], 0)
    text_pieces = [last_dropped(opset, opset.gather(pieces_from_zero, bound, i32(0)))
                   for bound in (word_first, word_end)]
    return (*text_pieces, ids, starts, limits, chars)


def answers_tokenizer(vocabulary: list[str], lower_case: bool, seq_length: int,
                      query_length: int, doc_stride: int, max_windows: int | None):
    """The OpenVINO model of a question answerer's raw text -> its packed windows.

    Args:
        vocabulary, lower_case, seq_length: as ``tokenizer_model``'s.
        query_length: the most pieces of a question packed.
        doc_stride: the pieces from one window of a context to the next (at most the
            window's length).
        max_windows: the most windows a context may have: a request with a longer one fails,
            naming ``max_windows_node_name``; None: no limit.

    Returns:
        an ``openvino.Model``: ``text`` and ``text_pair`` string [batch] -> ``input_word_ids``,
        ``input_mask``, ``input_type_ids`` int32 [windows, length] and ``WINDOW_INPUTS``.
    """
    import openvino as ov
    from openvino import opset15 as opset

    positions = {token: index for index, token in enumerate(vocabulary)}
    parameters = [opset.parameter([-1], ov.Type.string, name=name)
                  for name in ("text", "text_pair")]
    for parameter in parameters:
        parameter.output(0).set_names({parameter.get_friendly_name()})
    questions, contexts = with_equal_rows(opset, parameters)
    question_begins, question_ends, question_ids = word_ids(questions, vocabulary, lower_case)
    context_begins, context_ends, ids, starts, limits, _ = context_pieces(
        contexts, vocabulary, lower_case)
    question_lengths = opset.minimum(opset.subtract(question_ends, question_begins),
                                     i32(query_length))
    context_lengths = opset.subtract(context_ends, context_begins)
    window_length = opset.subtract(i32(seq_length - 3), question_lengths)  # [CLS] q [SEP] . [SEP]
    text_index, window_starts, window_ends = window_spans(
        opset, context_lengths, window_length, opset.minimum(window_length, i32(doc_stride)),
        max_windows)

    def per_window(node):
        return opset.gather(node, text_index, i32(0))

    question = per_window(question_begins)
    context = per_window(context_begins)
    outputs = pack_rows([(question, opset.add(question, per_window(question_lengths)),
                          question_ids),
                         (opset.add(context, window_starts), opset.add(context, window_ends),
                          ids)], seq_length, positions)
    outputs.update(zip(WINDOW_INPUTS, (text_index, window_starts, window_ends, question_lengths,
                                       context_lengths, starts, limits)))
    return named_model(outputs, parameters, "bert_answers_tokenizer")


def with_answer_text(ov_model):
    """``ov_model`` (the tokenizer joined to the model's part) with ``answer_text``, the
    context's bytes at ``ANSWER_BYTES``, which it no longer returns."""
    from openvino import opset15 as opset

    contexts = next(p for p in ov_model.get_parameters()
                    if p.output(0).get_any_name() == "text_pair")
    ends = {result.output(0).get_any_name(): result for result in ov_model.get_results()}
    start, limit = (ends[name].input_value(0) for name in ANSWER_BYTES)
    context_starts, _, chars = opset.string_tensor_unpack(contexts).outputs()
    # No answer ((0, 0)) as the empty string at its context's start: StringTensorPack takes
    # only ascending bytes.
    empty = opset.equal(start, limit)
    start, limit = (opset.select(empty, context_starts, node) for node in (start, limit))
    result = opset.result(opset.string_tensor_pack(start, limit, chars))
    result.output(0).set_names({"answer_text"})
    ov_model.add_results([result])
    for name in ANSWER_BYTES:
        ov_model.remove_result(ends[name])
    return ov_model
