"""Folders that transformers 4.x's TensorFlow classes saved (tf_model.h5, whole or sharded;
tests/fixtures/tf_h5, made by make_tf_h5_fixtures.py with transformers 4.57.1 and TensorFlow
2.21) load into the task model of their head, with its labels and problem type, and give the
outputs transformers' TF model computed; they read under the keys of transformers' PyTorch
classes, `keras-bert info` shows them and `keras-bert convert` converts them; a damaged file is
refused in one line naming it. No transformers, tf-keras or torch is needed."""

import doctest
import importlib.util
import json
import logging
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from keras_bert import (BertClassifier, BertEncoder, BertMultipleChoice, BertPretrainer,
                        BertQuestionAnswerer, BertTokenClassifier)
from keras_bert.checkpoints.reading import read_checkpoint
from keras_bert.cli import main
from keras_bert.tasks.checkpoint_models import convert_checkpoint, model_of_checkpoint

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
TF = FIXTURES / "tf_h5"
HF = FIXTURES / "hf_heads"
MODULE_FILE = REPO / "keras_bert" / "checkpoints" / "tf_h5.py"
TOL = dict(atol=1e-5, rtol=1e-5)


def _load_tf_h5():
    """keras_bert/checkpoints/tf_h5.py loaded from its file, without the package (whose reading
    module imports Keras)."""
    spec = importlib.util.spec_from_file_location("tf_h5_under_test", MODULE_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


tf_h5 = _load_tf_h5()
tf_names = sys.modules["keras_bert.checkpoints.tf_names"]


def expected(folder: str) -> dict:
    with np.load(TF / folder / "expected.npz") as z:
        return {k: z[k] for k in z.files}


def ids(reference: dict, prefix: str = "") -> dict:
    return {"input_word_ids": reference[prefix + "input_ids"].astype("int32"),
            "input_mask": reference[prefix + "attention_mask"].astype("int32"),
            "input_type_ids": reference[prefix + "token_type_ids"].astype("int32")}


def real(reference: dict, prefix: str = "") -> np.ndarray:
    """The unpadded positions of a batch."""
    return reference[prefix + "attention_mask"].astype(bool)


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def copy(folder: str, tmp_path) -> pathlib.Path:
    return pathlib.Path(shutil.copytree(TF / folder, tmp_path / folder))


# ------------------------------------------------------------------------------- names
def test_the_reader_imports_no_tensorflow_keras_or_torch():
    code = (f"import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('m', {str(MODULE_FILE)!r})\n"
            f"module = importlib.util.module_from_spec(spec); sys.modules['m'] = module\n"
            f"spec.loader.exec_module(module)\n"
            f"values = module.read_tf_weights({str(TF / 'seq_cls')!r})\n"
            f"print(len(values), sorted(m for m in sys.modules "
            f"if m.split('.')[0] in ('tensorflow', 'keras', 'torch', 'transformers')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["41", "[]"]


def test_the_module_examples_run():
    assert doctest.testmod(tf_h5, raise_on_error=False).failed == 0
    assert doctest.testmod(tf_names, raise_on_error=False).failed == 0


@pytest.mark.parametrize("name,key,transposed", [
    ("bert/embeddings/word_embeddings/weight:0", "bert.embeddings.word_embeddings.weight", False),
    ("bert/embeddings/position_embeddings/embeddings:0",
     "bert.embeddings.position_embeddings.weight", False),
    ("bert/embeddings/LayerNorm/beta:0", "bert.embeddings.LayerNorm.bias", False),
    ("bert/encoder/layer_._11/attention/self/query/kernel:0",
     "bert.encoder.layer.11.attention.self.query.weight", True),
    ("bert/encoder/layer_._0/output/LayerNorm/gamma:0",
     "bert.encoder.layer.0.output.LayerNorm.weight", False),
    ("bert/pooler/dense/bias:0", "bert.pooler.dense.bias", False),
    ("classifier/kernel:0", "classifier.weight", True),
    ("qa_outputs/bias:0", "qa_outputs.bias", False),
    ("mlm___cls/predictions/bias:0", "cls.predictions.bias", False),
    ("mlm___cls/predictions/transform/dense/kernel:0", "cls.predictions.transform.dense.weight",
     True),
    ("nsp___cls/seq_relationship/kernel:0", "cls.seq_relationship.weight", True),
])
def test_tf_names_become_transformers_pytorch_keys(name, key, transposed):
    assert tf_names.hf_key(name) == (key, transposed)


def _layerless(keys) -> set[str]:
    """Keys with the encoder's layer numbers taken out, so that a 1-layer model's keys compare
    with a 2-layer model's."""
    return {".".join("N" if part.isdigit() else part for part in key.split(".")) for key in keys}


@pytest.mark.parametrize("tf_folder,hf_folder", [
    ("bert_model", "bert_model"), ("for_pretraining", "for_pretraining"),
    ("for_masked_lm", "for_masked_lm"), ("seq_cls", "seq_cls"),
    ("seq_cls_multi_label_sharded", "seq_cls_multi_label"), ("token_cls", "token_cls"),
    ("qa", "qa"), ("multiple_choice", "multiple_choice")])
def test_a_tf_folder_reads_as_the_pytorch_class_of_its_model_writes(tf_folder, hf_folder):
    """The keys and orientations of transformers 5's PyTorch twin (tests/fixtures/hf_heads):
    Dense kernels [in, out] come out [out, in]; the tied decoder and embeddings once."""
    from keras_bert.checkpoints.hf_weights import read_hf_weights
    ours = tf_h5.read_tf_weights(TF / tf_folder)
    theirs = read_hf_weights(HF / hf_folder)
    if hf_folder == "bert_model":  # BertModel's own keys have no bert. prefix
        theirs = {f"bert.{key}": value for key, value in theirs.items()}
    assert _layerless(ours) == _layerless(theirs)
    config = json.loads((TF / tf_folder / "config.json").read_text())
    hidden, inner = config["hidden_size"], config["intermediate_size"]
    for key, value in ours.items():
        assert value.dtype == np.float32 and value.flags.c_contiguous, key
        if key in theirs and "embeddings" not in key and "cls.predictions.bias" != key:
            assert value.ndim == theirs[key].ndim, key
    assert ours["bert.encoder.layer.0.intermediate.dense.weight"].shape == (inner, hidden)
    assert ours["bert.encoder.layer.0.output.dense.weight"].shape == (hidden, inner)


def test_a_sharded_folder_reads_every_shard():
    index = json.loads((TF / "seq_cls_multi_label_sharded" / "tf_model.h5.index.json")
                       .read_text())
    assert len(set(index["weight_map"].values())) == 3
    values = tf_h5.read_tf_weights(TF / "seq_cls_multi_label_sharded")
    assert len(values) == len(index["weight_map"]) == 25
    assert values["classifier.weight"].shape == (4, 32)


# ------------------------------------------------------------------- each head, its task model
@pytest.mark.parametrize("folder", ["seq_cls", "seq_cls_safetensors"])
def test_a_sequence_classifier_loads_with_its_labels_and_gives_tf_logits(folder):
    """tf_model.h5, and the model.safetensors with TF's names that the same model wrote with
    save_pretrained(safe_serialization=True)."""
    model = BertClassifier.from_pretrained(TF / folder, seq_length=32)
    assert model.num_classes == 3 and model.label_names == ["neg", "neu", "pos"]
    assert model.checkpoint_head().problem_type == "single_label_classification"
    np.testing.assert_allclose(model.head.dense.bias.numpy(), [1, 2, 3])
    reference = expected(folder)
    for prefix in ("", "pair_"):
        np.testing.assert_allclose(model.predict(ids(reference, prefix), verbose=0),
                                   softmax(reference[prefix + "logits"]), **TOL)
    # The folder's vocab.txt tokenizes raw text to transformers' ids.
    texts = [str(t) for t in reference["texts"]]
    np.testing.assert_allclose(model.predict(texts, verbose=0), softmax(reference["logits"]),
                               **TOL)
    pairs = list(zip(map(str, reference["pair_texts"]), map(str, reference["pair_text_pairs"])))
    np.testing.assert_allclose(model.predict(pairs, verbose=0),
                               softmax(reference["pair_logits"]), **TOL)


def test_multi_label_from_shards_and_regression_keep_their_problem_type():
    multi = model_of_checkpoint(TF / "seq_cls_multi_label_sharded")
    assert isinstance(multi, BertClassifier) and multi.is_multi_label
    assert multi.label_names == ["sports", "politics", "science", "art"]
    assert multi.checkpoint_head().problem_type == "multi_label_classification"
    reference = expected("seq_cls_multi_label_sharded")
    np.testing.assert_allclose(multi.predict(ids(reference), verbose=0),
                               sigmoid(reference["logits"]), **TOL)

    regression = BertClassifier.from_pretrained(TF / "seq_cls_regression")
    assert regression.is_regression and regression.num_classes == 1
    assert regression.checkpoint_head().problem_type == "regression"
    reference = expected("seq_cls_regression")
    np.testing.assert_allclose(regression.predict(ids(reference), verbose=0),
                               reference["logits"], **TOL)


def test_token_classifier_question_answerer_and_multiple_choice(caplog):
    with caplog.at_level(logging.INFO):
        tagger = BertTokenClassifier.from_pretrained(TF / "token_cls")
    assert tagger.label_names == ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    assert "has no pooler.dense.weight, pooler.dense.bias" in caplog.text
    reference = expected("token_cls")
    mask = real(reference)
    np.testing.assert_allclose(tagger.predict(ids(reference), verbose=0)[mask],
                               softmax(reference["logits"])[mask], **TOL)

    qa = BertQuestionAnswerer.from_pretrained(TF / "qa")
    reference = expected("qa")
    mask = real(reference)
    out = qa.predict(ids(reference), verbose=0)
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(out[name][mask], reference[name][mask], **TOL)

    chooser = BertMultipleChoice.from_pretrained(TF / "multiple_choice", num_choices=3)
    reference = expected("multiple_choice")
    np.testing.assert_allclose(chooser.predict(ids(reference), verbose=0),
                               softmax(reference["logits"]), **TOL)


def _positions(inputs: dict) -> np.ndarray:
    batch, length = inputs["input_word_ids"].shape
    return np.tile(np.arange(length, dtype="int32"), (batch, 1))


def test_pretraining_and_masked_lm_heads_and_a_bare_encoder(caplog):
    reference = expected("for_pretraining")
    pretrainer = BertPretrainer.from_pretrained(TF / "for_pretraining")
    inputs = ids(reference)
    out = pretrainer({**inputs, "masked_lm_positions": _positions(inputs)})
    mask = real(reference)
    np.testing.assert_allclose(np.asarray(out["mlm_logits"])[mask],
                               reference["prediction_logits"][mask], **TOL)
    np.testing.assert_allclose(out["nsp_logits"], reference["seq_relationship_logits"], **TOL)

    with caplog.at_level(logging.WARNING):
        masked_lm = BertPretrainer.from_pretrained(TF / "for_masked_lm")
    assert "has no next-sentence head (it holds a masked lm head" in caplog.text
    reference = expected("for_masked_lm")
    inputs = ids(reference)
    out = masked_lm({**inputs, "masked_lm_positions": _positions(inputs)})
    mask = real(reference)
    np.testing.assert_allclose(np.asarray(out["mlm_logits"])[mask], reference["logits"][mask],
                               **TOL)

    encoder = BertEncoder.from_pretrained(TF / "bert_model")
    reference = expected("bert_model")
    out = encoder(ids(reference))
    mask = real(reference)
    np.testing.assert_allclose(np.asarray(out["sequence_output"])[mask],
                               reference["last_hidden_state"][mask], **TOL)
    np.testing.assert_allclose(out["pooled_output"], reference["pooler_output"], **TOL)
    assert read_checkpoint(TF / "bert_model").head is None


@pytest.mark.parametrize("folder,task,model_class", [
    ("bert_model", None, BertEncoder), ("for_pretraining", "pretraining", BertPretrainer),
    ("for_masked_lm", "masked_lm", BertPretrainer), ("seq_cls", "classification", BertClassifier),
    ("token_cls", "token_classification", BertTokenClassifier),
    ("qa", "question_answering", BertQuestionAnswerer),
    ("multiple_choice", "multiple_choice", BertMultipleChoice)])
def test_each_folder_is_the_model_of_its_head(folder, task, model_class):
    checkpoint = read_checkpoint(TF / folder)
    assert checkpoint.format == "hf"
    assert (checkpoint.head.task if checkpoint.head else None) == task
    assert checkpoint.vocabulary is not None and len(checkpoint.vocabulary) == 152
    assert checkpoint.lower_case is True
    assert type(model_of_checkpoint(TF / folder)) is model_class


# -------------------------------------------------------------------------------- info, convert
def test_info_shows_the_head_labels_and_problem_type(capsys):
    assert main(["info", str(TF / "seq_cls_multi_label_sharded")]) == 0
    out = capsys.readouterr().out
    assert "(hf)" in out.splitlines()[0]
    assert ("head: classification (num_labels: 4; problem_type: multi_label_classification; "
            "labels: sports, politics, science, art)") in out
    assert "classifier.weight  [4, 32]" in out
    assert main(["info", "--json", str(TF / "qa")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["head"]["task"] == "question_answering"
    assert info["config"]["num_hidden_layers"] == 1
    assert ["qa_outputs.weight", [2, 32]] in info["variables"]


def test_convert_writes_keras_hf_and_google_that_give_the_same_outputs(tmp_path, capsys):
    reference = expected("seq_cls")
    inputs = ids(reference)
    want = softmax(reference["logits"])
    for fmt in ("keras", "hf"):
        assert main(["convert", "--to", fmt, str(TF / "seq_cls"), str(tmp_path / fmt)]) == 0
        assert f"wrote the BertClassifier as a {fmt} checkpoint" in capsys.readouterr().out
        again = model_of_checkpoint(tmp_path / fmt)
        assert again.label_names == ["neg", "neu", "pos"]
        np.testing.assert_allclose(again.predict(inputs, verbose=0), want, **TOL, err_msg=fmt)
    # Google's format has only the tanh GELU (a warning says so): its weights are the same.
    assert main(["convert", "--to", "google", str(TF / "seq_cls"), str(tmp_path / "google")]) == 0
    google = BertClassifier.from_pretrained(tmp_path / "google", label_names=again.label_names)
    for ours, theirs in zip(google.get_weights(), again.get_weights()):
        np.testing.assert_array_equal(ours, theirs)
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["problem_type"] == "single_label_classification"

    reference = expected("token_cls")
    tagger = convert_checkpoint(TF / "token_cls", tmp_path / "tagger", "hf")
    again = model_of_checkpoint(tmp_path / "tagger")
    assert isinstance(again, BertTokenClassifier) and again.label_names == tagger.label_names
    mask = real(reference)
    np.testing.assert_allclose(again.predict(ids(reference), verbose=0)[mask],
                               softmax(reference["logits"])[mask], **TOL)
    assert main(["convert", "--to", "google", str(TF / "token_cls"), str(tmp_path / "g")]) == 2
    assert "Google's format has no names" in capsys.readouterr().err
    assert not (tmp_path / "g").exists()


# ------------------------------------------------------------------------------------ edge cases
def test_pytorch_weights_win_over_tensorflow_weights_in_one_folder(tmp_path):
    folder = pathlib.Path(shutil.copytree(HF / "seq_cls", tmp_path / "both"))
    shutil.copy(TF / "seq_cls" / "tf_model.h5", folder)
    checkpoint = read_checkpoint(folder)
    assert checkpoint.values["embeddings.word_embeddings.weight"].shape == (164, 32)  # HF's


def test_a_config_naming_the_tf_class_is_read_as_its_pytorch_twin(tmp_path):
    folder = copy("token_cls", tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["TFBertForTokenClassification"]
    (folder / "config.json").write_text(json.dumps(config))
    head = read_checkpoint(folder).head
    assert head.task == "token_classification" and head.num_labels == 5


def test_a_config_without_weights_names_tf_model_h5(tmp_path):
    folder = copy("seq_cls", tmp_path)
    (folder / "tf_model.h5").unlink()
    with pytest.raises(ValueError, match=r"has config\.json but no weights: expected one of "
                                         r"model\.safetensors.*tf_model\.h5, "
                                         r"tf_model\.h5\.index\.json"):
        read_checkpoint(folder)


def _refused_in_one_line(folder: pathlib.Path, file_name: str, capsys) -> str:
    assert main(["info", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert str(folder / file_name) in err, err
    return err


@pytest.mark.parametrize("cut", ["half", "header", "garbage"])
def test_a_damaged_h5_is_refused_in_one_line_naming_it(cut, tmp_path, capsys):
    folder = copy("seq_cls", tmp_path)
    path = folder / "tf_model.h5"
    data = path.read_bytes()
    path.write_bytes({"half": data[:len(data) // 2], "header": data[:100],
                      "garbage": b"not an HDF5 file at all" * 10}[cut])
    err = _refused_in_one_line(folder, "tf_model.h5", capsys)
    assert "is truncated or not the Keras HDF5 weights" in err
    with pytest.raises(ValueError, match=r"tf_model\.h5.*truncated"):
        BertClassifier.from_pretrained(folder)


def test_an_h5_that_is_not_keras_weights_is_refused(tmp_path, capsys):
    import h5py
    folder = copy("seq_cls", tmp_path)
    with h5py.File(folder / "tf_model.h5", "w") as h5:
        h5["x"] = np.zeros(3)
    err = _refused_in_one_line(folder, "tf_model.h5", capsys)
    assert "its root has no 'layer_names' attribute" in err


def test_damaged_and_missing_shards_are_refused_naming_them(tmp_path, capsys):
    folder = copy("seq_cls_multi_label_sharded", tmp_path)
    shard = folder / "tf_model-00002-of-00003.h5"
    shard.write_bytes(shard.read_bytes()[:5000])
    _refused_in_one_line(folder, "tf_model-00002-of-00003.h5", capsys)
    shard.unlink()
    with pytest.raises(FileNotFoundError, match=r"names the shard 'tf_model-00002-of-00003\.h5'"):
        read_checkpoint(folder)
    # An index that says a shard holds a weight it does not.
    folder = copy("seq_cls_multi_label_sharded", tmp_path / "index")
    index = json.loads((folder / "tf_model.h5.index.json").read_text())
    index["weight_map"]["tf_bert_for_sequence_classification/classifier/kernel:0"] = \
        "tf_model-00001-of-00003.h5"
    (folder / "tf_model.h5.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match=r"says 'tf_model-00001-of-00003\.h5' holds "
                                         r"\['classifier/kernel:0'\], but it does not"):
        read_checkpoint(folder)


# ------------------------------------------------------------------- TF names in safetensors
def test_tf_safetensors_read_as_the_same_models_tf_model_h5():
    from keras_bert.checkpoints.hf_weights import read_hf_weights
    from_h5 = tf_h5.read_tf_weights(TF / "seq_cls")
    from_safetensors = read_hf_weights(TF / "seq_cls_safetensors")
    assert sorted(from_safetensors) == sorted(from_h5)
    for key, value in from_h5.items():
        np.testing.assert_array_equal(from_safetensors[key], value, err_msg=key)


def test_tf_safetensors_shards_read_under_their_index(tmp_path):
    """Shards of TF-named safetensors and an index of TF names (transformers' layout for a TF
    model saved with safe_serialization=True past max_shard_size) read as one folder."""
    from safetensors.numpy import load_file, save_file

    from keras_bert.checkpoints.hf_weights import read_hf_weights
    stored = load_file(str(TF / "seq_cls_safetensors" / "model.safetensors"))
    names = sorted(stored)
    shards = {"model-00001-of-00002.safetensors": names[::2],
              "model-00002-of-00002.safetensors": names[1::2]}
    folder = tmp_path / "sharded"
    shutil.copytree(TF / "seq_cls_safetensors", folder)
    (folder / "model.safetensors").unlink()
    for shard, shard_names in shards.items():
        save_file({n: stored[n] for n in shard_names}, str(folder / shard),
                  metadata={"format": "tf"})
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {n: s for s, ns in shards.items() for n in ns}}))
    values = read_hf_weights(folder)
    reference = tf_h5.read_tf_weights(TF / "seq_cls")
    assert sorted(values) == sorted(reference)
    np.testing.assert_array_equal(values["classifier.weight"], reference["classifier.weight"])
    model = BertClassifier.from_pretrained(folder, seq_length=32)
    np.testing.assert_allclose(model.predict(ids(expected("seq_cls")), verbose=0),
                               softmax(expected("seq_cls")["logits"]), **TOL)
