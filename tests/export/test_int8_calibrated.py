"""Calibrated int8 (export_model(quantize="int8", calibration_texts=...), keras-bert export
--calibration_file, and in place: quantize("int8", calibration_texts=...)): static per-channel
input ranges for the int8 matmuls of query-key-value, attention output and intermediate, their
bias and GELU fused into oneDNN's int8 matmul, Q/K/V's weights stored side by side in task
exports; run as TF Serving runs them (graph-mode loader + Session.run; saved_model_cli run on
the CLI's export, slow); a model calibrated in place predicts as the export, saves, loads on
the int8 path and exports; bad calibration input refused before anything is written or
changed. Real-weight accuracy: tests/tasks/test_int8_minilm.py."""

import os

import numpy as np
import pytest
import tensorflow as tf

import keras

from keras_bert import (BertClassifier, BertEncoder, BertPreprocessor, cli, save_checkpoint,
                        tf_internals)
from keras_bert.export import export_model, int8
from keras_bert.export.int8 import read_calibration_file
from keras_bert.layers.int8 import is_int8
from keras_bert.models.int8_calibration import calibrate, check_calibration_texts
from tests.serving.exports import TEXTS, tiny_encoder
from tests.serving.graph_mode import GraphModeModel, saved_model_cli_run
from tests.tasks.docstring_sentences import docstring_sentences
from tests.export.test_int8 import cosines, saved_bytes

SEQ_LENGTH = 24


@pytest.fixture(scope="module")
def preprocessor(minilm_dir):
    return BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), seq_length=SEQ_LENGTH)


@pytest.fixture(scope="module")
def calibration_texts():
    return docstring_sentences(200)[100:]


def quantized_matmuls(path):
    """The fused_ops of every _QuantizedMatMul node in the SavedModel's functions."""
    saved_model = tf_internals.parse_saved_model(path)
    return [tuple(f.decode() for f in node.attr["fused_ops"].list.s)
            for meta_graph in saved_model.meta_graphs
            for function in meta_graph.graph_def.library.function
            for node in function.node_def if node.op == "_QuantizedMatMul"]


def test_calibration_keeps_the_float_function_and_scales_every_block(preprocessor,
                                                                     calibration_texts):
    encoder = tiny_encoder(len(preprocessor.vocabulary))
    copy = type(encoder).from_config(encoder.get_config())
    copy.set_weights(encoder.get_weights())
    calibrate(copy, preprocessor, calibration_texts)
    assert not is_int8(copy) and copy.static_int8_ranges
    for block in copy.transformer_layers:
        for scale in (block.attention.qkv_input_scale, block.attention_output_input_scale,
                      block.intermediate_input_scale):
            scale = np.asarray(scale)
            assert scale.dtype == np.float32 and (scale > 0).all() and scale.shape == (64,)
    # Inputs times c, kernel rows divided by c: the same float32 function.
    packed = {k: v.numpy() for k, v in preprocessor(tf.constant(TEXTS)).items()}
    np.testing.assert_allclose(np.asarray(copy(packed)["sequence_output"]),
                               np.asarray(encoder(packed)["sequence_output"]), atol=2e-4)
    # The ranges are the inputs' largest magnitudes over the calibration texts: a query
    # input channel's scale is 127 over the largest |embedding LayerNorm output| there.
    ids = preprocessor(tf.constant(calibration_texts))
    embeddings = np.asarray(encoder.embeddings(ids["input_word_ids"], ids["input_type_ids"]))
    real = ids["input_mask"].numpy().astype(bool)
    np.testing.assert_allclose(np.asarray(copy.transformer_layers[0].attention.qkv_input_scale),
                               127 / np.abs(embeddings[real]).max(0), rtol=1e-4)


