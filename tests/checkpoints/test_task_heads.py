"""Task heads cross the border both ways, checked against what the other libraries computed:
Hugging Face BertFor* folders saved by transformers (tests/fixtures/hf_heads), Google's
run_classifier.py / run_squad.py checkpoints (tests/fixtures/google_heads) and keras-hub presets
(tests/fixtures/keras_hub) load with their heads and give the recorded outputs; our task models
save in each format that names their head, and a head a format cannot hold is refused before
anything is written. (The same folders through transformers itself: benchmarks/hf_consumer.py.)"""

import json
import logging
import os
import pathlib
import shutil

import numpy as np
import pytest

from keras_bert import (BertClassifier, BertEmbedder, BertEncoder, BertMultipleChoice,
                        BertPretrainer, BertQuestionAnswerer, BertTokenClassifier)
from keras_bert.checkpoints.reading import CheckpointMismatchError, read_checkpoint
from keras_bert.checkpoints.saving import save_checkpoint
from keras_bert.tasks.checkpoint_models import convert_checkpoint, model_of_checkpoint

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
HF = FIXTURES / "hf_heads"
TOL = dict(atol=1e-5, rtol=1e-5)


def expected(folder) -> dict:
    with np.load(folder / "expected.npz", allow_pickle=True) as z:
        return {k: z[k] for k in z.files}


def ids(reference, prefix="") -> dict:
    return {"input_word_ids": reference[prefix + "input_ids"].astype("int32"),
            "input_mask": reference[prefix + "attention_mask"].astype("int32"),
            "input_type_ids": reference[prefix + "token_type_ids"].astype("int32")}


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


# ------------------------------------------------------------------------------- Hugging Face in
@pytest.mark.parametrize("folder", ["seq_cls", "seq_cls_bin", "seq_cls_sharded",
                                    "seq_cls_bin_sharded"])
def test_a_hf_classifier_loads_with_its_head_labels_and_vocabulary(folder):
    model = BertClassifier.from_pretrained(HF / folder, seq_length=32)
    assert model.num_classes == 3 and model.label_names == ["neg", "neu", "pos"]
    np.testing.assert_allclose(model.head.dense.bias.numpy(), [1, 2, 3])
    reference = expected(HF / "seq_cls")
    for prefix in ("", "pair_"):
        np.testing.assert_allclose(model.predict(ids(reference, prefix), verbose=0),
                                   softmax(reference[prefix + "logits"]), **TOL)
    # transformers 5 saved no vocab.txt: the vocabulary comes from tokenizer.json, and raw text
    # gives transformers' ids, so the served probabilities are transformers' too.
    texts = [str(t) for t in reference["texts"]]
    np.testing.assert_allclose(model.predict(texts, verbose=0), softmax(reference["logits"]),
                               **TOL)
    assert model.predict_labels(texts) == [model.label_names[i]
                                           for i in reference["logits"].argmax(-1)]


def test_regression_and_multi_label_classifiers_keep_their_mode():
    regression = model_of_checkpoint(HF / "seq_cls_regression")
    assert isinstance(regression, BertClassifier) and regression.is_regression
    reference = expected(HF / "seq_cls_regression")
    np.testing.assert_allclose(regression.predict(ids(reference), verbose=0),
                               reference["logits"], **TOL)
    multi = model_of_checkpoint(HF / "seq_cls_multi_label")
    assert multi.is_multi_label and multi.activation == "sigmoid" and multi.num_classes == 4
    reference = expected(HF / "seq_cls_multi_label")
    np.testing.assert_allclose(multi.predict(ids(reference), verbose=0),
                               sigmoid(reference["logits"]), **TOL)
    assert multi.checkpoint_head().problem_type == "multi_label_classification"


def test_token_qa_and_multiple_choice_folders_without_a_pooler_load_with_their_heads(caplog):
    with caplog.at_level(logging.INFO):
        tagger = model_of_checkpoint(HF / "token_cls")
    assert isinstance(tagger, BertTokenClassifier)
    assert tagger.label_names == ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    assert "has no pooler.dense.weight, pooler.dense.bias" in caplog.text
    reference = expected(HF / "token_cls")
    mask = reference["attention_mask"].astype(bool)
    np.testing.assert_allclose(tagger.predict(ids(reference), verbose=0)[mask],
                               softmax(reference["logits"])[mask], **TOL)

    qa = model_of_checkpoint(HF / "qa")
    assert isinstance(qa, BertQuestionAnswerer)
    reference = expected(HF / "qa")
    mask = reference["attention_mask"].astype(bool)
    out = qa.predict(ids(reference), verbose=0)
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(out[name][mask], reference[name][mask], **TOL)

    reference = expected(HF / "multiple_choice")
    chooser = BertMultipleChoice.from_pretrained(HF / "multiple_choice", num_choices=3)
    np.testing.assert_allclose(chooser.predict(ids(reference), verbose=0),
                               softmax(reference["logits"]), **TOL)


