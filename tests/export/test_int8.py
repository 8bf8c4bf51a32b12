"""int8 exports (export/int8.py) and quantize("int8"): which layers it quantizes, the export as
TF Serving loads it (graph-mode loader + Session.run; saved_model_cli run on the CLI's export,
slow) for the encoder and every task model, its size and ops, the refusal on a TensorFlow
without the int8 kernel; a quantized model's predict against its export, and its .keras file
loaded in a fresh process (slow; loaded in this process: test_int8_calibrated.py). Real-weight
accuracy: tests/tasks/test_int8_minilm.py."""

import logging
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import (BertClassifier, BertEmbedder, BertEncoder, BertMultipleChoice,
                        BertPreprocessor, BertQuestionAnswerer, BertTokenClassifier)
from keras_bert.export import check_ops, export_model, int8, saved_model_op_types
from keras_bert.export.ops import is_core_op, tensorflow_text_ops
from keras_bert.layers import int8 as int8_layers
from keras_bert.layers.int8 import is_int8
from tests.serving.exports import TEXTS, tiny_encoder
from tests.serving.graph_mode import GraphModeModel, saved_model_cli_runs

SEQ_LENGTH = 24


def cosines(a, b):
    a, b = np.reshape(a, (len(a), -1)), np.reshape(b, (len(b), -1))
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_quantize_int8_quantizes_the_dense_layers_of_every_block_and_the_word_embeddings():
    encoder = BertEncoder(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=32)
    copy = int8.quantized_copy(encoder)
    for block in copy.transformer_layers:
        layers = [block.attention.query, block.attention.key, block.attention.value,
                  block.attention_output, block.intermediate, block.output_dense]
        assert [layer.quantization_mode for layer in layers] == ["int8"] * 6
        assert [layer.kernel.dtype for layer in layers] == ["int8"] * 6
    assert copy.embeddings.word_embeddings.quantization_mode == "int8"
    assert copy.int8_layers()[0] is copy.embeddings.word_embeddings
    # [batch, hidden] and small tables: int8 does not pay.
    assert copy.pooler.quantization_mode is None
    assert copy.embeddings.token_type_embeddings.quantization_mode is None
    assert not is_int8(encoder) and is_int8(copy)  # the original is untouched
    bf16 = BertEncoder(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=32, dtype="mixed_bfloat16")
    with pytest.raises(ValueError, match="float32 model"):
        int8.quantized_copy(bf16)


@pytest.fixture(scope="module")
def preprocessor(minilm_dir):
    return BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), seq_length=SEQ_LENGTH)


@pytest.fixture(scope="module")
def encoder_exports(preprocessor, tmp_path_factory):
    """A 2-layer encoder exported as float32 and int8 (raw text packed to 24)."""
    base = str(tmp_path_factory.mktemp("int8"))
    model = tiny_encoder(len(preprocessor.vocabulary))
    paths = {quantize: export_model(model, base, f"encoder-{quantize}", preprocessor=preprocessor,
                                    quantize=quantize)
             for quantize in (None, "int8")}
    return model, paths


def saved_bytes(path):
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    shapes = reader.get_variable_to_shape_map()
    return {name: int(np.prod(shape)) * dtype.size
            for name, dtype in reader.get_variable_to_dtype_map().items()
            if name.endswith("VARIABLE_VALUE") for shape in [shapes[name]]}


def test_int8_export_stores_int8_weights_at_under_a_third_of_the_size(encoder_exports):
    _, paths = encoder_exports
    float_bytes, int8_bytes = (saved_bytes(paths[q]) for q in (None, "int8"))
    assert sum(int8_bytes.values()) < sum(float_bytes.values()) / 3
    reader = tf.train.load_checkpoint(os.path.join(paths["int8"], "variables", "variables"))
    int8_variables = [name for name, dtype in reader.get_variable_to_dtype_map().items()
                      if dtype == tf.int8]
    assert len(int8_variables) == 2 * 6 + 1  # six kernels per block and the word embeddings


