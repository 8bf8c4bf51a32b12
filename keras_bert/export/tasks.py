"""The task models' exports: each registers the named outputs of its signatures, and where TF
Serving has an API for the task (Classify, Regress), a signature that fits it."""

from __future__ import annotations

import tensorflow as tf

from keras_bert.export.signatures import (RawText, TaskExport, pack, parse_text_examples,
                                          register)
from keras_bert.models.classifier import BertClassifier
from keras_bert.models.embedder import BertEmbedder
from keras_bert.models.encoder import INPUT_NAMES
from keras_bert.models.multiple_choice import BertMultipleChoice
from keras_bert.models.question_answerer import BertQuestionAnswerer
from keras_bert.models.token_classifier import BertTokenClassifier
from keras_bert.tokenization.preprocessor import trim_to_longest

# Google's run_squad.py default: the longest answer, in WordPiece tokens.
MAX_ANSWER_LENGTH = 30


# ------------------------------------------------------------------------------ classifier
def _class_names(model: BertClassifier) -> tf.Tensor:
    names = model.label_names or [str(i) for i in range(model.num_classes)]
    return tf.constant(names)


def _probabilities(model: BertClassifier, outputs: tf.Tensor) -> tf.Tensor:
    return tf.nn.softmax(outputs, axis=-1) if model.activation is None else outputs


def classifier_outputs(model: BertClassifier, preprocessor, inputs: dict,
                       raw: RawText | None) -> dict:
    """probabilities float32 [batch, K], class_ids int32 [batch], class_names string [batch]
    (the label names, or the ids as text); a regression model gives score float32 [batch]."""
    outputs = tf.cast(model(inputs, training=False), tf.float32)
    if model.is_regression:
        return {"score": outputs[:, 0]}
    probabilities = _probabilities(model, outputs)
    class_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
    return {"probabilities": probabilities, "class_ids": class_ids,
            "class_names": tf.gather(_class_names(model), class_ids)}


def classifier_feature_spec(model: BertClassifier) -> dict[str, tf.TensorSpec]:
    """The classifier's features, by name: numeric float32 [batch] (NaN: missing), categorical
    string [batch] ("": missing); {} for a text-only classifier."""
    if model.features is None:
        return {}
    model.require_feature_statistics()
    return {name: tf.TensorSpec([None], tf.float32 if name in model.features.numeric_features
                                else tf.string, name=name)
            for name in model.feature_names}


def classifier_example_features(model: BertClassifier) -> dict[str, tf.io.FixedLenFeature]:
    """How the classify/regress signatures read the features from a tf.Example: numeric from a
    float_list, categorical from a bytes_list; an absent feature is missing (NaN, "")."""
    return {name: tf.io.FixedLenFeature([], spec.dtype,
                                        default_value=float("nan") if spec.dtype == tf.float32
                                        else "")
            for name, spec in classifier_feature_spec(model).items()}


def classifier_example_signatures(model: BertClassifier, preprocessor, text_pair: bool,
                                  dynamic_padding: bool = True) -> dict:
    """TF Serving's Classify (``classify``: classes and scores [batch, K]) or, for regression,
    Regress (``regress``: outputs [batch]) over tf.Examples with bytes features "text" (and
    "text_pair") and the classifier's features (see ``classifier_example_features``)."""
    spec = [tf.TensorSpec([None], tf.string, name="inputs")]
    feature_parsing = classifier_example_features(model)

    @tf.function(autograph=False, input_signature=spec)
    def classify(inputs):
        raw = parse_text_examples(inputs, text_pair, feature_parsing)
        outputs = tf.cast(model(pack(preprocessor, raw, dynamic_padding), training=False),
                          tf.float32)
        if model.is_regression:
            return {"outputs": outputs[:, 0]}
        probabilities = _probabilities(model, outputs)
        classes = tf.tile(_class_names(model)[None, :], [tf.shape(probabilities)[0], 1])
        return {"classes": classes, "scores": probabilities}

    return {"regress" if model.is_regression else "classify": classify}


register(BertClassifier, TaskExport(outputs=classifier_outputs,
                                    extra_signatures=classifier_example_signatures,
                                    feature_spec=classifier_feature_spec))


# ------------------------------------------------------------------------------ tagger (NER)
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


register(BertTokenClassifier, TaskExport(outputs=token_classifier_outputs))


# ------------------------------------------------------------------------------ embedder
def embedder_outputs(model: BertEmbedder, preprocessor, inputs: dict,
                     raw: RawText | None) -> dict:
    """embedding float32 [batch, hidden]; serve_ids also gives token_features [batch, seq,
    hidden * len(feature_layers)] (left out of raw text, where it would dwarf the rest)."""
    outputs = model(inputs, training=False)
    result = {"embedding": tf.cast(outputs["embedding"], tf.float32)}
    if raw is None:
        result["token_features"] = tf.cast(outputs["token_features"], tf.float32)
    return result


register(BertEmbedder, TaskExport(outputs=embedder_outputs))


# ------------------------------------------------------------------------------ question answering
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


register(BertQuestionAnswerer, TaskExport(outputs=question_answerer_outputs, text_pair=True))


# ------------------------------------------------------------------------------ multiple choice
def multiple_choice_outputs(model: BertMultipleChoice, preprocessor, inputs: dict,
                            raw: RawText | None) -> dict:
    """probabilities float32 [batch, num_choices] and choice_ids int32 [batch]; raw text also
    gives choice_text, the chosen choice."""
    probabilities = tf.cast(model(inputs, training=False), tf.float32)
    choice_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
    result = {"probabilities": probabilities, "choice_ids": choice_ids}
    if raw is not None:
        result["choice_text"] = tf.gather(raw.choices, choice_ids, batch_dims=1)
    return result


def multiple_choice_ids_spec(model: BertMultipleChoice) -> dict:
    """int32 [batch, num_choices, seq] for each packed input."""
    return {name: tf.TensorSpec([None, model.num_choices, None], tf.int32, name=name)
            for name in INPUT_NAMES}


def multiple_choice_text_signature(model: BertMultipleChoice, preprocessor,
                                   dynamic_padding: bool = True):
    """serving_default(text [batch], choices [batch, num_choices]): each (text, choice) pair is
    packed on its own, as in training."""
    specs = [tf.TensorSpec([None], tf.string, name="text"),
             tf.TensorSpec([None, model.num_choices], tf.string, name="choices")]

    @tf.function(autograph=False, input_signature=specs)
    def serving_default(text, choices):
        contexts = tf.repeat(text, model.num_choices)
        packed = preprocessor([contexts, tf.reshape(choices, [-1])])
        if dynamic_padding:
            packed = trim_to_longest(packed)
        length = tf.shape(packed["input_mask"])[1]
        packed = {k: tf.reshape(v, [-1, model.num_choices, length]) for k, v in packed.items()}
        return multiple_choice_outputs(model, preprocessor, packed,
                                       RawText(text, choices=choices))

    return serving_default


register(BertMultipleChoice, TaskExport(outputs=multiple_choice_outputs,
                                        ids_spec=multiple_choice_ids_spec,
                                        text_signature=multiple_choice_text_signature))