def test_pretraining_and_masked_lm_heads(caplog):
    reference = expected(HF / "for_pretraining")
    model = model_of_checkpoint(HF / "for_pretraining")
    assert isinstance(model, BertPretrainer)
    inputs = ids(reference)
    positions = np.tile(np.arange(inputs["input_word_ids"].shape[1], dtype="int32"),
                        (len(inputs["input_word_ids"]), 1))
    out = model({**inputs, "masked_lm_positions": positions})
    np.testing.assert_allclose(out["mlm_logits"], reference["prediction_logits"], atol=1e-4)
    np.testing.assert_allclose(out["nsp_logits"], reference["seq_relationship_logits"], **TOL)
    with caplog.at_level(logging.WARNING):
        masked_lm = BertPretrainer.from_pretrained(HF / "for_masked_lm")
    assert "has no next-sentence head (it holds a masked lm head" in caplog.text
    reference = expected(HF / "for_masked_lm")
    out = masked_lm({**ids(reference), "masked_lm_positions": positions})
    np.testing.assert_allclose(out["mlm_logits"], reference["logits"], atol=1e-4)


def test_a_sentence_transformers_folder_gives_its_pooling_and_normalisation():
    embedder = model_of_checkpoint(HF / "sentence_transformers")
    assert isinstance(embedder, BertEmbedder)
    assert (embedder.pooling, embedder.normalize) == ("mean", True)
    reference = expected(HF / "sentence_transformers")
    np.testing.assert_allclose(embedder.predict(ids(reference), verbose=0)["embedding"],
                               reference["sentence_embedding"], **TOL)
    # An asked pooling is a setting, not a weight: it wins.
    assert BertEmbedder.from_pretrained(HF / "sentence_transformers", pooling="cls").pooling \
        == "cls"


def test_a_head_argument_that_disagrees_names_both():
    with pytest.raises(ValueError, match=r"holds a classification head \(3 labels: neg, neu, "
                                         r"pos\).*asked for num_classes=2 \(the checkpoint's: 3\)"):
        BertClassifier.from_pretrained(HF / "seq_cls", num_classes=2)
    with pytest.raises(ValueError, match=r"label_names=\['a', 'b', 'c'\]"):
        BertClassifier.from_pretrained(HF / "seq_cls", label_names=["a", "b", "c"])


def test_a_head_of_another_task_is_named_and_a_fresh_head_built(caplog):
    with caplog.at_level(logging.INFO):
        classifier = BertClassifier.from_pretrained(HF / "qa", num_classes=2)
    assert "holds a question answering head from BertForQuestionAnswering" in caplog.text
    assert "the BertClassifier takes its encoder and a new head" in caplog.text
    assert classifier.num_classes == 2
    with caplog.at_level(logging.INFO):
        BertTokenClassifier.from_pretrained(HF / "bert_model", ["O", "X"])
    assert "holds no head for a BertTokenClassifier; it starts with a new one" in caplog.text
    with pytest.raises(ValueError, match="label_names is required for a new "
                                         "BertTokenClassifier"):
        BertTokenClassifier.from_pretrained(HF / "bert_model")


# -------------------------------------------------------------------------- Google and keras-hub
def test_google_run_classifier_and_run_squad_checkpoints_load_with_their_heads():
    folder = FIXTURES / "google_heads" / "classifier"
    reference = expected(folder)
    google_ids = {"input_word_ids": reference["input_ids"].astype("int32"),
                  "input_mask": reference["input_mask"].astype("int32"),
                  "input_type_ids": reference["segment_ids"].astype("int32")}
    classifier = BertClassifier.from_pretrained(folder, label_names=["a", "b", "c"])
    assert classifier.num_classes == 3
    np.testing.assert_allclose(classifier.predict(google_ids, verbose=0),
                               reference["probabilities"], **TOL)
    folder = FIXTURES / "google_heads" / "squad"
    reference = expected(folder)
    qa = model_of_checkpoint(folder)
    assert isinstance(qa, BertQuestionAnswerer)
    out = qa.predict({"input_word_ids": reference["input_ids"].astype("int32"),
                      "input_mask": reference["input_mask"].astype("int32"),
                      "input_type_ids": reference["segment_ids"].astype("int32")}, verbose=0)
    mask = reference["input_mask"].astype(bool)
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(out[name][mask], reference[name][mask], **TOL)


