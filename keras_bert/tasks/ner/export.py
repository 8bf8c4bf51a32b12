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
from keras_bert.tokenization.windows import segment_min, take_windows


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
    # The request's pieces, words and windows one after another, as the merge reads them.
    text_begins = tf.cast(ids.row_starts(), tf.int32)
    words_before = tf.cumsum(words_per_text, exclusive=True)
    window_begins = tf.gather(text_begins, window_text)
    probabilities, word_ids, input_mask = _merge_windows(
        preprocessor, rows, window_text, window_begins + piece_start,
        window_begins + piece_end, tf.gather(words_before, window_text) + first_word,
        tf.gather(words_before, window_text) + end_word,
        tf.gather(text_begins, tf.cast(word_first.value_rowids(), tf.int32))
        + word_first.flat_values, tf.cast(ids.flat_values, tf.int32), text_begins,
        tf.cast(ids.row_limits(), tf.int32))
    # Padded as the preprocessor pads a batch that fits (trim_to_longest), or to the longest.
    longest = tf.shape(word_ids)[1]
    wide = [[0, 0], [0, tf.maximum(preprocessor.seq_length - longest, 0)]]
    rows_of = trim_to_longest({
        "input_word_ids": tf.pad(word_ids, wide, constant_values=preprocessor.pad_id),
        "input_mask": tf.pad(input_mask, wide)})
    probabilities = tf.pad(probabilities, [[0, 0], [0, tf.shape(rows_of["input_mask"])[1]
                                                    - longest], [0, 0]])
    return _named_outputs(model, preprocessor, probabilities, rows_of["input_word_ids"],
                          rows_of["input_mask"])


def token_classifier_openvino_word_windows(model: BertTokenClassifier, preprocessor):
    """For the OpenVINO IR: (stride, outputs), the windows' stride (``tagger_stride``) and
    ``outputs(ids, text_index, window_starts, window_ends, first_word, end_word, word_first,
    piece_ids, text_begins, text_ends)``: serving_default's outputs from a request's packed
    windows of whole words (the IR's tokenizer cuts them as serving_default does; the rest
    as ``_merge_windows`` reads them)."""
    def outputs(ids: dict, text_index, window_starts, window_ends, first_word, end_word,
                word_first, piece_ids, text_begins, text_ends) -> dict:
        rows = tf.cast(model(ids, training=False), tf.float32)
        probabilities, word_ids, input_mask = _merge_windows(
            preprocessor, rows, text_index, window_starts, window_ends, first_word, end_word,
            word_first, piece_ids, text_begins, text_ends)
        return _named_outputs(model, preprocessor, probabilities, word_ids, input_mask)

    return tagger_stride(model.window_stride, preprocessor.seq_length), outputs


