"""The tagger's export: per-WordPiece tokens, tags, word starts and probabilities. A text longer
than seq_length is read as ``predict_tags`` reads it: overlapping windows of whole words, all the
request's windows run as one batch, each word tagged from the window where it has the most
context, and one row per text of all its WordPieces."""

from __future__ import annotations

import tensorflow as tf

from keras_bert.export.signatures import (RawText, RunRowsFn, TaskExport, logits_model,
                                          register)
from keras_bert.tasks.ner.alignment import tagger_stride
from keras_bert.tasks.ner.model import BertTokenClassifier
from keras_bert.tokenization.preprocessor import trim_to_longest
from keras_bert.tokenization.windows import take_windows


def token_classifier_outputs(model: BertTokenClassifier, preprocessor, inputs: dict,
                             raw: RawText | None) -> dict:
    """Per WordPiece position [batch, seq]: tokens (the piece, "" at padding), labels (the best
    tag, "" at padding, [CLS] and [SEP]), label_ids, word_starts (true on a word's first piece,
    whose tag is the word's), input_mask (1 at text positions), and probabilities [batch, seq,
    num_labels]."""
    probabilities = tf.cast(model(inputs, training=False), tf.float32)
    return _named_outputs(model, preprocessor, probabilities, inputs["input_word_ids"],
                          inputs["input_mask"])


def _named_outputs(model: BertTokenClassifier, preprocessor, probabilities, ids,
                   input_mask) -> dict:
    """token_classifier_outputs' outputs from probabilities float32 [batch, seq, num_labels] on
    rows of ids and input_mask, int32 [batch, seq]."""
    label_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
    real = input_mask > 0
    special = tf.reduce_any(tf.stack([ids == preprocessor.cls_id,
                                      ids == preprocessor.sep_id]), axis=0)
    words = real & ~special
    word_starts = words & ~tf.gather(_continues_word(preprocessor), ids)
    # Strings are only gathered, "" from one past the last entry: the OpenVINO export's CPU
    # plugin gathers strings but cannot select among them (tf.where).
    tokens = _gather_or_empty(list(preprocessor.vocabulary), ids, real)
    labels = _gather_or_empty(model.label_names, label_ids, words)
    return {"tokens": tokens, "labels": labels, "label_ids": label_ids,
            "word_starts": word_starts, "probabilities": probabilities,
            "input_mask": input_mask}


def _continues_word(preprocessor) -> tf.Tensor:
    """bool [vocabulary]: whether each WordPiece continues a word ("##..."), as
    ``predict_tags`` tells a word's first piece from the rest."""
    return tf.constant([token.startswith("##") for token in preprocessor.vocabulary])


def _gather_or_empty(strings: list[str], index: tf.Tensor, keep: tf.Tensor) -> tf.Tensor:
    """``strings[index]`` where ``keep``, else "" (string, ``index``'s shape)."""
    table = tf.constant(list(strings) + [""])
    return tf.gather(table, tf.where(keep, index, len(strings)))


