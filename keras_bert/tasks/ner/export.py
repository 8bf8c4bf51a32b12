"""The tagger's export: per-WordPiece tokens, tags, word starts and probabilities."""

from __future__ import annotations

import tensorflow as tf

from keras_bert.export.signatures import RawText, TaskExport, logits_model, register
from keras_bert.tasks.ner.model import BertTokenClassifier


def token_classifier_outputs(model: BertTokenClassifier, preprocessor, inputs: dict,
                             raw: RawText | None) -> dict:
    """Per WordPiece position [batch, seq]: tokens (the piece, "" at padding), labels (the best
    tag, "" at padding, [CLS] and [SEP]), label_ids, word_starts (true on a word's first piece,
    whose tag is the word's), input_mask (1 at text positions), and probabilities [batch, seq,
    num_labels]."""
    probabilities = tf.cast(model(inputs, training=False), tf.float32)
    label_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
    vocabulary = tf.constant(list(preprocessor.vocabulary))
    ids = inputs["input_word_ids"]
    real = inputs["input_mask"] > 0
    special = tf.reduce_any(tf.stack([ids == preprocessor.cls_id,
                                      ids == preprocessor.sep_id]), axis=0)
    tokens = tf.where(real, tf.gather(vocabulary, ids), "")
    words = real & ~special
    word_starts = words & ~tf.strings.regex_full_match(tokens, "##.*")
    labels = tf.where(words, tf.gather(tf.constant(model.label_names), label_ids), "")
    return {"tokens": tokens, "labels": labels, "label_ids": label_ids,
            "word_starts": word_starts, "probabilities": probabilities,
            "input_mask": inputs["input_mask"]}


def token_classifier_transformers_outputs(model: BertTokenClassifier):
    """TFBertForTokenClassification's: logits float32 [batch, seq, num_labels]."""
    logits = logits_model(model)
    return lambda ids: {"logits": logits(ids, training=False)}


register(BertTokenClassifier, TaskExport(
    outputs=token_classifier_outputs,
    transformers_outputs=token_classifier_transformers_outputs))