@pytest.fixture(scope="module")
def graph_mode_runs(encoder_exports, preprocessor):
    """(the packed TEXTS, {quantize: the graph-mode loader's serve_ids outputs on them},
    {quantize: its serving_default outputs on the raw TEXTS}) of both exports."""
    _, paths = encoder_exports
    packed = {k: v.numpy() for k, v in preprocessor(tf.constant(TEXTS)).items()}
    models = {q: GraphModeModel(paths[q]) for q in paths}
    ids = {q: models[q].run("serve_ids", **packed) for q in paths}
    text = {q: models[q].run("serving_default", text=np.array([t.encode() for t in TEXTS], object))
            for q in paths}
    return packed, ids, text


def test_int8_export_runs_in_tf_servings_loader(encoder_exports, graph_mode_runs):
    model, _ = encoder_exports
    packed, ids, text = graph_mode_runs
    expected = model(packed)
    np.testing.assert_allclose(ids[None]["pooled_output"], expected["pooled_output"], atol=2e-5)
    # int8 rounds each matmul's inputs to 8 bits; the outputs keep their direction.
    mask = packed["input_mask"].astype(bool)
    sequence = ids["int8"]["sequence_output"][mask]
    assert cosines(sequence, np.asarray(expected["sequence_output"])[mask]).min() > 0.99
    assert 0 < np.abs(ids["int8"]["pooled_output"] - expected["pooled_output"]).max() < 0.1
    # Rows are quantized one by one, so padding a batch differently changes no real token.
    length = text["int8"]["sequence_output"].shape[1]
    np.testing.assert_allclose(text["int8"]["sequence_output"][mask[:, :length]],
                               ids["int8"]["sequence_output"][:, :length][mask[:, :length]],
                               atol=1e-5)
    np.testing.assert_allclose(text["int8"]["pooled_output"], ids["int8"]["pooled_output"],
                               atol=1e-5)


def test_int8_export_uses_the_int8_matmul_and_otherwise_core_and_text_ops(encoder_exports):
    _, paths = encoder_exports
    op_types = saved_model_op_types(paths["int8"])
    assert "_QuantizedMatMul" in op_types and "_QuantizedMatMul" not in saved_model_op_types(
        paths[None])
    text_ops = tensorflow_text_ops()
    assert [op for op in op_types if not (is_core_op(op) or op in text_ops)] == [
        "_QuantizedMatMul"]
    with pytest.raises(ValueError, match="_QuantizedMatMul"):
        check_ops(paths["int8"])  # only an int8 export may use it
    assert check_ops(paths["int8"], int8=True) == op_types


def test_tf_hub_call_of_an_int8_encoder(encoder_exports, graph_mode_runs):
    _, paths = encoder_exports
    packed, ids, _ = graph_mode_runs
    loaded = tf.saved_model.load(paths["int8"])
    outputs = loaded({k: tf.constant(v) for k, v in packed.items()})
    np.testing.assert_allclose(outputs["default"], ids["int8"]["pooled_output"], atol=1e-5)
    assert len(outputs["encoder_outputs"]) == 2


def test_without_the_int8_kernel_export_refuses_and_writes_nothing(preprocessor, tmp_path,
                                                                     monkeypatch, caplog):
    model = tiny_encoder(len(preprocessor.vocabulary))

    def no_kernel(*args):
        raise tf.errors.NotFoundError(None, None, "No registered '_QuantizedMatMul' OpKernel "
                                                  "for 'CPU' devices compatible with node")
    monkeypatch.setattr(int8_layers, "_int8_matmul_function", no_kernel)
    with pytest.raises(int8_layers.Int8KernelMissing, match="cannot run oneDNN's int8 matmul"):
        export_model(model, str(tmp_path), "encoder", preprocessor=preprocessor,
                     quantize="int8")
    assert not os.path.exists(tmp_path / "encoder")
    with caplog.at_level(logging.INFO, logger="keras_bert.export.saved_model"):
        path = export_model(model, str(tmp_path), "encoder", preprocessor=preprocessor)
    assert "_QuantizedMatMul" not in saved_model_op_types(path)  # float32 works as before
    with pytest.raises(ValueError, match="int8 and mixed_precision=.bf16. exclude each other"):
        export_model(model, str(tmp_path), "encoder", preprocessor=preprocessor,
                     quantize="int8", mixed_precision="bf16")
    with pytest.raises(ValueError, match='"int8" or None'):
        export_model(model, str(tmp_path), "encoder", preprocessor=preprocessor,
                     quantize="int4")


