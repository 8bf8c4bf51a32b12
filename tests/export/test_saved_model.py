"""SavedModel export: the version layout, the signatures and TF Hub attributes, the op allowlist,
atomic writes, `keras-bert export`, and outputs equal to Keras's in a fresh process."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import tf_internals
from keras_bert.export import check_ops, export_model, next_version, saved_model_op_types
from keras_bert.export.ops import PYTHON_CALLBACK_OPS, is_core_op, tensorflow_text_ops
from tests.serving.exports import SEQ_LENGTH, TEXTS, encoder_export, keras_encoder_outputs
from tests.serving.graph_mode import GraphModeModel, saved_model_cli_runs


@pytest.fixture(scope="module")
def exported(minilm_dir):
    return encoder_export(os.path.join(minilm_dir, "vocab.txt"))


def signature_defs(path):
    meta_graph = tf_internals.parse_saved_model(path).meta_graphs[0]
    return meta_graph.signature_def


def test_layout_versions_and_assets(exported, minilm_dir):
    assert exported.version_dir == os.path.join(exported.export_base, "encoder", "1")
    assert sorted(os.listdir(exported.version_dir)) == [
        "assets", "assets.extra", "fingerprint.pb", "saved_model.pb", "variables"]
    assert next_version(os.path.join(exported.export_base, "encoder")) == 2
    with open(os.path.join(exported.version_dir, "assets", "vocab.txt")) as f, \
            open(os.path.join(minilm_dir, "vocab.txt")) as g:
        assert f.read().split("\n") == g.read().split("\n")
    with pytest.raises(FileExistsError, match="immutable"):
        export_model(exported.model, exported.export_base, "encoder", version=1,
                     preprocessor=exported.preprocessor)
    with pytest.raises(ValueError, match="vocab_file"):
        export_model(exported.model, exported.export_base, "other")


def test_next_version_ignores_other_entries(tmp_path):
    assert next_version(str(tmp_path / "missing")) == 1
    for name in ("3", "12", ".12.tmp-x", "notes", "7a"):
        (tmp_path / name).mkdir()
    assert next_version(str(tmp_path)) == 13


def test_signatures_use_tf_hub_names(exported):
    signatures = signature_defs(exported.version_dir)
    assert set(signatures) == {"serving_default", "serve_ids", "__saved_model_init_op"}
    ids = signatures["serve_ids"]
    assert set(ids.inputs) == {"input_word_ids", "input_mask", "input_type_ids"}
    assert all(info.dtype == tf.int32.as_datatype_enum for info in ids.inputs.values())
    assert set(ids.outputs) == {"sequence_output", "pooled_output", "encoder_outputs"}
    assert [d.size for d in ids.outputs["encoder_outputs"].tensor_shape.dim] == [-1, 2, -1, 64]
    text = signatures["serving_default"]
    assert set(text.inputs) == {"text"} and text.inputs["text"].dtype == tf.string.as_datatype_enum
    assert set(text.outputs) == {"sequence_output", "pooled_output", "input_mask"}
    # Raw text is padded to each batch's longest row, so the sequence axis is dynamic.
    assert [d.size for d in text.outputs["sequence_output"].tensor_shape.dim] == [-1, -1, 64]


def test_every_op_is_core_tensorflow_or_tensorflow_text(exported):
    op_types = saved_model_op_types(exported.version_dir)
    text_ops = tensorflow_text_ops()
    assert "FastWordpieceTokenizeWithOffsets" in op_types  # the preprocessor is in the graph
    assert {"BatchMatMulV2", "Softmax", "Tanh"} <= op_types  # and so is the encoder
    for op in sorted(op_types):
        assert op not in PYTHON_CALLBACK_OPS, op
        assert is_core_op(op) or op in text_ops, f"{op} is neither core TF nor tensorflow-text"
    assert check_ops(exported.version_dir) == op_types


def test_check_ops_refuses_python_callbacks(tmp_path):
    module = tf.Module()
    module.f = tf.function(lambda x: tf.py_function(lambda v: v * 2, [x], tf.float32),
                           input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(module, str(tmp_path / "m"))
    with pytest.raises(ValueError, match="EagerPyFunc"):
        check_ops(str(tmp_path / "m"))


def test_a_failed_export_leaves_nothing(exported, tmp_path, monkeypatch):
    from keras_bert.export import saved_model

    def half_write(module, functions, path, **options):
        with open(os.path.join(path, "saved_model.pb"), "wb") as f:
            f.write(b"partial")
        raise ValueError("disk full")
    monkeypatch.setattr(saved_model, "_save", half_write)
    with pytest.raises(ValueError, match="disk full"):
        export_model(exported.model, str(tmp_path), "encoder", preprocessor=exported.preprocessor)
    assert os.listdir(tmp_path / "encoder") == []  # no version, no scratch directory


FRESH_PROCESS = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow_text  # noqa: F401  (the preprocessor's ops)
    import tensorflow as tf
    path, texts, out = sys.argv[1], sys.argv[2].split("|"), sys.argv[3]
    model = tf.saved_model.load(path)
    text = model.signatures["serving_default"](text=tf.constant(texts))
    ids = {k: tf.constant(np.load(out + ".in.npz")[k])
           for k in ("input_word_ids", "input_mask", "input_type_ids")}
    packed = model.signatures["serve_ids"](**ids)
    hub = model(ids)  # TF Hub's interface: a dict with the per-layer list
    assert np.array_equal(hub["default"], hub["pooled_output"])
    vocab = open(model.vocab_file.asset_path.numpy().decode()).read().split()
    np.savez(out, text_sequence=text["sequence_output"], text_pooled=text["pooled_output"],
             text_mask=text["input_mask"], ids_encoder=packed["encoder_outputs"],
             ids_pooled=packed["pooled_output"], hub_layers=np.stack(hub["encoder_outputs"], 1),
             vocab_size=len(vocab), lower_case=model.do_lower_case.numpy())
""")


