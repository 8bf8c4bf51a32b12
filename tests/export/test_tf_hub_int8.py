"""An int8 TF Hub encoder: export_tf_hub of a model after ``quantize("int8")`` (or with
``quantize="int8"``) runs oneDNN's int8 matmul in the encoder, loaded as TF Hub users load it
(tests/export/tf_hub_consumer.py: hub.load and hub.KerasLayer, no keras_bert) and as TF Serving does;
its outputs are the Keras int8 model's, within int8's accuracy of float32. What cannot be
exported (an int8 BertPretrainer's mlm, a TensorFlow without the kernel) is refused before
anything is written; a float32 model exports as before."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertClassifier, BertPretrainer
from keras_bert.cli import main
from keras_bert.export import export_tf_hub, int8, saved_model_op_types
from keras_bert.export.ops import is_core_op
from keras_bert.layers import int8 as int8_layers
from keras_bert.layers.int8 import is_int8
from keras_bert.checkpoints.saving import save_checkpoint
from keras_bert.tokenization.preprocessor import BertPreprocessor
from tests.serving.exports import SEQ_LENGTH, tiny_encoder
from tests.serving.graph_mode import GraphModeModel
from tests.export.test_int8 import cosines
from tests.export.test_tf_hub import TEXTS, consume

FLOATS = dict(atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def preprocessor(minilm_dir):
    return BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), lower_case=True,
                            seq_length=SEQ_LENGTH)


@pytest.fixture(scope="module")
def exported(preprocessor, tmp_path_factory):
    """A 2-layer float32 encoder, its int8 copy, and the int8 copy exported as a TF Hub pair."""
    float_encoder = tiny_encoder(len(preprocessor.vocabulary))
    quantized = int8.quantized_copy(float_encoder)
    path = str(tmp_path_factory.mktemp("hub-int8") / "bert")
    export_tf_hub(quantized, preprocessor, path)
    return path, float_encoder, quantized


def outputs_of(encoder, packed):
    """The encoder's outputs (pooled, sequence, layers stacked) without training."""
    outputs = encoder(packed, training=False)
    return {"pooled": np.asarray(outputs["pooled_output"]),
            "sequence": np.asarray(outputs["sequence_output"]),
            "layers": np.stack([np.asarray(o) for o in outputs["encoder_outputs"]], 1)}


@pytest.fixture(scope="module")
def consumed(exported, preprocessor, tmp_path_factory):
    path, _, _ = exported
    packed = {k: np.asarray(v) for k, v in preprocessor(tf.constant(TEXTS)).items()}
    return consume(path, str(tmp_path_factory.mktemp("consumer") / "int8"), "text", packed)


def int8_variables(saved_model_dir):
    reader = tf.train.load_checkpoint(os.path.join(saved_model_dir, "variables", "variables"))
    return [name for name, dtype in reader.get_variable_to_dtype_map().items()
            if dtype == tf.int8]


@pytest.mark.slow
def test_hub_load_and_keras_layer_give_the_keras_int8_models_outputs(exported, consumed,
                                                                     preprocessor):
    _, float_encoder, quantized = exported
    arrays, facts = consumed
    assert facts["keras"].startswith("tf_keras"), facts["keras"]  # no keras_bert there
    packed = preprocessor(tf.constant(TEXTS))
    expected = outputs_of(quantized, packed)
    for name in ("pooled", "sequence", "layers"):
        np.testing.assert_allclose(arrays[name], expected[name], **FLOATS, err_msg=name)
    np.testing.assert_allclose(arrays["ids_pooled"], expected["pooled"], **FLOATS)
    np.testing.assert_array_equal(arrays["keras_inference_1"], arrays["keras_inference_2"])
    np.testing.assert_allclose(arrays["keras_inference_1"], expected["pooled"], **FLOATS)
    # int8 rounds each matmul's inputs to 8 bits: close to float32, not equal to it.
    float32 = outputs_of(float_encoder, packed)
    mask = np.asarray(packed["input_mask"]).astype(bool)
    assert cosines(arrays["sequence"][mask], float32["sequence"][mask]).min() > 0.99
    assert 0 < np.abs(arrays["pooled"] - float32["pooled"]).max() < 0.1


@pytest.mark.slow
def test_keras_layer_trains_the_float_weights_as_the_keras_int8_model_does(exported, consumed):
    _, float_encoder, quantized = exported
    arrays, facts = consumed
    for a, b in (("keras_training_1", "keras_inference_1"),
                 ("keras_training_1", "keras_training_2")):
        assert np.abs(arrays[a] - arrays[b]).max() > 1e-3, (a, b)  # dropout acts
    trainable = len(quantized.trainable_weights)
    assert trainable < len(float_encoder.trainable_weights)  # int8 weights are not trained
    assert facts["trainable_variables"] == facts["keras_layer_trainable_weights"] == trainable
    assert facts["variables_with_gradients"] == trainable