def token_classifier_window_outputs(model: BertTokenClassifier, preprocessor, raw: RawText,
                                    run_rows: RunRowsFn, max_windows: int | None) -> dict | None:
    """serving_default's outputs (``token_classifier_outputs``'), one row per text of all its
    WordPieces (``[CLS] pieces [SEP]``, however long), with the text read as ``predict_tags``
    reads it (``alignment.align_words_windows``): windows of whole words (a word is a piece
    not starting with ##, with the pieces after it) that fill seq_length and start
    ``window_stride`` pieces apart (at most ``max_windows`` each); every window of the request
    run through ``run_rows``; each word's pieces take their probabilities from the window
    where the word has the most context (``alignment.merge_window_tags``' rule), [CLS] from
    the first window and [SEP] from the last. A text that fits is one window, read as before.
    None for text pairs."""
    if raw.text_pair is not None:
        return None
    budget = preprocessor.seq_length - 2
    stride = tagger_stride(model.window_stride, preprocessor.seq_length)
    ids = preprocessor.tokenize(raw.text)  # int32 [texts, (pieces)]
    num_texts = tf.shape(raw.text)[0]
    piece_place = tf.cast(tf.ragged.range(ids.row_lengths()).flat_values, tf.int32)
    starts_word = (piece_place == 0) | ~tf.gather(_continues_word(preprocessor), ids.flat_values)
    # Words, int32 [texts, (words)]: each word's first and past-the-last piece in its text.
    piece_text = tf.cast(ids.value_rowids(), tf.int32)
    words_per_text = tf.math.unsorted_segment_sum(tf.cast(starts_word, tf.int32), piece_text,
                                                  num_texts)
    word_first = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(piece_place, starts_word),
                                                  tf.cast(words_per_text, tf.int64))
    text_length = tf.cast(ids.row_lengths(), tf.int32)
    word_end = tf.concat([word_first[:, 1:], tf.RaggedTensor.from_tensor(text_length[:, None])],
                         axis=1)
    window_text, first_word, end_word = _word_windows(word_first, word_end, budget, stride,
                                                      max_windows)
    # [texts, words + 1]: one column past the longest text's words, so that a window without
    # words (an empty text) gathers from a column that exists, even when no text has a word.
    word_starts_of = tf.pad(word_first.to_tensor(0), [[0, 0], [0, 1]])
    word_ends_of = tf.pad(word_end.to_tensor(0), [[0, 0], [0, 1]])
    has_words = end_word > first_word
    piece_start = tf.where(has_words, tf.gather_nd(word_starts_of, tf.stack(
        [window_text, tf.minimum(first_word, tf.shape(word_starts_of)[1] - 1)], 1)), 0)
    piece_end = tf.where(has_words, tf.gather_nd(word_ends_of, tf.stack(
        [window_text, tf.maximum(end_word - 1, 0)], 1)), 0)
    packed = preprocessor.pack(take_windows(ids, window_text, piece_start, piece_end))
    rows = run_rows(packed, lambda rows: {"probabilities": tf.cast(
        model(rows, training=False), tf.float32)})["probabilities"]  # [windows, length, K]
    # Each word's window: the most context, min(left, right) + 0.01 * length in hundredths,
    # the first window on ties.
    pairs = tf.ragged.range(first_word, end_word)  # [windows, (words)]
    pair_window = tf.cast(pairs.value_rowids(), tf.int32)
    pair_word = tf.cast(pairs.flat_values, tf.int32)
    pair_text = tf.gather(window_text, pair_window)
    first_word_of_text = tf.cumsum(words_per_text, exclusive=True)
    pair_global = tf.gather(first_word_of_text, pair_text) + pair_word
    index = tf.gather_nd(word_starts_of, tf.stack([pair_text, pair_word], 1)) - tf.gather(
        piece_start, pair_window)
    length = tf.gather(piece_end - piece_start, pair_window)
    score = 100 * tf.minimum(index, length - 1 - index) + length
    all_words = tf.reduce_sum(words_per_text)
    best = tf.math.unsorted_segment_max(score, pair_global, all_words)
    word_window = tf.math.unsorted_segment_min(
        tf.where(score == tf.gather(best, pair_global), pair_window, tf.int32.max),
        pair_global, all_words)
    # Each piece's probabilities, from its word's window.
    piece_word = tf.cumsum(tf.cast(starts_word, tf.int32)) - 1  # its word, of the request
    piece_window = tf.gather(word_window, tf.maximum(piece_word, 0))
    last_position = tf.shape(rows)[1] - 1  # a word longer than a window is cut there
    position = tf.minimum(1 + piece_place - tf.gather(piece_start, piece_window), last_position)
    piece_probabilities = tf.gather_nd(rows, tf.stack([piece_window, position], 1))
    first_window = tf.math.unsorted_segment_min(tf.range(tf.shape(window_text)[0]), window_text,
                                                num_texts)
    last_window = tf.math.unsorted_segment_max(tf.range(tf.shape(window_text)[0]), window_text,
                                               num_texts)
    cls = tf.gather(rows[:, 0], first_window)
    sep = tf.gather_nd(rows, tf.stack([last_window, tf.minimum(
        1 + tf.gather(piece_end - piece_start, last_window), last_position)], 1))
    special = tf.ones([num_texts, 1], tf.int32)
    whole = tf.concat([tf.RaggedTensor.from_tensor(special * preprocessor.cls_id),
                       tf.cast(ids, tf.int32),
                       tf.RaggedTensor.from_tensor(special * preprocessor.sep_id)], axis=1)
    # Padded as the preprocessor pads a batch that fits (trim_to_longest), or to the longest.
    word_ids = whole.to_tensor(preprocessor.pad_id)
    longest = tf.shape(word_ids)[1]
    wide = [[0, 0], [0, tf.maximum(preprocessor.seq_length - longest, 0)]]
    rows_of = trim_to_longest({
        "input_word_ids": tf.pad(word_ids, wide, constant_values=preprocessor.pad_id),
        "input_mask": tf.pad(tf.ones_like(whole).to_tensor(0), wide)})
    probabilities = tf.concat([
        tf.RaggedTensor.from_tensor(cls[:, None]),
        tf.RaggedTensor.from_row_lengths(piece_probabilities, ids.row_lengths()),
        tf.RaggedTensor.from_tensor(sep[:, None])], axis=1).to_tensor(0.0)
    probabilities = tf.pad(probabilities, [[0, 0], [0, tf.shape(rows_of["input_mask"])[1]
                                                    - longest], [0, 0]])
    return _named_outputs(model, preprocessor, probabilities, rows_of["input_word_ids"],
                          rows_of["input_mask"])