def test_a_keras_hub_text_classifier_preset_loads_with_its_head():
    folder = FIXTURES / "keras_hub" / "bert_text_classifier"
    reference = expected(folder)
    classifier = model_of_checkpoint(folder)
    assert isinstance(classifier, BertClassifier) and classifier.num_classes == 3
    inputs = {"input_word_ids": reference["token_ids"].astype("int32"),
              "input_mask": reference["padding_mask"].astype("int32"),
              "input_type_ids": reference["segment_ids"].astype("int32")}
    np.testing.assert_allclose(classifier.predict(inputs, verbose=0),
                               softmax(reference["logits"]), **TOL)
    backbone = BertEncoder.from_pretrained(FIXTURES / "keras_hub" / "bert_backbone")
    reference = expected(FIXTURES / "keras_hub" / "bert_backbone")
    out = backbone({"input_word_ids": reference["token_ids"].astype("int32"),
                    "input_mask": reference["padding_mask"].astype("int32"),
                    "input_type_ids": reference["segment_ids"].astype("int32")})
    np.testing.assert_allclose(out["pooled_output"], reference["pooled_output"], **TOL)


# ----------------------------------------------------------------------------------------- out
@pytest.mark.parametrize("folder,keys", [
    ("seq_cls", {"classifier.weight", "bert.pooler.dense.weight"}),
    ("token_cls", {"classifier.weight"}),
    ("qa", {"qa_outputs.weight"}),
    ("multiple_choice", {"classifier.weight", "bert.pooler.dense.weight"}),
    ("for_pretraining", {"cls.predictions.bias", "cls.seq_relationship.weight"}),
    ("sentence_transformers", {"pooler.dense.weight", "embeddings.word_embeddings.weight"}),
])
def test_hf_folders_round_trip_with_transformers_names(folder, keys, tmp_path):
    """In, out and in again: the same names as transformers saved (the pooler only where
    transformers keeps it), config.json's architectures and labels, and equal weights."""
    from safetensors.numpy import load_file
    out = tmp_path / "out"
    model = convert_checkpoint(HF / folder, out, "hf")
    theirs = load_file(HF / folder / "model.safetensors")
    ours = load_file(out / "model.safetensors")
    assert keys <= set(ours)
    assert set(ours) == set(theirs) - {"bert.embeddings.position_ids"}
    for key, value in theirs.items():
        if key in ours:
            np.testing.assert_allclose(ours[key], value, atol=1e-7, err_msg=key)
    config, original = (json.loads((d / "config.json").read_text()) for d in (out, HF / folder))
    assert config["architectures"] == original["architectures"]
    for field in ("id2label", "label2id", "problem_type"):
        assert config.get(field) == original.get(field), field
    assert {"vocab.txt", "tokenizer.json", "tokenizer_config.json",
            "special_tokens_map.json"} <= set(os.listdir(out))
    again = model_of_checkpoint(out)
    assert type(again) is type(model)
    if folder == "sentence_transformers":
        assert json.loads((out / "modules.json").read_text())[1]["path"] == "1_Pooling"
        assert (out / "2_Normalize").is_dir()


def test_google_names_for_classifier_and_span_heads_and_a_refusal_for_tagging(tmp_path):
    import tensorflow as tf
    classifier = model_of_checkpoint(HF / "seq_cls")
    save_checkpoint(classifier, tmp_path / "g", "google")
    reader = tf.train.load_checkpoint(str(tmp_path / "g" / "bert_model.ckpt"))
    np.testing.assert_allclose(reader.get_tensor("output_weights"),
                               classifier.head.dense.kernel.numpy().T)
    np.testing.assert_allclose(reader.get_tensor("output_bias"), [1, 2, 3])
    again = BertClassifier.from_pretrained(tmp_path / "g", label_names=classifier.label_names)
    for a, b in zip(again.get_weights(), classifier.get_weights()):
        np.testing.assert_array_equal(a, b)
    # Google's format has the tanh GELU only (this model was trained with the erf form).
    assert again.encoder.bert_config.hidden_act == "gelu"
    qa = model_of_checkpoint(HF / "qa")
    save_checkpoint(qa, tmp_path / "squad", "google")
    reader = tf.train.load_checkpoint(str(tmp_path / "squad" / "bert_model.ckpt"))
    assert reader.get_variable_to_shape_map()["cls/squad/output_weights"] == [2, 32]
    tagger = model_of_checkpoint(HF / "token_cls")
    for fmt in ("google",):
        with pytest.raises(ValueError, match="Google's format has no names for a "
                                             "BertTokenClassifier's token classification head"):
            save_checkpoint(tagger, tmp_path / "tagger", fmt)
    assert not (tmp_path / "tagger").exists()