@pytest.fixture(scope="module")
def exports(preprocessor, calibration_texts, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("calibrated"))
    encoder = tiny_encoder(len(preprocessor.vocabulary))
    classifier = BertClassifier(tiny_encoder(len(preprocessor.vocabulary)), num_classes=3,
                                preprocessor=preprocessor)
    paths = {}
    for name, model in (("encoder", encoder), ("classifier", classifier)):
        paths[name, None] = export_model(model, base, f"{name}-dynamic", quantize="int8",
                                         preprocessor=preprocessor)
        paths[name, "calibrated"] = export_model(model, base, f"{name}-calibrated",
                                                 quantize="int8", preprocessor=preprocessor,
                                                 calibration_texts=calibration_texts)
    return encoder, classifier, paths


def row_ranges(path) -> int:
    """How many per-row input ranges (|x|, then its row's max) the SavedModel computes."""
    saved_model = tf_internals.parse_saved_model(path)
    return sum(node.op == "Abs" for meta_graph in saved_model.meta_graphs
               for function in meta_graph.graph_def.library.function
               for node in function.node_def)


def test_calibrated_export_fuses_bias_and_gelu_and_finds_fewer_row_ranges(exports):
    _, _, paths = exports
    for name in ("encoder", "classifier"):
        calibrated = quantized_matmuls(paths[name, "calibrated"])
        # Per block: query-key-value, attention output, intermediate, output (per traced
        # function); the intermediate with its bias and GELU (tanh form) in the matmul.
        assert set(calibrated) == {("BiasAdd", "Dequantize"),
                                   ("BiasAdd", "GeluApproximate", "Dequantize")}
        assert sum(f == ("BiasAdd", "GeluApproximate", "Dequantize") for f in calibrated) * 3 \
            == sum(f == ("BiasAdd", "Dequantize") for f in calibrated)
        assert ("BiasAdd", "GeluApproximate", "Dequantize") not in quantized_matmuls(
            paths[name, None])
    # Row ranges only for the output layers (without calibration also for query-key-value
    # and the attention output).
    assert 0 < 2 * row_ranges(paths["classifier", "calibrated"]) < row_ranges(
        paths["classifier", None])


@pytest.fixture(scope="module")
def served_classifier(exports):
    """The graph-mode loader's serving_default outputs of the calibrated classifier export on
    TEXTS."""
    _, _, paths = exports
    return GraphModeModel(paths["classifier", "calibrated"]).run(
        "serving_default", text=np.array([t.encode() for t in TEXTS], object))


def test_calibrated_export_runs_in_tf_servings_loader(exports, served_classifier, preprocessor):
    encoder, classifier, paths = exports
    served = GraphModeModel(paths["encoder", "calibrated"])
    packed = {k: v.numpy() for k, v in preprocessor(tf.constant(TEXTS)).items()}
    expected = encoder(packed)
    ids = served.run("serve_ids", **packed)
    mask = packed["input_mask"].astype(bool)
    assert cosines(ids["sequence_output"][mask],
                   np.asarray(expected["sequence_output"])[mask]).min() > 0.99
    assert 0 < np.abs(ids["pooled_output"] - expected["pooled_output"]).max() < 0.1
    # Static ranges: each text's outputs depend on that text alone, not on its batch.
    batch = served.run("serving_default", text=np.array([t.encode() for t in TEXTS], object))
    for row, text in enumerate(TEXTS):
        alone = served.run("serving_default", text=np.array([text.encode()], object))
        np.testing.assert_allclose(alone["pooled_output"][0], batch["pooled_output"][row],
                                   atol=1e-5)

    reference = classifier.predict(TEXTS, verbose=0)
    assert 0 < np.abs(served_classifier["probabilities"] - reference).max() < 0.05


