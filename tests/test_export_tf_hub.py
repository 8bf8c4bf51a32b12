"""TF Hub's split export: hub.load(preprocess) + hub.load(encoder), in processes that cannot
import keras_bert, give the Keras model's outputs; the encoder runs without tensorflow-text."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.export import export_tf_hub
from tests.serving.exports import SEQ_LENGTH, TEXTS, encoder_export, keras_encoder_outputs
from tests.serving.graph_mode import GraphModeModel

# keras_bert may not be imported; the hub consumer has only TensorFlow (+ tensorflow-text for
# the preprocessing model), as a user of Google's published pairs has.
CONSUMER = textwrap.dedent("""
    import sys
    sys.modules["keras_bert"] = None
    if sys.argv[3] == "no-text":
        sys.modules["tensorflow_text"] = None
    else:
        import tensorflow_text  # noqa: F401
    import numpy as np
    import tensorflow as tf
    import tensorflow_hub as hub
    hub_dir, out = sys.argv[1], sys.argv[2]
    encoder = hub.load(hub_dir + "/encoder")
    ids = dict(np.load(out + ".in.npz"))
    outputs = encoder({k: tf.constant(v) for k, v in ids.items()})
    result = {"pooled": outputs["pooled_output"], "default": outputs["default"],
              "layers": np.stack(outputs["encoder_outputs"], 1),
              "trainable": len(encoder.trainable_variables)}
    if sys.argv[3] != "no-text":
        preprocess = hub.load(hub_dir + "/preprocess")
        texts = tf.constant(sys.argv[4].split("|"))
        packed = preprocess(texts)
        tokens = preprocess.tokenize(texts)
        pair = preprocess.bert_pack_inputs([tokens, tokens], seq_length=%d)
        result.update(ids_from_text=packed["input_word_ids"],
                      pooled_from_text=encoder(packed)["pooled_output"],
                      pair_types=pair["input_type_ids"],
                      lower_case=preprocess.do_lower_case.numpy())
    np.savez(out, **{k: np.asarray(v) for k, v in result.items()})
""" % SEQ_LENGTH)


@pytest.fixture(scope="module")
def hub_dir(minilm_dir, tmp_path_factory):
    export = encoder_export(os.path.join(minilm_dir, "vocab.txt"))
    path = str(tmp_path_factory.mktemp("hub") / "bert")
    export_tf_hub(export.model, export.preprocessor, path)
    return path, export


def consume(hub_dir, tmp_path, mode, ids):
    out = str(tmp_path / mode)
    np.savez(out + ".in.npz", **ids)
    subprocess.run([sys.executable, "-c", CONSUMER, hub_dir, out, mode, "|".join(TEXTS)],
                   check=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    return np.load(out + ".npz")


@pytest.mark.slow
def test_hub_load_without_keras_bert(hub_dir, tmp_path):
    path, export = hub_dir
    expected = keras_encoder_outputs(export)
    ids = {k: expected[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    got = consume(path, tmp_path, "text", ids)
    np.testing.assert_array_equal(got["ids_from_text"], expected["input_word_ids"])
    for name, key in (("pooled", "pooled_output"), ("default", "pooled_output"),
                      ("pooled_from_text", "pooled_output"), ("layers", "encoder_outputs")):
        np.testing.assert_allclose(got[name], expected[key], atol=2e-5, rtol=1e-5, err_msg=name)
    assert int(got["trainable"]) == len(export.model.trainable_weights)
    assert bool(got["lower_case"])
    single = export.preprocessor(tf.constant(TEXTS[:1]))["input_mask"].numpy().sum()
    assert got["pair_types"][0].sum() == single - 1  # the second segment and its [SEP]


@pytest.mark.slow
def test_the_encoder_needs_no_tensorflow_text(hub_dir, tmp_path):
    path, export = hub_dir
    expected = keras_encoder_outputs(export)
    ids = {k: expected[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}
    got = consume(path, tmp_path, "no-text", ids)
    np.testing.assert_allclose(got["pooled"], expected["pooled_output"], atol=2e-5, rtol=1e-5)
    graph = GraphModeModel(os.path.join(path, "encoder")).run("serving_default", **ids)
    np.testing.assert_allclose(graph["default"], expected["pooled_output"], atol=2e-5, rtol=1e-5)
    with pytest.raises(FileExistsError):
        export_tf_hub(export.model, export.preprocessor, path)


def test_a_failed_export_leaves_nothing(hub_dir, tmp_path, monkeypatch):
    from keras_bert.export import tf_hub
    _, export = hub_dir

    def broken(*args):
        raise ValueError("disk full")
    monkeypatch.setattr(tf_hub, "PreprocessModule", broken)
    with pytest.raises(ValueError, match="disk full"):
        export_tf_hub(export.model, export.preprocessor, str(tmp_path / "bert"))
    assert os.listdir(tmp_path) == []  # no encoder without its preprocessing, no scratch