def task_encoder():
    keras.utils.set_random_seed(3)
    return BertEncoder(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)


QUANTIZED_TEXTS = ["She opened the door and left.", "He ate", "A much longer sentence about "
                   "nothing in particular, to pad the others in its batch."]


@pytest.fixture(scope="module")
def quantized_classifier(preprocessor, tmp_path_factory):
    """A classifier, its int8 export made from float32 (export_model(quantize="int8")), then
    the same classifier after quantize("int8") in place."""
    model = BertClassifier(task_encoder(), 3, preprocessor=preprocessor)
    texts = np.array(QUANTIZED_TEXTS, object)
    base = str(tmp_path_factory.mktemp("quantized"))
    float_probabilities = model.predict(texts, verbose=0)
    exported = export_model(model, base, "from-float", quantize="int8")
    model.quantize("int8")
    return model, float_probabilities, exported, base


def test_quantize_then_predict_gives_the_int8_exports_outputs(quantized_classifier):
    model, float_probabilities, exported, base = quantized_classifier
    texts = np.array(QUANTIZED_TEXTS, object)
    got = model.predict(texts, verbose=0)
    served = GraphModeModel(exported).run("serving_default", text=texts)["probabilities"]
    np.testing.assert_allclose(got, served, atol=1e-5)
    assert 0 < np.abs(got - float_probabilities).max() < 0.05  # int8, close to float32
    # The quantized model's own export is an int8 export, the same graph and numbers, with
    # Q, K and V side by side as in an export of a quantized copy: per block the fused kernel,
    # the attention output, intermediate and output; and the word embeddings. The model reads
    # its own Q, K and V weights again afterwards.
    path = export_model(model, base, "quantized")
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    assert sum(dtype == tf.int8 for dtype in reader.get_variable_to_dtype_map().values()) == 9
    assert all(block.attention.fused_qkv is None for block in model.encoder.transformer_layers)
    assert check_ops(path, int8=True) == saved_model_op_types(exported)
    with pytest.raises(ValueError, match="_QuantizedMatMul"):
        check_ops(path)
    own = GraphModeModel(path).run("serving_default", text=texts)["probabilities"]
    np.testing.assert_allclose(own, served, atol=1e-6)
    with pytest.raises(ValueError, match="int8 and mixed_precision=.bf16. exclude each other"):
        export_model(model, base, "bf16", mixed_precision="bf16")


LOAD_IN_A_FRESH_PROCESS = """
import sys
import keras
import numpy as np
import tensorflow as tf
import keras_bert  # noqa: F401  (registers the classes)

model = keras.saving.load_model(sys.argv[1])
texts = np.array(sys.argv[3:], object)
np.save(sys.argv[2], model.predict(texts, verbose=0))
packed = model.preprocessor(tf.constant(texts))
graph = tf.function(lambda x: model(x, training=False)).get_concrete_function(packed).graph
print("int8 matmuls:", sum(op.type == "_QuantizedMatMul" for op in graph.get_operations()))
from keras_bert.export import export_model, saved_model_op_types
path = export_model(model, sys.argv[1] + "-exports", "loaded")
print("int8 export:", "_QuantizedMatMul" in saved_model_op_types(path))
"""