def test_task_exports_store_query_key_and_value_side_by_side_once(exports):
    _, _, paths = exports
    for key in (("classifier", None), ("classifier", "calibrated")):
        reader = tf.train.load_checkpoint(os.path.join(paths[key], "variables", "variables"))
        int8_shapes = sorted(tuple(reader.get_variable_to_shape_map()[name])
                             for name, dtype in reader.get_variable_to_dtype_map().items()
                             if dtype == tf.int8)
        # Per block: [64, 192] (Q, K, V), attention output, intermediate, output; and the
        # word embeddings. No separate Q, K and V kernels beside the fused one.
        assert int8_shapes.count((64, 192)) == 2 and int8_shapes.count((64, 64)) == 2, int8_shapes
        assert len(int8_shapes) == 2 * 4 + 1
    sizes = {key: sum(saved_bytes(paths[key]).values()) for key in paths}
    assert sizes["classifier", "calibrated"] <= sizes["classifier", None] * 1.01
    assert sizes["encoder", "calibrated"] <= sizes["encoder", None] * 1.01


def test_bad_calibration_input_is_refused_before_anything_is_written(preprocessor, tmp_path,
                                                                     calibration_texts):
    encoder = tiny_encoder(len(preprocessor.vocabulary))
    cases = [
        (dict(calibration_texts=calibration_texts), ValueError, "quantize=\"int8\""),
        (dict(quantize="int8", calibration_texts="one string"), TypeError, "list of strings"),
        (dict(quantize="int8", calibration_texts=["fine", b"bytes"] * 8), TypeError,
         "calibration text 1 is a bytes"),
        (dict(quantize="int8", calibration_texts=["too", "few"]), ValueError,
         "at least 8 texts"),
    ]
    for options, error, message in cases:
        with pytest.raises(error, match=message):
            export_model(encoder, str(tmp_path), "encoder", preprocessor=preprocessor,
                         **options)
    quantized = int8.quantized_copy(encoder)
    with pytest.raises(ValueError, match="quantized already"):
        export_model(quantized, str(tmp_path), "encoder", preprocessor=preprocessor,
                     quantize="int8", calibration_texts=calibration_texts)
    with pytest.raises(ValueError, match="before quantize"):
        calibrate(quantized, preprocessor, calibration_texts)
    assert os.listdir(tmp_path) == []


def test_bad_calibration_in_place_is_refused_and_changes_nothing(preprocessor,
                                                                 calibration_texts):
    classifier = BertClassifier(tiny_encoder(len(preprocessor.vocabulary)), num_classes=2,
                                preprocessor=preprocessor)
    before = [np.array(w) for w in classifier.get_weights()]
    cases = [
        (dict(mode="int4"), ValueError, "are for quantize"),
        (dict(mode="int8", filters=lambda layer: True), ValueError, "no filters"),
        (dict(mode="int8", calibration_texts="one string"), TypeError, "list of strings"),
        (dict(mode="int8", calibration_texts=["too", "few"]), ValueError, "at least 8"),
        # Keras checks its keywords only after calibration would have rescaled the kernels.
        (dict(mode="int8", preprocessor=preprocessor), TypeError,
         r"unexpected keyword arguments \['preprocessor'\]; nothing was calibrated"),
    ]
    for options, error, message in cases:
        options = {"calibration_texts": calibration_texts, **options}
        with pytest.raises(error, match=message):
            classifier.quantize(**options)
    with pytest.raises(ValueError, match="preprocessor"):
        classifier.encoder.quantize("int8", calibration_texts=calibration_texts)
    bare = BertClassifier(tiny_encoder(len(preprocessor.vocabulary)), num_classes=2)
    with pytest.raises(ValueError, match="has none"):
        bare.quantize("int8", calibration_texts=calibration_texts)
    assert not is_int8(classifier) and not classifier.encoder.static_int8_ranges
    for old, new in zip(before, classifier.get_weights()):
        np.testing.assert_array_equal(old, new)
    classifier.quantize("int8")
    with pytest.raises(ValueError, match="quantized already"):
        classifier.quantize("int8", calibration_texts=calibration_texts)
    # A float model calibrated once (kernels W / c) is refused a second calibration and the
    # float32 formats, whose weights would be W / c.
    float_copy = BertClassifier(tiny_encoder(len(preprocessor.vocabulary)), num_classes=2,
                                preprocessor=preprocessor)
    calibrate(float_copy, preprocessor, calibration_texts)
    with pytest.raises(ValueError, match="calibrated already"):
        calibrate(float_copy, preprocessor, calibration_texts)
    # Another quantization mode, and a float32 task model on a bfloat16 encoder.
    int4 = BertClassifier(tiny_encoder(len(preprocessor.vocabulary)), num_classes=2,
                          preprocessor=preprocessor)
    int4.quantize("int4")
    with pytest.raises(ValueError, match=r"quantized already \(int4\)"):
        calibrate(int4, preprocessor, calibration_texts)
    half = BertClassifier(BertEncoder(**tiny_encoder(len(preprocessor.vocabulary)).get_config()
                                      | {"dtype": "bfloat16"}),
                          num_classes=2, preprocessor=preprocessor)
    assert half.dtype_policy.name == "float32"
    with pytest.raises(ValueError, match="this BertClassifier computes in bfloat16"):
        calibrate(half, preprocessor, calibration_texts)
    with pytest.raises(ValueError, match="int8 exports start from a float32 model"):
        int8.quantized_copy(half)