def _merge_windows(preprocessor, rows, text_index, window_starts, window_ends, first_word,
                  end_word, word_first, piece_ids, text_begins, text_ends):
    """One row per text of all its WordPieces, ``[CLS] pieces [SEP]``, from its windows' rows:
    each word's pieces take their probabilities from the window where the word has the most
    context (``alignment.merge_window_tags``' rule, min(left, right) + 0.01 * length in
    hundredths, the first window on ties), [CLS] from the text's first window and [SEP] from
    its last. Dense ops only (the OpenVINO export converts them).

    Args:
        rows: float32 [windows, length, K], the windows' probabilities.
        text_index: int32 [windows], each window's text.
        window_starts, window_ends: int32 [windows], each window's pieces, and first_word,
            end_word, its words (equal for a text without words).
        word_first: int32 [words], each word's first piece.
        piece_ids: int32 [pieces]; text_begins, text_ends: int32 [texts], each text's pieces.
        (Pieces, words and windows are the request's, its texts' one after another.)

    Returns:
        (probabilities float32 [texts, width, K], input_word_ids, input_mask int32 [texts,
        width]), width the longest text's pieces + 2.
    """
    num_texts = tf.shape(text_begins)[0]
    num_windows = tf.shape(text_index)[0]
    num_pieces = tf.shape(piece_ids)[0]
    num_words = tf.shape(word_first)[0]
    # (window, word): every word of every window.
    words_in = end_word - first_word
    pair_begins = tf.cumsum(words_in, exclusive=True)
    pairs = tf.reduce_sum(words_in)
    pair_window = _range_of(pair_begins, words_in, pairs)
    pair_word = (tf.gather(first_word, pair_window) + tf.range(pairs)
                 - tf.gather(pair_begins, pair_window))
    index = tf.gather(word_first, pair_word) - tf.gather(window_starts, pair_window)
    length = tf.gather(window_ends - window_starts, pair_window)
    score = 100 * tf.minimum(index, length - 1 - index) + length
    best = tf.math.unsorted_segment_max(score, pair_word, num_words)
    word_window = segment_min(tf.where(score == tf.gather(best, pair_word), pair_window,
                                        tf.int32.max), pair_word, num_words)
    # Each piece's probabilities, from its word's window (the words tile the pieces).
    word_lengths = tf.concat([word_first[1:], [num_pieces]], 0) - word_first
    piece_window = tf.gather(word_window, _range_of(word_first, word_lengths, num_pieces))
    last_position = tf.shape(rows)[1] - 1  # a word longer than a window is cut there
    position = tf.minimum(1 + tf.range(num_pieces) - tf.gather(window_starts, piece_window),
                          last_position)
    piece_probabilities = tf.gather_nd(rows, tf.stack([piece_window, position], 1))
    windows = tf.range(num_windows)
    first_window = segment_min(windows, text_index, num_texts)
    last_window = tf.math.unsorted_segment_max(windows, text_index, num_texts)
    cls = tf.gather(rows[:, 0], first_window)
    sep = tf.gather_nd(rows, tf.stack([last_window, tf.minimum(
        1 + tf.gather(window_ends - window_starts, last_window), last_position)], 1))
    # [texts, width]: [CLS], the text's pieces, [SEP], padding.
    lengths = (text_ends - text_begins)[:, None]
    place = tf.range(tf.reduce_max(tf.concat([lengths[:, 0], [0]], 0)) + 2)[None, :]
    in_text = (place >= 1) & (place <= lengths)
    is_sep = place == lengths + 1
    # The zero after all pieces: padding, and a request without pieces.
    piece = tf.where(in_text, text_begins[:, None] + place - 1, num_pieces)
    probabilities = tf.gather(tf.concat([piece_probabilities, tf.zeros_like(rows[:1, 0])], 0),
                              piece)
    probabilities = tf.where((place == 0)[:, :, None], cls[:, None],
                             tf.where(is_sep[:, :, None], sep[:, None], probabilities))
    word_ids = tf.gather(tf.concat([piece_ids, [preprocessor.pad_id]], 0), piece)
    word_ids = tf.where(place == 0, preprocessor.cls_id,
                        tf.where(is_sep, preprocessor.sep_id, word_ids))
    return probabilities, word_ids, tf.cast(place <= lengths + 1, tf.int32)


def _range_of(begins, lengths, size):
    """Which range ``[begins, begins + lengths)`` (int32 [ranges]; the ranges one after another
    from 0, some empty) holds each place of [0, size): int32 [size]."""
    count = tf.shape(begins)[0]
    held = lengths > 0
    starts = tf.math.unsorted_segment_sum(tf.cast(held, tf.int32), begins, size + 1)
    rank = tf.cumsum(starts)[:size] - 1  # the non-empty ranges that start at or before it
    held_rank = tf.cumsum(tf.cast(held, tf.int32)) - 1
    ranges = tf.math.unsorted_segment_max(tf.range(count), tf.where(held, held_rank, count),
                                          count + 1)
    return tf.gather(ranges, tf.maximum(rank, 0))


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
    window_outputs=token_classifier_window_outputs,
    openvino_word_windows=token_classifier_openvino_word_windows))
