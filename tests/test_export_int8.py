"""int8 exports (export/int8.py): the quantization numbers, the int8 layers against integer
arithmetic and float32, the export as TF Serving loads it (graph-mode loader + Session.run,
saved_model_cli run) for the encoder and every task model, its size and ops, and the refusal
on a TensorFlow without the int8 kernel. Real-weight accuracy: tests/tasks/test_int8_minilm.py."""

import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import (BertClassifier, BertEmbedder, BertEncoder, BertMultipleChoice,
                        BertPreprocessor, BertQuestionAnswerer, BertTokenClassifier)
from keras_bert.export import check_ops, export_model, int8, saved_model_op_types
from keras_bert.export.ops import is_core_op, tensorflow_text_ops
from tests.serving.exports import TEXTS, tiny_encoder
from tests.serving.graph_mode import GraphModeModel, saved_model_cli_run

SEQ_LENGTH = 24
DENSE_PER_BLOCK = ("query", "key", "value", "attention_output", "intermediate", "output")


def cosines(a, b):
    a, b = np.reshape(a, (len(a), -1)), np.reshape(b, (len(b), -1))
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_quantize_columns_rounds_to_the_nearest_step_of_each_column():
    matrix = np.random.default_rng(0).standard_normal((50, 6)).astype(np.float32)
    matrix[:, 2] *= 100.0  # columns keep their own scale
    matrix[:, 4] = 0.0
    quantized, scales = int8.quantize_columns(matrix)
    assert quantized.dtype == np.int8 and scales.shape == (6,)
    np.testing.assert_allclose(scales[[0, 2]], np.abs(matrix[:, [0, 2]]).max(0) / 127)
    assert np.abs(quantized).max() == 127 and scales[4] == 1.0 and not quantized[:, 4].any()
    assert (np.abs(quantized * scales - matrix) <= scales / 2 + 1e-7).all()


def test_quantize_rows_gives_each_row_its_own_scale():
    x = np.random.default_rng(1).standard_normal((5, 40)).astype(np.float32)
    x[1] *= 1000.0
    x[3] = 0.0
    quantized, scales = int8.quantize_rows(tf.constant(x))
    values = tf.bitcast(quantized, tf.int8).numpy()
    np.testing.assert_allclose(scales.numpy()[:, 0][[0, 1]], np.abs(x[[0, 1]]).max(1) / 127)
    assert np.abs(values).max(1).tolist() == [127, 127, 127, 0, 127]
    assert (np.abs(values * scales.numpy() - x) <= scales.numpy() / 2 * 1.0001).all()


def float_dense(units, inputs, seed):
    rng = np.random.default_rng(seed)
    dense = keras.layers.Dense(units)
    dense.build((None, inputs))
    dense.kernel.assign(rng.standard_normal((inputs, units)).astype(np.float32) * 0.05)
    dense.bias.assign(rng.standard_normal(units).astype(np.float32))
    return dense


def test_int8_dense_is_integer_arithmetic_close_to_float():
    dense = float_dense(48, 64, seed=2)
    layer = int8.Int8Dense.from_dense(dense)
    assert layer.kernel.dtype == "int8" and layer.name == dense.name
    x = np.random.default_rng(3).standard_normal((2, 7, 64)).astype(np.float32)
    got = np.asarray(layer(x))  # eagerly: [2, 7, 64] -> [2, 7, 48]
    np.testing.assert_allclose(np.asarray(tf.function(layer)(x)), got, rtol=0, atol=1e-6)
    # What the layer means: integer products of the rounded values, then the two scales.
    rows = x.reshape(-1, 64)
    row_scales = np.abs(rows).max(1, keepdims=True) / 127
    column_scales = layer.kernel_range.numpy() / 127
    exact = (np.rint(rows / row_scales) @ layer.kernel.numpy().astype(np.float64)
             * row_scales * column_scales + dense.bias.numpy())
    np.testing.assert_allclose(got.reshape(-1, 48), exact, rtol=1e-5, atol=1e-5)
    reference = np.asarray(dense(x))
    assert np.abs(got - reference).max() < 0.02 * np.abs(reference).max()
    with pytest.raises(ValueError, match="activation"):
        int8.Int8Dense.from_dense(keras.layers.Dense(3, activation="relu"))


def test_eager_calls_keep_each_layers_own_kernel():
    """Eager calls share one graph node; it must not reuse the first kernel it reordered."""
    first, second = (int8.Int8Dense.from_dense(float_dense(16, 32, seed)) for seed in (4, 5))
    x = np.random.default_rng(6).standard_normal((3, 32)).astype(np.float32)
    eager = [np.asarray(first(x)), np.asarray(second(x))]
    graph = [np.asarray(tf.function(layer)(x)) for layer in (first, second)]
    np.testing.assert_allclose(eager, graph, atol=1e-6)
    assert np.abs(eager[0] - eager[1]).max() > 0.1


def test_int8_embedding_dequantizes_each_row_with_its_scale():
    embedding = keras.layers.Embedding(10, 8)
    embedding.build()
    table = np.random.default_rng(7).standard_normal((10, 8)).astype(np.float32)
    table[3] *= 50.0
    embedding.embeddings.assign(table)
    layer = int8.Int8Embedding.from_embedding(embedding)
    assert layer.embeddings.dtype == "int8" and layer.embeddings_scale.shape == (10,)
    ids = np.array([[3, 0, 9], [1, 3, 3]])
    got = np.asarray(layer(ids))
    scales = np.abs(table).max(1) / 127
    assert got.shape == (2, 3, 8)
    assert (np.abs(got - table[ids]) <= scales[ids][..., None] / 2 + 1e-6).all()