def saved_classifier(preprocessor, calibration_texts, tmp_path):
    """A tiny classifier saved to tmp_path/classifier.keras, and calibration_texts written to
    tmp_path/calibration.txt one a line (blank lines at the end, which are skipped): (the
    classifier, the .keras path, the calibration file, where exports go)."""
    classifier = BertClassifier(tiny_encoder(len(preprocessor.vocabulary)), num_classes=2,
                                preprocessor=preprocessor)
    checkpoint = str(tmp_path / "classifier.keras")
    classifier.save(checkpoint)
    texts = tmp_path / "calibration.txt"
    texts.write_text("\n".join(calibration_texts) + "\n\n", encoding="utf-8")
    return classifier, checkpoint, texts, str(tmp_path / "models")


def test_cli_export_refuses_a_bad_calibration_file_and_reads_a_good_one(
        preprocessor, calibration_texts, tmp_path, capsys):
    """keras-bert export's refusals, before anything is written, and the texts it reads from a
    calibration file (its export on them, end to end:
    test_cli_export_with_a_calibration_file_runs_in_saved_model_cli, slow)."""
    _, checkpoint, texts, base = saved_classifier(preprocessor, calibration_texts, tmp_path)
    export = ["export", checkpoint, base, "--model_name", "topics"]

    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1") * 10)
    for flags, message in (
            (["--calibration_file", str(texts)], "add --quantize int8"),
            (["--quantize", "int8", "--calibration_file", str(tmp_path / "none.txt")],
             "does not exist"),
            (["--quantize", "int8", "--calibration_file", str(tmp_path / "latin1.txt")],
             "latin1.txt:1: invalid UTF-8"),
    ):
        assert cli.main(export + flags) == 2
        assert message in capsys.readouterr().err
    assert cli.main(["export", checkpoint, base, "--tf_hub", "--quantize", "int8",
                     "--calibration_file", str(texts)]) == 2
    assert "--calibration_file does not apply to --tf_hub" in capsys.readouterr().err
    assert not os.path.exists(base)
    # What the CLI calibrates on: the file's texts, as export_model is given them above.
    assert check_calibration_texts(read_calibration_file(texts), str(texts)) == calibration_texts


@pytest.mark.slow
def test_cli_export_with_a_calibration_file_runs_in_saved_model_cli(
        preprocessor, calibration_texts, tmp_path, capsys):
    """keras-bert export --quantize int8 --calibration_file end to end, and saved_model_cli run
    on its export gives the graph-mode loader's outputs."""
    classifier, checkpoint, texts, base = saved_classifier(preprocessor, calibration_texts,
                                                           tmp_path)
    assert cli.main(["export", checkpoint, base, "--model_name", "topics", "--quantize", "int8",
                     "--calibration_file", str(texts)]) == 0
    assert f"calibrated on {len(calibration_texts)} texts" in capsys.readouterr().out
    path = os.path.join(base, "topics", "1")
    assert ("BiasAdd", "GeluApproximate", "Dequantize") in quantized_matmuls(path)
    probabilities = GraphModeModel(path).run(
        "serving_default", text=np.array([t.encode() for t in TEXTS], object))["probabilities"]
    assert np.abs(probabilities - classifier.predict(TEXTS, verbose=0)).max() < 0.05
    saved_model_cli_run(path, "serving_default", input_exprs="text=" + repr(TEXTS),
                        outdir=str(tmp_path / "text"))
    np.testing.assert_allclose(np.load(tmp_path / "text" / "probabilities.npy"), probabilities,
                               atol=1e-5)