@pytest.mark.slow
def test_the_int8_encoder_runs_in_tf_servings_loader_with_int8_weights(exported, preprocessor):
    path, _, quantized = exported
    encoder_dir = os.path.join(path, "encoder")
    packed = {k: np.asarray(v) for k, v in preprocessor(tf.constant(TEXTS)).items()}
    served = GraphModeModel(encoder_dir).run("serving_default", **packed)
    expected = outputs_of(quantized, packed)
    np.testing.assert_allclose(served["default"], expected["pooled"], **FLOATS)
    np.testing.assert_allclose(served["encoder_outputs"], expected["layers"], **FLOATS)
    op_types = saved_model_op_types(encoder_dir)
    assert [op for op in op_types if not is_core_op(op)] == ["_QuantizedMatMul"]
    assert len(int8_variables(encoder_dir)) == 2 * 6 + 1  # six kernels per block, word table


@pytest.mark.slow
def test_a_float32_model_exports_as_before_and_quantize_int8_quantizes_a_copy(exported,
                                                                             preprocessor,
                                                                             tmp_path):
    _, float_encoder, quantized = exported
    classifier = BertClassifier(float_encoder, 2, preprocessor=preprocessor)
    export_tf_hub(classifier, None, str(tmp_path / "float"))
    export_tf_hub(classifier, None, str(tmp_path / "int8"), quantize="int8")
    assert not is_int8(classifier)  # the caller's model is left float32
    packed = {k: np.asarray(v) for k, v in preprocessor(tf.constant(TEXTS)).items()}
    for name, model in (("float", float_encoder), ("int8", quantized)):
        encoder_dir = str(tmp_path / name / "encoder")
        loaded = tf.saved_model.load(encoder_dir)
        np.testing.assert_allclose(loaded(packed)["pooled_output"],
                                   outputs_of(model, packed)["pooled"], **FLOATS, err_msg=name)
        assert ("_QuantizedMatMul" in saved_model_op_types(encoder_dir)) == (name == "int8")
        assert len(int8_variables(encoder_dir)) == (13 if name == "int8" else 0)


def test_an_int8_pretrainer_is_refused_before_anything_is_written(exported, preprocessor,
                                                                  tmp_path):
    _, float_encoder, _ = exported
    pretrainer = BertPretrainer(tiny_encoder(len(preprocessor.vocabulary)))
    pretrainer.encoder.quantize("int8")
    with pytest.raises(ValueError, match="int8 BertPretrainer cannot be exported with "
                                         "encoder.mlm.*Export pretrainer.encoder"):
        export_tf_hub(pretrainer, preprocessor, str(tmp_path / "bert"))
    with pytest.raises(ValueError, match="int8 BertPretrainer"):
        export_tf_hub(BertPretrainer(float_encoder), preprocessor, str(tmp_path / "bert"),
                      quantize="int8")
    with pytest.raises(ValueError, match='"int8" or None'):
        export_tf_hub(float_encoder, preprocessor, str(tmp_path / "bert"), quantize="int4")
    assert os.listdir(tmp_path) == []


def test_without_the_int8_kernel_the_export_refuses_and_writes_nothing(exported, preprocessor,
                                                                       tmp_path, monkeypatch):
    _, _, quantized = exported

    def no_kernel(*args):
        raise tf.errors.NotFoundError(None, None, "No registered '_QuantizedMatMul' OpKernel "
                                                  "for 'CPU' devices compatible with node")
    monkeypatch.setattr(int8_layers, "_int8_matmul_function", no_kernel)
    with pytest.raises(int8_layers.Int8KernelMissing, match="cannot run oneDNN's int8 matmul"):
        export_tf_hub(quantized, preprocessor, str(tmp_path / "bert"))
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_cli_exports_an_int8_hub_encoder_without_mlm(minilm_dir, tmp_path, capsys):
    vocab = os.path.join(minilm_dir, "vocab.txt")
    pretrainer = BertPretrainer(tiny_encoder(30522))
    checkpoint, out = str(tmp_path / "google"), str(tmp_path / "hub")
    save_checkpoint(pretrainer, checkpoint, "google", vocabulary=vocab, lower_case=True)
    assert main(["export", checkpoint, out, "--tf_hub", "--seq_length", "16",
                 "--quantize", "int8"]) == 0
    assert f"exported a TF Hub encoder to {out}/encoder" in capsys.readouterr().out
    encoder = tf.saved_model.load(f"{out}/encoder")
    assert not hasattr(encoder, "mlm")
    assert "_QuantizedMatMul" in saved_model_op_types(f"{out}/encoder")
    ids = {"input_word_ids": [[101, 2023, 2003, 102, 0]], "input_mask": [[1, 1, 1, 1, 0]],
           "input_type_ids": [[0] * 5]}
    inputs = {k: tf.constant(v, tf.int32) for k, v in ids.items()}
    expected = int8.quantized_copy(pretrainer.encoder)(inputs, training=False)["pooled_output"]
    np.testing.assert_allclose(encoder(inputs)["pooled_output"], expected, **FLOATS)