def _word_windows(word_first, word_end, budget: int, stride: int, max_windows: int | None):
    """The windows of whole words ``alignment.window_word_ranges`` cuts, for every text.

    Args:
        word_first, word_end: int32 [texts, (words)], each word's first and past-the-last
            piece in its text.
        budget: the most pieces in a window; stride: pieces from one window's start to the
            next.
        max_windows: the most windows a text may have (None: no limit); a longer text fails
            the call with an InvalidArgumentError naming the limit.

    Returns:
        ``(text_index, first_word, end_word)``, int32 [windows] each: every text's windows in
        order, each window's text and its words [first_word, end_word) (0, 0 for a text of no
        words).
    """
    num_words = tf.cast(word_first.row_lengths(), tf.int32)
    big = tf.int32.max
    firsts, ends = word_first.to_tensor(big), word_end.to_tensor(big)
    # For every word as a window's first: the window's end and the next window's first word.
    end_of = tf.maximum(tf.searchsorted(ends, word_first.to_tensor(0) + budget, side="right",
                                        out_type=tf.int32),
                        tf.range(tf.shape(firsts)[1], dtype=tf.int32)[None, :] + 1)
    end_of = tf.minimum(end_of, num_words[:, None])
    next_of = tf.minimum(tf.maximum(
        tf.searchsorted(firsts, word_first.to_tensor(0) + stride, side="left",
                        out_type=tf.int32),
        tf.range(tf.shape(firsts)[1], dtype=tf.int32)[None, :] + 1), end_of)
    texts = tf.range(tf.shape(num_words)[0], dtype=tf.int32)

    def lookup(table, words):  # table [texts, words] at each text's word (words < width)
        table = tf.pad(table, [[0, 0], [0, 1]])  # a column even where no text has words
        return tf.gather_nd(table, tf.stack([texts, tf.minimum(words,
                                                               tf.shape(table)[1] - 1)], 1))

    def step(count, current, active, first_array, end_array, active_array):
        end = tf.where(num_words > 0, lookup(end_of, current), 0)
        first_array = first_array.write(count, current)
        end_array = end_array.write(count, end)
        active_array = active_array.write(count, active)
        following = lookup(next_of, current)
        return (count + 1, following, active & (end < num_words), first_array, end_array,
                active_array)

    arrays = [tf.TensorArray(dtype, size=0, dynamic_size=True) for dtype in
              (tf.int32, tf.int32, tf.bool)]
    _, _, _, first_array, end_array, active_array = tf.while_loop(
        lambda count, current, active, *_: tf.reduce_any(active), step,
        (0, tf.zeros_like(num_words), tf.ones_like(num_words, tf.bool), *arrays))
    active = tf.transpose(active_array.stack())  # [texts, steps]
    checks = []
    if max_windows is not None:
        checks.append(tf.debugging.assert_less_equal(
            tf.reduce_max(tf.concat([tf.reduce_sum(tf.cast(active, tf.int32), 1), [0]], 0)),
            tf.constant(max_windows, tf.int32),
            message=f"a text is longer than max_windows={max_windows} windows of whole words "
                    f"of at most {budget} WordPieces (stride {stride}); raise max_windows or "
                    f"send shorter texts"))
    with tf.control_dependencies(checks):
        text_index = tf.boolean_mask(tf.broadcast_to(texts[:, None], tf.shape(active)), active)
    return (text_index, tf.boolean_mask(tf.transpose(first_array.stack()), active),
            tf.boolean_mask(tf.transpose(end_array.stack()), active))


def token_classifier_transformers_outputs(model: BertTokenClassifier):
    """TFBertForTokenClassification's: logits float32 [batch, seq, num_labels]."""
    logits = logits_model(model)
    return lambda ids: {"logits": logits(ids, training=False)}


register(BertTokenClassifier, TaskExport(
    outputs=token_classifier_outputs,
    transformers_outputs=token_classifier_transformers_outputs,
    window_outputs=token_classifier_window_outputs))
