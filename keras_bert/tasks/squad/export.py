"""The question answerer's export: start/end logits and the best answer span, cut in-graph. A
context longer than seq_length is read as ``predict_answers`` reads it: overlapping windows
``doc_stride`` WordPieces apart, each after the whole question, all the request's windows run as
one batch, and each question's best span over all its windows, whose text is cut from the
context's own characters as ``predict_answers`` cuts it."""

from __future__ import annotations

import tensorflow as tf

from keras_bert.export.signatures import RawText, RunRowsFn, TaskExport, register
from keras_bert.tasks.squad.model import BertQuestionAnswerer
from keras_bert.tokenization.windows import segment_min, take_windows, window_spans

# Google's run_squad.py default: the longest answer, in WordPiece tokens.
MAX_ANSWER_LENGTH = 30


def best_spans(start_logits, end_logits, inputs: dict, max_answer_length: int,
               start_allowed: tf.Tensor | None = None):
    """(start, end, score) of the best context span per row, [batch] each: the highest
    start_logits[i] + end_logits[j] with i <= j < i + max_answer_length, both in the context
    (segment 1, before its closing [SEP]), and i where ``start_allowed`` (bool [batch, seq],
    None: anywhere) says; score is -inf when no span is."""
    seq = tf.shape(start_logits)[1]
    positions = tf.range(seq)
    length = tf.reduce_sum(inputs["input_mask"], axis=1)
    context = (inputs["input_type_ids"] == 1) & (positions[None, :] < (length - 1)[:, None])
    span_ok = ((positions[None, :] >= positions[:, None])
               & (positions[None, :] - positions[:, None] < max_answer_length))
    starts = context if start_allowed is None else context & start_allowed
    valid = span_ok[None] & starts[:, :, None] & context[:, None, :]
    scores = tf.where(valid, start_logits[:, :, None] + end_logits[:, None, :], -float("inf"))
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])
    best = tf.argmax(flat, axis=-1, output_type=tf.int32)
    # -inf where no span is, said outright: OpenVINO's ReduceMax of only -inf is the lowest
    # float.
    found = tf.reduce_any(tf.reshape(valid, tf.shape(flat)), axis=-1)
    return best // seq, best % seq, tf.where(found, tf.reduce_max(flat, axis=-1), -float("inf"))


def span_text(preprocessor, ids, start, end) -> tf.Tensor:
    """The WordPiece tokens ids[start..end] joined back into words: string [batch] (lower-cased
    for uncased models, as the tokenizer saw it). serve_ids' answer text: packed ids carry no
    context to cut it from."""
    positions = tf.range(tf.shape(ids)[1])[None, :]
    inside = (positions >= start[:, None]) & (positions <= end[:, None])
    tokens = tf.ragged.boolean_mask(tf.gather(tf.constant(list(preprocessor.vocabulary)), ids),
                                    inside)
    text = tf.strings.reduce_join(tokens, axis=1, separator=" ")
    return tf.strings.regex_replace(tf.strings.regex_replace(text, " ##", ""), "^##", "")


def question_answerer_outputs(model: BertQuestionAnswerer, preprocessor, inputs: dict,
                              raw: RawText | None) -> dict:
    """start_logits and end_logits float32 [batch, seq], input_mask int32 [batch, seq] (1 at
    text positions), and the best span of the context:
    answer_start and answer_end (token positions), answer_score, and answer_text (string
    [batch]; "" when the context is empty). serve_ids reads each row as one window, and its
    answer_text is the span's WordPieces joined into words (``span_text``); serving_default
    reads contexts as windows and cuts answer_text from the context
    (``question_answerer_window_outputs``)."""
    outputs = _span_outputs(_logits(model, inputs), inputs)
    outputs["answer_text"] = tf.where(
        outputs["answer_score"] > -float("inf"),
        span_text(preprocessor, inputs["input_word_ids"], outputs["answer_start"],
                  outputs["answer_end"]), "")
    return outputs


def _logits(model: BertQuestionAnswerer, inputs: dict) -> dict:
    """start_logits and end_logits, float32 [rows, seq]."""
    outputs = model(inputs, training=False)
    return {name: tf.cast(outputs[name], tf.float32) for name in ("start_logits", "end_logits")}


def _span_outputs(logits: dict, inputs: dict, start_allowed: tf.Tensor | None = None) -> dict:
    """question_answerer_outputs' outputs but answer_text, from the logits of rows ``inputs``
    (packed ids)."""
    start, end, score = best_spans(logits["start_logits"], logits["end_logits"], inputs,
                                   MAX_ANSWER_LENGTH, start_allowed)
    return {**logits, "input_mask": inputs["input_mask"],
            "answer_start": start, "answer_end": end, "answer_score": score}


