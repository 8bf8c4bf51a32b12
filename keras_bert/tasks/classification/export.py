"""The classifier's export: serving outputs (probabilities, class_ids, class_names; score for
regression), its features in the signatures, and TF Serving's Classify/Regress signatures over
tf.Examples. A text longer than seq_length is read as windows in the graph, as ``predict``
reads it (``windows.py``), and answered in one row."""

from __future__ import annotations

import tensorflow as tf

from keras_bert.export.signatures import (RawText, RunRowsFn, TaskExport, logits_model, pack,
                                          parse_text_examples, register, run_rows_of)
from keras_bert.tasks.classification.model import BertClassifier
from keras_bert.tasks.classification.windows import combine_windows, pack_windows


def _class_names(model: BertClassifier) -> tf.Tensor:
    names = model.label_names or [str(i) for i in range(model.num_classes)]
    return tf.constant(names)


def _probabilities(model: BertClassifier, outputs: tf.Tensor) -> tf.Tensor:
    return tf.nn.softmax(outputs, axis=-1) if model.activation is None else outputs


def classifier_outputs(model: BertClassifier, preprocessor, inputs: dict,
                       raw: RawText | None) -> dict:
    """probabilities float32 [batch, K], class_ids int32 [batch], class_names string [batch]
    (the label names, or the ids as text); a regression model gives score float32 [batch]."""
    return _named_outputs(model, tf.cast(model(inputs, training=False), tf.float32))


def _named_outputs(model: BertClassifier, outputs: tf.Tensor) -> dict:
    """classifier_outputs' named outputs from the model's outputs, float32 [batch, K]."""
    if model.is_regression:
        return {"score": outputs[:, 0]}
    probabilities = _probabilities(model, outputs)
    class_ids = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
    return {"probabilities": probabilities, "class_ids": class_ids,
            "class_names": tf.gather(_class_names(model), class_ids)}


def classifier_window_outputs(model: BertClassifier, preprocessor, raw: RawText,
                              run_rows: RunRowsFn, max_windows: int | None) -> dict | None:
    """serving_default's outputs (``classifier_outputs``'), one row per text, with every text
    read as ``predict`` reads it: split into windows (``windows.pack_windows``; at most
    ``max_windows`` each), all the batch's windows run through ``run_rows``, each text's
    windows combined (``windows.combine_windows``); a pair's second text is windowed, its
    first kept in every window (``windows.pack_pair_windows``). None for
    ``window_combination="first"`` (one window each, cut at seq_length)."""
    outputs = _windowed_outputs(model, preprocessor, raw, run_rows, max_windows)
    return None if outputs is None else _named_outputs(model, outputs)


def _windowed_outputs(model: BertClassifier, preprocessor, raw: RawText, run_rows: RunRowsFn,
                      max_windows: int | None) -> tf.Tensor | None:
    """The model's outputs float32 [batch, K] on raw text read as windows; None where
    ``classifier_window_outputs`` says."""
    if model.window_combination == "first":
        return None
    packed, text_index = pack_windows(preprocessor, raw.text, model.window_stride, max_windows,
                                      text_pairs=raw.text_pair)
    features = {name: tf.gather(value, text_index) for name, value in (raw.features or {}).items()}
    rows = run_rows({**packed, **features},
                    lambda ids: {"outputs": tf.cast(model(ids, training=False), tf.float32)})
    return combine_windows(rows["outputs"], text_index, tf.shape(raw.text)[0], model.activation)


def classifier_openvino_windows(model: BertClassifier, preprocessor):
    """For the OpenVINO IR: (window_stride, outputs), the model's stride (None: the default;
    the IR's tokenizer cuts the windows) and ``outputs(ids, text_index)``, which combines a
    batch's windows as serving_default does (``combine_windows``; every text has at least one
    window, so the texts are the largest index + 1); None for ``window_combination="first"``."""
    if model.window_combination == "first":
        return None

    def outputs(ids: dict, text_index: tf.Tensor) -> dict:
        rows = tf.cast(model(ids, training=False), tf.float32)
        num_texts = tf.reduce_max(tf.concat([text_index, [-1]], 0)) + 1
        return _named_outputs(model, combine_windows(rows, text_index, num_texts,
                                                     model.activation))

    return model.window_stride, outputs


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
                                  dynamic_padding: bool = True, *,
                                  max_windows: int | None = None) -> dict:
    """TF Serving's Classify (``classify``: classes and scores [batch, K]) or, for regression,
    Regress (``regress``: outputs [batch]) over tf.Examples with bytes features "text" (and
    "text_pair") and the classifier's features (see ``classifier_example_features``); long
    texts read as windows, as serving_default reads them."""
    spec = [tf.TensorSpec([None], tf.string, name="inputs")]
    feature_parsing = classifier_example_features(model)
    run_rows = run_rows_of(dynamic_padding)

    @tf.function(autograph=False, input_signature=spec)
    def classify(inputs):
        raw = parse_text_examples(inputs, text_pair, feature_parsing)
        outputs = _windowed_outputs(model, preprocessor, raw, run_rows, max_windows)
        if outputs is None:
            outputs = tf.cast(model(pack(preprocessor, raw, dynamic_padding), training=False),
                              tf.float32)
        if model.is_regression:
            return {"outputs": outputs[:, 0]}
        probabilities = _probabilities(model, outputs)
        classes = tf.tile(_class_names(model)[None, :], [tf.shape(probabilities)[0], 1])
        return {"classes": classes, "scores": probabilities}

    return {"regress" if model.is_regression else "classify": classify}


def classifier_transformers_outputs(model: BertClassifier):
    """TFBertForSequenceClassification's: logits float32 [batch, num_labels] (a regression
    model's score: [batch, 1]), before any softmax or sigmoid."""
    logits = logits_model(model)
    return lambda ids: {"logits": logits(ids, training=False)}


register(BertClassifier, TaskExport(outputs=classifier_outputs,
                                    extra_signatures=classifier_example_signatures,
                                    feature_spec=classifier_feature_spec,
                                    transformers_outputs=classifier_transformers_outputs,
                                    window_outputs=classifier_window_outputs,
                                    openvino_windows=classifier_openvino_windows))