@pytest.mark.slow
def test_fresh_process_gives_the_keras_outputs(exported, tmp_path):
    expected = keras_encoder_outputs(exported)
    out = str(tmp_path / "outputs")
    np.savez(out + ".in.npz", **{k: expected[k] for k in (
        "input_word_ids", "input_mask", "input_type_ids")})
    subprocess.run([sys.executable, "-c", FRESH_PROCESS, exported.version_dir, "|".join(TEXTS),
                    out], check=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    got = np.load(out + ".npz")
    assert int(got["vocab_size"]) == 30522 and bool(got["lower_case"])
    length = got["text_mask"].shape[1]  # the longest text's, rounded up to a multiple of 8
    longest = int(expected["input_mask"].sum(1).max())
    assert length == min(-(-longest // 8) * 8, SEQ_LENGTH) and length < SEQ_LENGTH
    np.testing.assert_array_equal(got["text_mask"], expected["input_mask"][:, :length])
    assert not expected["input_mask"][:, length:].any()
    assert expected["input_mask"].sum(axis=1).tolist()[2] == 3  # [CLS] short [SEP]
    for name, key in (("text_sequence", "text_sequence_output"), ("text_pooled", "pooled_output"),
                      ("ids_encoder", "encoder_outputs"), ("ids_pooled", "pooled_output"),
                      ("hub_layers", "encoder_outputs")):
        np.testing.assert_allclose(got[name], expected[key], atol=2e-5, rtol=1e-5, err_msg=name)


@pytest.mark.slow
def test_cli_exports_a_hugging_face_checkpoint(minilm_dir, tmp_path, capsys):
    from keras_bert.checkpoints.saving import save_checkpoint
    from keras_bert.cli import main
    from tests.serving.exports import tiny_encoder
    checkpoint = str(tmp_path / "hf")
    save_checkpoint(tiny_encoder(30522), checkpoint, "hf",
                    vocabulary=os.path.join(minilm_dir, "vocab.txt"))
    base = str(tmp_path / "models")
    assert main(["export", checkpoint, base, "--model_name", "bert", "--seq_length", "16"]) == 0
    assert f"exported bert to {base}/bert/1" in capsys.readouterr().out
    long_text = np.array([" ".join(["word"] * 40).encode()], object)
    served = GraphModeModel(os.path.join(base, "bert", "1")).run("serving_default",
                                                                 text=long_text)
    assert served["sequence_output"].shape == (1, 16, 64)  # padded to at most --seq_length
    assert main(["export", checkpoint, base, "--model_name", "static", "--seq_length", "16",
                 "--no_dynamic_padding"]) == 0
    text = signature_defs(os.path.join(base, "static", "1"))["serving_default"]
    assert [d.size for d in text.outputs["sequence_output"].tensor_shape.dim] == [-1, 16, 64]
    assert main(["export", checkpoint, base, "--model_name", "bert", "--version", "1"]) == 2


@pytest.mark.slow
def test_every_signature_runs_in_tf_servings_graph_mode_loader(exported, tmp_path):
    """tf.compat.v1 loader + Session.run (TF Serving's LoadSavedModel path) and saved_model_cli
    run give the Keras outputs."""
    expected = keras_encoder_outputs(exported)
    ids = {k: expected[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    loaded = GraphModeModel(exported.version_dir)
    text = loaded.run("serving_default", text=np.array([t.encode() for t in TEXTS], object))
    packed = loaded.run("serve_ids", **ids)
    length = text["sequence_output"].shape[1]
    np.testing.assert_array_equal(text["input_mask"], expected["input_mask"][:, :length])
    for got, key in ((text["pooled_output"], "pooled_output"),
                     (packed["pooled_output"], "pooled_output"),
                     (packed["encoder_outputs"], "encoder_outputs")):
        np.testing.assert_allclose(got, expected[key], atol=2e-5, rtol=1e-5, err_msg=key)

    np.savez(tmp_path / "ids.npz", **ids)
    saved_model_cli_runs([
        dict(path=exported.version_dir, signature="serve_ids", outdir=str(tmp_path / "ids"),
             inputs=";".join(f"{k}={tmp_path / 'ids.npz'}[{k}]" for k in ids)),
        dict(path=exported.version_dir, signature="serving_default",
             input_exprs="text=" + repr(TEXTS), outdir=str(tmp_path / "text"))])
    np.testing.assert_allclose(np.load(tmp_path / "ids" / "pooled_output.npy"),
                               expected["pooled_output"], atol=2e-5, rtol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "text" / "pooled_output.npy"),
                               expected["pooled_output"], atol=2e-5, rtol=1e-5)


@pytest.mark.slow
def test_export_holds_only_what_the_signatures_read(minilm_dir, tmp_path, caplog):
    """A trained classifier's export: its weights and nothing else (no optimizer slots), with
    ordinary file permissions, and the size in the log."""
    import logging

    from keras_bert import BertClassifier, BertPreprocessor
    from tests.serving.exports import tiny_encoder
    preprocessor = BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), seq_length=16)
    model = BertClassifier(tiny_encoder(30522), 2, preprocessor=preprocessor)
    model.compile(learning_rate=1e-4)
    model.fit(["good film", "bad film"], [1, 0], batch_size=2, epochs=1, verbose=0)
    assert model.optimizer.variables  # Adam slots exist, twice the weights
    with caplog.at_level(logging.INFO, logger="keras_bert.export.saved_model"):
        path = export_model(model, str(tmp_path), "sentiment")
    saved = dict(tf.train.list_variables(os.path.join(path, "variables", "variables")))
    saved_values = [name for name in saved if name.endswith("/.ATTRIBUTES/VARIABLE_VALUE")]
    weight_count = sum(int(np.prod(w.shape)) for w in model.weights)
    saved_count = sum(int(np.prod(saved[name])) for name in saved_values)
    assert weight_count <= saved_count <= weight_count + 16  # + do_lower_case and seed state
    assert not [name for name in saved if "optimizer" in name.lower()]
    megabytes = weight_count * 4 / 1e6
    assert f"{megabytes:.1f} MB of weights" in caplog.text
    umask = os.umask(0)
    os.umask(umask)
    for root, dirs, files in os.walk(path):
        assert os.stat(root).st_mode & 0o777 == 0o777 & ~umask, root
        for name in files:
            assert os.stat(os.path.join(root, name)).st_mode & 0o777 == 0o666 & ~umask, name


@pytest.mark.slow
def test_bf16_export_stays_close_to_float32(minilm_dir, tmp_path):
    """--mixed_precision bf16: float32 weights and outputs, bfloat16 compute; on MiniLM's real
    weights the pooled output moves by less than 0.05 and the embedding direction barely."""
    from keras_bert import BertEncoder
    encoder = BertEncoder.from_pretrained(minilm_dir)
    preprocessor = encoder_export(os.path.join(minilm_dir, "vocab.txt")).preprocessor
    path = export_model(encoder, str(tmp_path), "minilm", preprocessor=preprocessor,
                        mixed_precision="bf16")
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    dtypes = {dtype for name, dtype in reader.get_variable_to_dtype_map().items()
              if name.endswith("VARIABLE_VALUE") and dtype.is_floating}
    assert dtypes == {tf.float32}  # the weights stay float32
    served = GraphModeModel(path).run("serving_default",
                                      text=np.array([t.encode() for t in TEXTS], object))
    assert served["pooled_output"].dtype == np.float32
    expected = np.asarray(encoder(preprocessor(tf.constant(TEXTS)))["pooled_output"])
    difference = np.abs(served["pooled_output"] - expected).max()
    assert 0 < difference < 0.05  # bfloat16 really computes, and stays close
    cosine = (served["pooled_output"] * expected).sum(1) / (
        np.linalg.norm(served["pooled_output"], axis=1) * np.linalg.norm(expected, axis=1))
    assert cosine.min() > 0.999
    with pytest.raises(ValueError, match="mixed_precision"):
        export_model(encoder, str(tmp_path), "minilm", preprocessor=preprocessor,
                     mixed_precision="fp8")