def test_int8_copy_replaces_the_dense_layers_of_every_block_and_leaves_the_model():
    encoder = BertEncoder(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=32)
    copy = int8.int8_copy(encoder)
    for block in copy.transformer_layers:
        layers = [block.attention.query, block.attention.key, block.attention.value,
                  block.attention_output, block.intermediate, block.output_dense]
        assert [type(layer) for layer in layers] == [int8.Int8Dense] * 6
        assert [layer.name for layer in layers] == list(DENSE_PER_BLOCK)
    assert isinstance(copy.embeddings.word_embeddings, int8.Int8Embedding)
    assert isinstance(copy.pooler, keras.layers.Dense)  # [batch, hidden]: does not pay
    block = encoder.transformer_layers[0]  # the original is untouched
    assert type(block.intermediate) is keras.layers.Dense
    bf16 = BertEncoder(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=32, dtype="mixed_bfloat16")
    with pytest.raises(ValueError, match="float32 model"):
        int8.int8_copy(bf16)


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


def test_int8_export_runs_in_tf_servings_loader_and_saved_model_cli(encoder_exports,
                                                                     preprocessor, tmp_path):
    model, paths = encoder_exports
    packed = {k: v.numpy() for k, v in preprocessor(tf.constant(TEXTS)).items()}
    expected = model(packed)
    served = {q: GraphModeModel(paths[q]) for q in paths}
    ids = {q: served[q].run("serve_ids", **packed) for q in paths}
    text = {q: served[q].run("serving_default", text=np.array([t.encode() for t in TEXTS], object))
            for q in paths}
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

    np.savez(tmp_path / "ids.npz", **packed)
    saved_model_cli_run(paths["int8"], "serve_ids", inputs=";".join(
        f"{k}={tmp_path / 'ids.npz'}[{k}]" for k in packed), outdir=str(tmp_path / "ids"))
    np.testing.assert_allclose(np.load(tmp_path / "ids" / "pooled_output.npy"),
                               ids["int8"]["pooled_output"], atol=1e-5)
    saved_model_cli_run(paths["int8"], "serving_default", input_exprs="text=" + repr(TEXTS),
                        outdir=str(tmp_path / "text"))
    np.testing.assert_allclose(np.load(tmp_path / "text" / "pooled_output.npy"),
                               text["int8"]["pooled_output"], atol=1e-5)


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


def test_tf_hub_call_of_an_int8_encoder(encoder_exports, preprocessor):
    _, paths = encoder_exports
    packed = preprocessor(tf.constant(TEXTS))
    loaded = tf.saved_model.load(paths["int8"])
    outputs = loaded(packed)
    served = GraphModeModel(paths["int8"]).run("serve_ids", **{k: v.numpy()
                                                               for k, v in packed.items()})
    np.testing.assert_allclose(outputs["default"], served["pooled_output"], atol=1e-5)
    assert len(outputs["encoder_outputs"]) == 2


def test_without_the_int8_kernel_export_refuses_and_writes_nothing(preprocessor, tmp_path,
                                                                     monkeypatch, caplog):
    model = tiny_encoder(len(preprocessor.vocabulary))

    def no_kernel(*args):
        raise tf.errors.NotFoundError(None, None, "No registered '_QuantizedMatMul' OpKernel "
                                                  "for 'CPU' devices compatible with node")
    monkeypatch.setattr(int8, "_int8_matmul_function", no_kernel)
    with pytest.raises(int8.Int8KernelMissing, match="cannot run oneDNN's int8 matmul"):
        export_model(model, str(tmp_path), "encoder", preprocessor=preprocessor,
                     quantize="int8")
    assert not os.path.exists(tmp_path / "encoder")
    with caplog.at_level(logging.INFO, logger="keras_bert.export.saved_model"):
        path = export_model(model, str(tmp_path), "encoder", preprocessor=preprocessor)
    assert "_QuantizedMatMul" not in saved_model_op_types(path)  # float32 works as before
    with pytest.raises(ValueError, match="exclude each other"):
        export_model(model, str(tmp_path), "encoder", preprocessor=preprocessor,
                     quantize="int8", mixed_precision="bf16")
    with pytest.raises(ValueError, match='"int8" or None'):
        export_model(model, str(tmp_path), "encoder", preprocessor=preprocessor,
                     quantize="int4")


def task_encoder():
    keras.utils.set_random_seed(3)
    return BertEncoder(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)


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
    from keras_bert.models.checkpoint_io import save_checkpoint
    checkpoint = str(tmp_path / "hf")
    save_checkpoint(tiny_encoder(30522), checkpoint, "hf",
                    vocab_file=os.path.join(minilm_dir, "vocab.txt"))
    base = str(tmp_path / "models")
    assert main(["export", checkpoint, base, "--model_name", "bert", "--seq_length", "16",
                 "--quantize", "int8"]) == 0
    assert f"exported bert to {base}/bert/1" in capsys.readouterr().out
    path = os.path.join(base, "bert", "1")
    assert "_QuantizedMatMul" in saved_model_op_types(path)
    served = GraphModeModel(path).run("serving_default", text=np.array([b"a short text"], object))
    assert served["pooled_output"].shape == (1, 64)