def question_answerer_window_outputs(model: BertQuestionAnswerer, preprocessor, raw: RawText,
                                     run_rows: RunRowsFn, max_windows: int | None) -> dict | None:
    """serving_default's outputs (``question_answerer_outputs``'), one row per question, with
    its context read as ``predict_answers`` reads it (``features.make_squad_features``): the
    question's first ``max_query_length`` WordPieces, then windows of the context that start
    ``doc_stride`` pieces apart and fill seq_length (at most ``max_windows`` each); every
    window of the request run through ``run_rows``; the answer is the best span over the
    question's windows, starting where its window gives the token the most context
    (run_squad.py's rule). The logits, input_mask and token positions are those of the window
    that holds the answer (the first window when the context is empty: answer_text "",
    answer_score -inf). answer_text is ``predict_answers``' text: the context's own bytes
    from the first byte of the span's first WordPiece to the last of its last (the
    tokenizer's offsets), with their case, accents, spacing and punctuation; a context that is
    not valid UTF-8 is read with U+FFFD for each invalid byte, as ``BertTokenizer`` decodes
    bytes. None without a context (``text_pair``)."""
    if raw.text_pair is None:
        return None
    seq_length = preprocessor.seq_length
    questions = preprocessor.tokenize(raw.text)[:, :_query_length(model, preprocessor)]
    # Valid UTF-8, so that the offsets and the answer cut with them are in the text as read.
    context_texts = tf.strings.unicode_transcode(raw.text_pair, "UTF-8", "UTF-8",
                                                 errors="replace", replacement_char=0xFFFD)
    contexts, byte_starts, byte_limits = preprocessor.tokenizer.tokenize_with_offsets(
        context_texts)
    question_lengths = tf.cast(questions.row_lengths(), tf.int32)
    context_lengths = tf.cast(contexts.row_lengths(), tf.int32)
    doc_length = seq_length - question_lengths - 3  # [CLS] question [SEP] window [SEP]
    text_index, starts, ends = window_spans(context_lengths, doc_length,
                                            tf.minimum(model.doc_stride, doc_length),
                                            max_windows)
    packed = preprocessor.pack(tf.gather(questions, text_index),
                               take_windows(contexts, text_index, starts, ends))
    rows = run_rows(packed, lambda ids: {**_logits(model, ids), **ids})
    outputs, first, last = _best_answers(rows, text_index, starts, ends, question_lengths,
                                         context_lengths, tf.shape(raw.text)[0])
    outputs["answer_text"] = _context_text(
        context_texts, byte_starts, byte_limits, outputs["answer_score"] > -float("inf"),
        first, last)
    return outputs


def _best_answers(rows: dict, text_index, starts, ends, question_lengths, context_lengths,
                  num_texts):
    """Each question's answer over its windows (``question_answerer_window_outputs``'), from
    the logits of every window of a request.

    Args:
        rows: start_logits, end_logits float32 and the packed ids, [windows, seq] each.
        text_index, starts, ends: int32 [windows], ``window_spans``' for the contexts.
        question_lengths, context_lengths: int32 [texts], the pieces of each question as
            packed and of each context.
        num_texts: the questions in the request.

    Returns:
        (outputs, first, last): serving_default's outputs but answer_text, one row per
        question, and the answer's first and last piece in its context, int32 [texts] (read
        only where answer_score > -inf).
    """
    start_allowed = _max_context(rows["input_mask"], tf.gather(question_lengths, text_index) + 2,
                                 text_index, starts, ends, context_lengths)
    windows = _span_outputs({name: rows[name] for name in ("start_logits", "end_logits")},
                            rows, start_allowed)
    # -inf (no span) as the lowest float, which unsorted_segment_max starts from.
    score = tf.maximum(windows["answer_score"], tf.float32.min)
    best = tf.math.unsorted_segment_max(score, text_index, num_texts)
    rows_of = tf.range(tf.shape(text_index)[0], dtype=tf.int32)
    chosen = segment_min(  # each question's first window of its best score
        tf.where(score == tf.gather(best, text_index), rows_of, tf.int32.max), text_index,
        num_texts)
    outputs = {name: tf.gather(value, chosen) for name, value in windows.items()}
    # The chosen window's first context piece, as a piece of its context: [texts].
    window_first = tf.gather(starts, chosen) - question_lengths - 2
    return (outputs, window_first + outputs["answer_start"],
            window_first + outputs["answer_end"])


def _context_text(texts, piece_starts, piece_limits, found, first, last) -> tf.Tensor:
    """Each text's bytes from its piece ``first``'s start to its piece ``last``'s limit, ""
    where not ``found``: string [texts].

    Args:
        texts: string [texts].
        piece_starts, piece_limits: int64 [texts, (pieces)], each piece's bytes in its text.
        found: bool [texts]; first, last: int32 [texts], pieces of each text where found.
    """
    start, limit = _answer_bytes(piece_starts.flat_values, piece_limits.flat_values,
                                tf.cast(piece_starts.row_starts(), tf.int32), found, first, last)
    return tf.strings.substr(texts, start, limit - start)