def test_quantize_with_calibration_texts_predicts_as_the_calibrated_export_and_saves(
        exports, served_classifier, calibration_texts, tmp_path):
    _, classifier, _ = exports
    served = served_classifier
    model = BertClassifier.from_config(classifier.get_config())
    model.set_weights(classifier.get_weights())
    model.quantize("int8", calibration_texts=calibration_texts)
    assert is_int8(model) and model.encoder.static_int8_ranges
    probabilities = model.predict(TEXTS, verbose=0)
    np.testing.assert_allclose(probabilities, served["probabilities"], atol=1e-5)
    # The static ranges are weights: a .keras file and a keras-bert checkpoint keep them, and
    # the loaded model runs on the int8 path (in a fresh process: test_int8.py's
    # test_a_saved_quantized_model_loads_in_a_fresh_process_on_the_int8_path, slow).
    model.save(str(tmp_path / "calibrated.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "calibrated.keras"))
    assert loaded.encoder.static_int8_ranges
    np.testing.assert_array_equal(loaded.predict(TEXTS, verbose=0), probabilities)
    packed = loaded.preprocessor(tf.constant(TEXTS))
    graph = tf.function(lambda x: loaded(x, training=False)).get_concrete_function(packed).graph
    # Four per block (query, key and value as one, attention output, intermediate, output).
    assert sum(op.type == "_QuantizedMatMul" for op in graph.get_operations()) == 2 * 4
    save_checkpoint(model, str(tmp_path / "checkpoint"))
    again = BertClassifier.from_pretrained(str(tmp_path / "checkpoint"))
    np.testing.assert_array_equal(again.predict(TEXTS, verbose=0), probabilities)
    for format in ("hf", "google"):
        with pytest.raises(ValueError, match="quantized to int8"):
            save_checkpoint(model, str(tmp_path / format), format=format)
        assert not (tmp_path / format).exists()
    # Its export is the calibrated export: Q, K and V side by side, the same probabilities;
    # the model itself reads its own Q, K and V weights again afterwards.
    path = export_model(model, str(tmp_path / "models"), "calibrated")
    np.testing.assert_allclose(GraphModeModel(path).run(
        "serving_default", text=np.array([t.encode() for t in TEXTS], object))["probabilities"],
        probabilities, atol=1e-6)
    assert ("BiasAdd", "GeluApproximate", "Dequantize") in quantized_matmuls(path)
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    assert sorted(tuple(shape) for name, shape in reader.get_variable_to_shape_map().items()
                  if reader.get_variable_to_dtype_map()[name] == tf.int8).count((64, 192)) == 2
    assert all(block.attention.fused_qkv is None for block in model.encoder.transformer_layers)


def test_a_float_model_calibrated_without_quantizing_predicts_the_same_and_refuses_float_formats(
        preprocessor, calibration_texts, tmp_path):
    model = BertClassifier(tiny_encoder(len(preprocessor.vocabulary)), num_classes=2,
                           preprocessor=preprocessor)
    before = model.predict(TEXTS, verbose=0)  # traced on the kernels before calibration
    calibrate(model, preprocessor, calibration_texts)
    # The same float32 function, computed by a function traced again (scales and W / c).
    np.testing.assert_allclose(model.predict(TEXTS, verbose=0), before, atol=1e-5)
    with pytest.raises(ValueError, match="calibrated for int8"):
        save_checkpoint(model, str(tmp_path / "hf"), format="hf")
    assert not (tmp_path / "hf").exists()