@pytest.mark.slow
def test_a_saved_quantized_model_loads_in_a_fresh_process_on_the_int8_path(preprocessor,
                                                                           tmp_path):
    """In an interpreter where nothing of the saved model lives yet (a .keras file loaded in
    the process that saved it, its int8 matmuls counted: test_int8_calibrated.py's
    test_quantize_with_calibration_texts_predicts_as_the_calibrated_export_and_saves)."""
    model = BertClassifier(task_encoder(), 3, preprocessor=preprocessor)
    model.quantize("int8")
    model.save(tmp_path / "quantized.keras")
    result = subprocess.run(
        [sys.executable, "-c", LOAD_IN_A_FRESH_PROCESS, str(tmp_path / "quantized.keras"),
         str(tmp_path / "probabilities.npy"), *QUANTIZED_TEXTS],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr[-3000:]
    # Four per block (query, key and value as one, attention output, intermediate, output), two blocks.
    assert "int8 matmuls: 8" in result.stdout
    assert "int8 export: True" in result.stdout  # the loaded model still exports as int8
    np.testing.assert_allclose(np.load(tmp_path / "probabilities.npy"),
                               model.predict(np.array(QUANTIZED_TEXTS, object), verbose=0),
                               atol=1e-6)


CONTEXTS = ["She opened the door", "He ate"]
CHOICES = [["and left.", "then slept.", "with a key."], ["food", "a car", "nothing"]]
TASKS = {
    "classifier": (lambda p: BertClassifier(task_encoder(), 3, preprocessor=p),
                   {"text": CONTEXTS}, "probabilities"),
    "regressor": (lambda p: BertClassifier(task_encoder(), 1, preprocessor=p),
                  {"text": CONTEXTS}, "score"),
    "tagger": (lambda p: BertTokenClassifier(task_encoder(), ["O", "B-X", "I-X"], preprocessor=p),
               {"text": CONTEXTS}, "probabilities"),
    "squad": (lambda p: BertQuestionAnswerer(task_encoder(), preprocessor=p),
              {"text": ["Who opened the door?", "What did he eat?"], "text_pair": CONTEXTS},
              "start_logits"),
    "choice": (lambda p: BertMultipleChoice(task_encoder(), num_choices=3, preprocessor=p),
               {"text": CONTEXTS, "choices": CHOICES}, "probabilities"),
    "embedder": (lambda p: BertEmbedder(task_encoder(), preprocessor=p, pooling="mean",
                                        normalize=True, feature_layers=(-1,)),
                 {"text": CONTEXTS}, "embedding"),
}


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_task_model_exports_int8(task, preprocessor, tmp_path):
    build, inputs, output = TASKS[task]
    model = build(preprocessor)
    inputs = {k: np.array(v, object) for k, v in inputs.items()}
    served = {q: GraphModeModel(export_model(model, str(tmp_path), f"{task}-{q}", quantize=q))
              for q in (None, "int8")}
    outputs = {q: served[q].run("serving_default", **inputs)[output] for q in served}
    assert "_QuantizedMatMul" in saved_model_op_types(str(tmp_path / f"{task}-int8" / "1"))
    assert outputs["int8"].shape == outputs[None].shape
    difference = np.abs(outputs["int8"] - outputs[None]).max()
    assert 0 < difference < 0.05 * max(1.0, np.abs(outputs[None]).max()), difference


@pytest.mark.slow
def test_cli_exports_int8(minilm_dir, tmp_path, capsys):
    from keras_bert.cli import main
    from keras_bert.checkpoints.saving import save_checkpoint
    checkpoint = str(tmp_path / "hf")
    save_checkpoint(tiny_encoder(30522), checkpoint, "hf",
                    vocabulary=os.path.join(minilm_dir, "vocab.txt"))
    base = str(tmp_path / "models")
    assert main(["export", checkpoint, base, "--model_name", "bert", "--seq_length", "16",
                 "--quantize", "int8"]) == 0
    assert f"exported bert to {base}/bert/1" in capsys.readouterr().out
    path = os.path.join(base, "bert", "1")
    assert "_QuantizedMatMul" in saved_model_op_types(path)
    loader = GraphModeModel(path)
    assert loader.run("serving_default", text=np.array([b"a short text"], object))[
        "pooled_output"].shape == (1, 64)
    # saved_model_cli run (one process, both signatures) gives the graph-mode loader's outputs.
    packed = {k: v.numpy() for k, v in BertPreprocessor(
        os.path.join(minilm_dir, "vocab.txt"), seq_length=16)(tf.constant(TEXTS)).items()}
    ids = loader.run("serve_ids", **packed)
    text = loader.run("serving_default", text=np.array([t.encode() for t in TEXTS], object))
    np.savez(tmp_path / "ids.npz", **packed)
    saved_model_cli_runs([
        dict(path=path, signature="serve_ids", outdir=str(tmp_path / "ids"),
             inputs=";".join(f"{k}={tmp_path / 'ids.npz'}[{k}]" for k in packed)),
        dict(path=path, signature="serving_default", input_exprs="text=" + repr(TEXTS),
             outdir=str(tmp_path / "text"))])
    np.testing.assert_allclose(np.load(tmp_path / "ids" / "pooled_output.npy"),
                               ids["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "text" / "pooled_output.npy"),
                               text["pooled_output"], atol=1e-5)