def _answer_bytes(piece_starts, piece_limits, context_starts, found, first, last):
    """The answers' bytes: (start, limit) [texts], from the start of each context's piece
    ``first`` to the limit of its piece ``last``, (0, 0) where not ``found``.

    Args:
        piece_starts, piece_limits: int [pieces], each piece's bytes, the pieces of every
            context of the request one after another.
        context_starts: int32 [texts], each context's first piece in them.
        found: bool [texts]; first, last: int32 [texts], pieces of each context where found.
    """
    # A row not found reads the zero after all pieces (its context may have none).
    nowhere = tf.size(piece_starts, out_type=tf.int32)
    zero = tf.zeros([1], piece_starts.dtype)
    start = tf.gather(tf.concat([piece_starts, zero], 0),
                      tf.where(found, context_starts + first, nowhere))
    limit = tf.gather(tf.concat([piece_limits, zero], 0),
                      tf.where(found, context_starts + last, nowhere))
    return start, limit


def _max_context(input_mask, context_offset, text_index, starts, ends, context_lengths):
    """bool [windows, seq]: the context positions whose token has, in this window, more context
    than in any other window of its text: the highest min(left, right) + 0.01 * window length,
    the first such window on ties (run_squad.py's ``_check_is_max_context``, in hundredths).

    Args:
        input_mask: int32 [windows, seq].
        context_offset: int32 [windows], the position of each window's first context piece.
        text_index, starts, ends: int32 [windows], ``window_spans``'.
        context_lengths: int32 [texts], the pieces of each text's context.
    """
    positions = tf.range(tf.shape(input_mask)[1], dtype=tf.int32)[None, :]
    within = positions - context_offset[:, None]  # the piece's place in its window
    window_length = (ends - starts)[:, None]
    inside = (within >= 0) & (within < window_length)
    score = 100 * tf.minimum(within, window_length - 1 - within) + window_length
    # One segment per context piece of the request; one more for positions outside a context.
    first_piece = tf.cumsum(context_lengths, exclusive=True)
    pieces = tf.reduce_sum(context_lengths)
    piece = tf.where(inside, tf.gather(first_piece, text_index)[:, None] + starts[:, None]
                     + within, pieces)
    rows = tf.broadcast_to(tf.range(tf.shape(input_mask)[0], dtype=tf.int32)[:, None],
                           tf.shape(input_mask))
    # Flat [windows * seq] for the segment ops: OpenVINO's converter gives a wrong shape for
    # their segment ids of rank 2.
    score, piece, rows = (tf.reshape(value, [-1]) for value in (score, piece, rows))
    best = tf.math.unsorted_segment_max(score, piece, pieces + 1)
    first = segment_min(
        tf.where(score == tf.gather(best, piece), rows, tf.int32.max), piece, pieces + 1)
    return inside & tf.reshape(rows == tf.gather(first, piece), tf.shape(input_mask))


def question_answerer_openvino_answers(model: BertQuestionAnswerer, preprocessor):
    """For the OpenVINO IR: (query_length, doc_stride, outputs), the pieces of a question
    packed, the model's stride, and ``outputs(ids, text_index, window_starts, window_ends,
    question_lengths, context_lengths, piece_starts, piece_limits)``: from a request's
    windows, packed and cut as serving_default cuts them (``window_spans``' text_index,
    starts and ends; the pieces of each question and context; every context piece's bytes in
    the request's contexts, int32 [pieces]), (outputs, start, limit): serving_default's
    outputs but answer_text, and the answers' bytes there (``_answer_bytes``)."""
    def outputs(ids: dict, text_index, window_starts, window_ends, question_lengths,
                context_lengths, piece_starts, piece_limits):
        rows = {**_logits(model, ids), **ids}
        answers, first, last = _best_answers(rows, text_index, window_starts, window_ends,
                                             question_lengths, context_lengths,
                                             tf.shape(context_lengths)[0])
        start, limit = _answer_bytes(piece_starts, piece_limits,
                                    tf.cumsum(context_lengths, exclusive=True),
                                    answers["answer_score"] > -float("inf"), first, last)
        return answers, start, limit

    return _query_length(model, preprocessor), model.doc_stride, outputs


def _query_length(model: BertQuestionAnswerer, preprocessor) -> int:
    """The most pieces of a question packed: ``max_query_length``, leaving at least one
    context piece per window where it would leave none."""
    return min(model.max_query_length, preprocessor.seq_length - 4)


def question_answerer_transformers_outputs(model: BertQuestionAnswerer):
    """TFBertForQuestionAnswering's: start_logits and end_logits float32 [batch, seq]."""
    def outputs(ids: dict) -> dict:
        result = model(ids, training=False)
        return {"start_logits": result["start_logits"], "end_logits": result["end_logits"]}
    return outputs


register(BertQuestionAnswerer, TaskExport(
    outputs=question_answerer_outputs, text_pair=True,
    transformers_outputs=question_answerer_transformers_outputs,
    window_outputs=question_answerer_window_outputs,
    openvino_answers=question_answerer_openvino_answers))