def test_a_classifier_with_features_saves_as_keras_only(tmp_path):
    encoder = BertEncoder.from_pretrained(HF / "bert_model")
    model = BertClassifier(encoder, 2, numeric_features={"age": {"mean": 40.0,
                                                                  "variance": 100.0}})
    with pytest.raises(ValueError, match="a BertClassifier with features has no equivalent.*"
                                         "save it as 'keras'"):
        save_checkpoint(model, tmp_path / "hf", "hf")
    assert not (tmp_path / "hf").exists()


def test_the_cli_converts_task_models_and_info_shows_the_head(tmp_path, capsys):
    from keras_bert.cli import main
    assert main(["convert", "--to", "keras", str(HF / "token_cls"), str(tmp_path / "k")]) == 0
    assert "wrote the BertTokenClassifier as a keras checkpoint" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "k")]) == 0
    out = capsys.readouterr().out
    assert "head: token_classification (num_labels: 5; labels: O, B-PER, I-PER, B-LOC, I-LOC)" \
        in out
    assert main(["convert", "--to", "google", str(tmp_path / "k"), str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("keras-bert convert: error: Google's format has no names")
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "g").exists()
    assert main(["info", "--json", str(HF / "seq_cls")]) == 0
    head = json.loads(capsys.readouterr().out)["head"]
    assert head["task"] == "classification" and head["label_names"] == ["neg", "neu", "pos"]


# ----------------------------------------------------------------------------------- bad input
def _copy(folder, tmp_path):
    return pathlib.Path(shutil.copytree(HF / folder, tmp_path / folder))


def test_bad_folders_fail_naming_the_file_and_field(tmp_path):
    truncated = _copy("seq_cls", tmp_path)
    data = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=r"model\.safetensors.*truncated"):
        BertClassifier.from_pretrained(truncated)

    config_path = _copy("seq_cls", tmp_path / "labels") / "config.json"
    config = json.loads(config_path.read_text())
    config["id2label"] = {"0": "a", "1": "b"}
    config_path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"config\.json: id2label names 2 labels.*classifier"
                                         r"\.weight has 3 rows"):
        read_checkpoint(config_path.parent)

    config["id2label"] = {"0": "neg", "1": "neu", "2": "pos"}
    config["problem_type"] = "ordinal"
    config_path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"config\.json: unknown problem_type 'ordinal'"):
        read_checkpoint(config_path.parent)


def test_a_head_of_the_wrong_shape_loads_nothing(tmp_path):
    from safetensors.numpy import load_file, save_file
    folder = _copy("seq_cls", tmp_path)
    values = load_file(folder / "model.safetensors")
    values["classifier.weight"] = values["classifier.weight"][:, :31]
    save_file(values, folder / "model.safetensors")
    with pytest.raises(CheckpointMismatchError, match=r"classifier\.weight: checkpoint has shape "
                                                      r"\(31, 3\), model expects \(32, 3\)"):
        BertClassifier.from_pretrained(folder)


def test_a_folder_without_a_vocabulary_takes_packed_ids_and_cannot_export(tmp_path, caplog):
    from keras_bert.cli import main
    folder = _copy("seq_cls", tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).unlink()
    with caplog.at_level(logging.WARNING):
        model = BertClassifier.from_pretrained(folder)
    assert model.preprocessor is None and "has no vocabulary" in caplog.text
    assert main(["export", str(folder), str(tmp_path / "models"), "--model_name", "m"]) == 2
    assert not (tmp_path / "models" / "m").exists()


def test_an_explicit_none_is_an_answer(tmp_path):
    """activation=None asks for logits, from a checkpoint with a head (single- or multi-label)
    and from a saved model (refused: it would change the model), while a None head argument
    still means "the checkpoint's"."""
    for folder, to_probabilities in (("seq_cls", softmax), ("seq_cls_multi_label", sigmoid)):
        reference = expected(HF / folder)
        logits = BertClassifier.from_pretrained(HF / folder, None, activation=None)
        assert logits.activation is None
        np.testing.assert_allclose(logits.predict(ids(reference), verbose=0),
                                   reference["logits"], **TOL)
        default = BertClassifier.from_pretrained(HF / folder, num_classes=None)
        np.testing.assert_allclose(default.predict(ids(reference), verbose=0),
                                   to_probabilities(reference["logits"]), **TOL)
    saved = tmp_path / "saved"
    save_checkpoint(BertClassifier.from_pretrained(HF / "seq_cls"), str(saved))
    with pytest.raises(ValueError, match=r"activation=None \(the saved model has 'softmax'\)"):
        BertClassifier.from_pretrained(saved, activation=None)
    assert BertClassifier.from_pretrained(saved, None, None).activation == "softmax"
