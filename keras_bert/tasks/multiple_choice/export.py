"""The multiple-choice model's export: each (text, choice) pair packed on its own in-graph, the
probabilities over the choices and the chosen text."""

from __future__ import annotations

import tensorflow as tf

from keras_bert.export.signatures import RawText, TaskExport, register
from keras_bert.tasks.multiple_choice.model import BertMultipleChoice
from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.tokenization.preprocessor import trim_to_longest


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


def multiple_choice_transformers_outputs(model: BertMultipleChoice):
    """TFBertForMultipleChoice's: logits float32 [batch, choices], for any number of choices
    (each pair is scored on its own, as the model scores them)."""
    def outputs(ids: dict) -> dict:
        shape = tf.shape(ids["input_word_ids"])
        pairs = {name: tf.reshape(value, [-1, shape[-1]]) for name, value in ids.items()}
        scores = model.head(model.encoder(pairs, training=False)["pooled_output"],
                            training=False)
        return {"logits": tf.reshape(scores, shape[:2])}
    return outputs


register(BertMultipleChoice, TaskExport(outputs=multiple_choice_outputs,
                                        ids_spec=multiple_choice_ids_spec,
                                        text_signature=multiple_choice_text_signature,
                                        transformers_outputs=multiple_choice_transformers_outputs,
                                        openvino_choices=lambda model: model.num_choices))
