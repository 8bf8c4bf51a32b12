"""The question answerer's export: start/end logits and the best answer span, cut in-graph."""

from __future__ import annotations

import tensorflow as tf

from keras_bert.export.signatures import RawText, TaskExport, register
from keras_bert.tasks.squad.model import BertQuestionAnswerer

# Google's run_squad.py default: the longest answer, in WordPiece tokens.
MAX_ANSWER_LENGTH = 30


def best_spans(start_logits, end_logits, inputs: dict, max_answer_length: int):
    """(start, end, score) of the best context span per row, [batch] each: the highest
    start_logits[i] + end_logits[j] with i <= j < i + max_answer_length, both in the context
    (segment 1, before its closing [SEP]); score is -inf when the context is empty."""
    seq = tf.shape(start_logits)[1]
    positions = tf.range(seq)
    length = tf.reduce_sum(inputs["input_mask"], axis=1)
    context = (inputs["input_type_ids"] == 1) & (positions[None, :] < (length - 1)[:, None])
    span_ok = ((positions[None, :] >= positions[:, None])
               & (positions[None, :] - positions[:, None] < max_answer_length))
    valid = span_ok[None] & context[:, :, None] & context[:, None, :]
    scores = tf.where(valid, start_logits[:, :, None] + end_logits[:, None, :], -float("inf"))
    flat = tf.reshape(scores, [tf.shape(scores)[0], -1])
    best = tf.argmax(flat, axis=-1, output_type=tf.int32)
    return best // seq, best % seq, tf.reduce_max(flat, axis=-1)


def span_text(preprocessor, ids, start, end) -> tf.Tensor:
    """The WordPiece tokens ids[start..end] joined back into words: string [batch] (lower-cased
    for uncased models, as the tokenizer saw it)."""
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
    answer_start and answer_end (token positions), answer_score, and answer_text (the span's
    tokens as words; "" when the context is empty). Raw text is one window: a context longer
    than seq_length is cut, as the preprocessor truncates pairs."""
    outputs = model(inputs, training=False)
    start_logits = tf.cast(outputs["start_logits"], tf.float32)
    end_logits = tf.cast(outputs["end_logits"], tf.float32)
    start, end, score = best_spans(start_logits, end_logits, inputs, MAX_ANSWER_LENGTH)
    found = score > -float("inf")
    return {"start_logits": start_logits, "end_logits": end_logits,
            "input_mask": inputs["input_mask"],
            "answer_start": start, "answer_end": end, "answer_score": score,
            "answer_text": tf.where(found, span_text(preprocessor, inputs["input_word_ids"],
                                                     start, end), "")}


def question_answerer_transformers_outputs(model: BertQuestionAnswerer):
    """TFBertForQuestionAnswering's: start_logits and end_logits float32 [batch, seq]."""
    def outputs(ids: dict) -> dict:
        result = model(ids, training=False)
        return {"start_logits": result["start_logits"], "end_logits": result["end_logits"]}
    return outputs


register(BertQuestionAnswerer, TaskExport(
    outputs=question_answerer_outputs, text_pair=True,
    transformers_outputs=question_answerer_transformers_outputs))
