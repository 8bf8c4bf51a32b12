"""Round trips are exact (TF1 -> Keras -> TF1, HF -> Keras -> HF, keras saves), and failures are
clear and write nothing."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from keras_bert import BertConfig, BertEncoder, BertPretrainer
from keras_bert.checkpoints.detection import detect_format
from keras_bert.checkpoints.reading import CheckpointMismatchError
from keras_bert.checkpoints.saving import save_checkpoint
from keras_bert.tasks.checkpoint_models import convert_checkpoint as convert
from keras_bert.tasks.checkpoint_models import model_of_checkpoint
from keras_bert.cli import main as cli_main
from tests.checkpoints.test_parity import write_tf1_checkpoint_like_google
from tests.helpers import random_inputs


def _tf1_variables(directory):
    reader = tf.train.load_checkpoint(os.path.join(directory, "bert_model.ckpt"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _tiny_pretrainer(tiny_config, seed=0):
    import keras
    keras.utils.set_random_seed(seed)
    return BertPretrainer(BertEncoder.from_bert_config(tiny_config))


def test_tf1_keras_tf1_round_trip_is_exact_with_heads(tiny_config, tmp_path):
    original = _tiny_pretrainer(tiny_config)
    save_checkpoint(original, str(tmp_path / "a"), "google")
    first = _tf1_variables(tmp_path / "a")
    assert "cls/predictions/output_bias" in first and "bert/pooler/dense/kernel" in first
    assert first["cls/seq_relationship/output_weights"].shape == (2, 64)
    assert first["bert/encoder/layer_1/attention/self/query/kernel"].shape == (64, 64)

    convert(str(tmp_path / "a"), str(tmp_path / "k"), "keras")
    convert(str(tmp_path / "k"), str(tmp_path / "b"), "google")
    second = _tf1_variables(tmp_path / "b")
    assert sorted(first) == sorted(second)
    for name, value in first.items():
        assert value.dtype == second[name].dtype == np.float32
        np.testing.assert_array_equal(value, second[name], err_msg=name)
    with open(tmp_path / "a" / "bert_config.json") as f1, open(tmp_path / "b" / "bert_config.json") as f2:
        assert json.load(f1) == json.load(f2)


def test_google_checkpoint_written_by_tf1_saver_round_trips(minilm_dir, tmp_path):
    write_tf1_checkpoint_like_google(minilm_dir, str(tmp_path / "g"))
    original = {k: v for k, v in _tf1_variables(tmp_path / "g").items()
                if k != "global_step" and not k.endswith("adam_m")}
    encoder = BertEncoder.from_pretrained(str(tmp_path / "g"))  # global_step and adam_m are tolerated
    save_checkpoint(encoder, str(tmp_path / "g2"), "google")
    again = _tf1_variables(tmp_path / "g2")
    assert sorted(original) == sorted(again)
    for name, value in original.items():
        np.testing.assert_array_equal(value, again[name], err_msg=name)


def test_hf_keras_hf_round_trip_is_exact(minilm_dir, tmp_path):
    original = load_file(os.path.join(minilm_dir, "model.safetensors"))
    convert(minilm_dir, str(tmp_path / "k"), "keras")
    convert(str(tmp_path / "k"), str(tmp_path / "h"), "hf")
    written = load_file(str(tmp_path / "h" / "model.safetensors"))
    expected = {k: v for k, v in original.items() if not k.endswith("position_ids")}
    assert sorted(written) == sorted(expected)
    for key, value in expected.items():
        np.testing.assert_array_equal(value, written[key], err_msg=key)
    with open(os.path.join(minilm_dir, "config.json")) as f:
        source_config = json.load(f)
    with open(tmp_path / "h" / "config.json") as f:
        written_config = json.load(f)
    for field in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                  "intermediate_size", "hidden_act", "max_position_embeddings",
                  "type_vocab_size", "layer_norm_eps", "initializer_range"):
        assert written_config[field] == source_config[field], field
    assert written_config["architectures"] == ["BertModel"]
    with open(tmp_path / "h" / "tokenizer_config.json") as f:
        assert json.load(f)["do_lower_case"] is True
    assert open(tmp_path / "h" / "vocab.txt").read() == open(os.path.join(minilm_dir, "vocab.txt")).read()


def test_hf_pretraining_layout_and_prefixed_keys(tiny_config, tmp_path):
    model = _tiny_pretrainer(tiny_config, seed=3)
    save_checkpoint(model, str(tmp_path / "h"), "hf")
    written = load_file(str(tmp_path / "h" / "model.safetensors"))
    assert "bert.encoder.layer.0.attention.self.query.weight" in written
    assert "cls.predictions.transform.dense.weight" in written
    assert written["cls.seq_relationship.weight"].shape == (2, 64)
    # torch Linear layout: [out, in] is our kernel transposed.
    np.testing.assert_array_equal(
        written["bert.encoder.layer.0.intermediate.dense.weight"],
        model.encoder.transformer_layers[0].intermediate.kernel.numpy().T)
    reloaded = BertPretrainer.from_pretrained(str(tmp_path / "h"))
    inputs = dict(random_inputs(vocab_size=97), masked_lm_positions=np.array([[1, 2]] * 3, np.int32))
    np.testing.assert_array_equal(np.asarray(model(inputs)["mlm_logits"]),
                                  np.asarray(reloaded(inputs)["mlm_logits"]))


def test_keras_format_round_trip_and_detection(tiny_config, tmp_path):
    model = _tiny_pretrainer(tiny_config, seed=5)
    save_checkpoint(model, str(tmp_path / "k"), "keras")
    assert detect_format(str(tmp_path / "k")) == "keras"
    reloaded = model_of_checkpoint(str(tmp_path / "k"))
    assert isinstance(reloaded, BertPretrainer)
    inputs = random_inputs(vocab_size=97)
    with_positions = dict(inputs, masked_lm_positions=np.array([[1, 4]] * 3, np.int32))
    np.testing.assert_array_equal(np.asarray(model(with_positions)["mlm_logits"]),
                                  np.asarray(reloaded(with_positions)["mlm_logits"]))
    np.testing.assert_array_equal(
        np.asarray(model.encoder(inputs)["sequence_output"]),
        np.asarray(BertEncoder.from_pretrained(str(tmp_path / "k"))(inputs)["sequence_output"]))


def test_encoder_only_checkpoint_leaves_heads_fresh_with_a_warning(tiny_config, tmp_path, caplog):
    encoder = BertEncoder.from_bert_config(tiny_config)
    save_checkpoint(encoder, str(tmp_path / "g"), "google")
    pretrainer = BertPretrainer.from_pretrained(str(tmp_path / "g"))
    assert "no pretraining heads" in caplog.text
    np.testing.assert_array_equal(pretrainer.encoder.pooler.kernel.numpy(),
                                  encoder.pooler.kernel.numpy())


def test_shape_mismatch_names_variable_and_both_shapes(tiny_config, tmp_path):
    save_checkpoint(BertEncoder.from_bert_config(tiny_config), str(tmp_path / "g"), "google")
    config = json.load(open(tmp_path / "g" / "bert_config.json"))
    config["intermediate_size"] = 96
    json.dump(config, open(tmp_path / "g" / "bert_config.json", "w"))
    with pytest.raises(CheckpointMismatchError) as error:
        BertEncoder.from_pretrained(str(tmp_path / "g"))
    message = str(error.value)  # before anything is built: the config against the weights
    assert ("intermediate_size is 96 but bert/encoder/layer_0/intermediate/dense/kernel has "
            "128") in message


def test_missing_variables_are_listed_and_nothing_is_written(tiny_config, tmp_path):
    save_checkpoint(BertEncoder.from_bert_config(tiny_config), str(tmp_path / "g"), "google")
    config = json.load(open(tmp_path / "g" / "bert_config.json"))
    config["num_hidden_layers"] = 3
    json.dump(config, open(tmp_path / "g" / "bert_config.json", "w"))
    with pytest.raises(CheckpointMismatchError,
                       match="num_hidden_layers is 3 but the weights hold 2 blocks"):
        convert(str(tmp_path / "g"), str(tmp_path / "out"), "hf")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["g"], "no scratch directory left behind"


def test_convert_refuses_to_overwrite_and_cli_reports(tiny_config, tmp_path, capsys):
    save_checkpoint(BertEncoder.from_bert_config(tiny_config), str(tmp_path / "g"), "google")
    (tmp_path / "taken").mkdir()
    assert cli_main(["convert", "--to", "hf", str(tmp_path / "g"), str(tmp_path / "taken")]) == 2
    assert "already exists" in capsys.readouterr().err
    assert cli_main(["convert", "--from", "hf", "--to", "keras", str(tmp_path / "g"),
                     str(tmp_path / "k")]) == 2
    assert "looks like a 'google' checkpoint" in capsys.readouterr().err
    assert cli_main(["convert", "--to", "hf", str(tmp_path / "g"), str(tmp_path / "h")]) == 0
    assert sorted(os.listdir(tmp_path / "h")) == ["config.json", "model.safetensors"]


def test_cli_info_prints_config_parameters_and_variables(minilm_dir, capsys):
    assert cli_main(["info", "--json", minilm_dir]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "hf"
    assert info["config"]["hidden_size"] == 384 and info["config"]["hidden_act"] == "gelu_exact"
    assert info["parameters"] == 22_713_216  # all-MiniLM-L6-v2's BertModel parameter count
    assert ["embeddings.word_embeddings.weight", [30522, 384]] in info["variables"]
    assert not any(name.endswith("position_ids") for name, _ in info["variables"])


def test_unknown_directory_gives_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="is not a checkpoint directory"):
        BertEncoder.from_pretrained(str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        BertEncoder.from_pretrained(str(tmp_path / "nowhere"))


def test_hf_to_google_writes_tanh_gelu_config(minilm_dir, tmp_path):
    convert(minilm_dir, str(tmp_path / "g"), "google")
    config = BertConfig.from_json_file(str(tmp_path / "g" / "bert_config.json"))
    assert config.hidden_act == "gelu"  # Google's format has only the tanh form


@pytest.mark.parametrize("fmt", ["google", "hf", "keras"])
def test_remote_filesystem_paths_work(tiny_config, fmt):
    """gs:// goes through the same tf.io.gfile code paths as TF's in-memory ram:// filesystem."""
    model = _tiny_pretrainer(tiny_config, seed=11)
    path = f"ram://keras-bert-test/{fmt}"
    save_checkpoint(model, path, fmt)
    assert not any(".tmp-" in name for name in tf.io.gfile.listdir(path))
    reloaded = model_of_checkpoint(path)
    assert isinstance(reloaded, BertPretrainer)
    np.testing.assert_array_equal(reloaded.masked_lm.output_bias.numpy(),
                                  model.masked_lm.output_bias.numpy())
    np.testing.assert_array_equal(reloaded.encoder.pooler.kernel.numpy(),
                                  model.encoder.pooler.kernel.numpy())


@pytest.mark.parametrize("fmt", ["google", "hf", "keras"])
def test_pathlib_paths_work(tiny_config, tmp_path, fmt):
    """Every path goes through keras_bert.fileio, so a pathlib.Path works as a str does."""
    model = _tiny_pretrainer(tiny_config, seed=5)
    vocab = tmp_path / "vocab.txt"
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab.write_text("".join(f"{token}\n" for token in specials + [
        f"[unused{i}]" for i in range(tiny_config.vocab_size - len(specials))]))
    save_checkpoint(model, tmp_path / fmt, fmt, vocabulary=vocab)
    assert detect_format(tmp_path / fmt) == fmt
    assert (tmp_path / fmt / "vocab.txt").read_text() == vocab.read_text()
    reloaded = BertPretrainer.from_pretrained(tmp_path / fmt)
    np.testing.assert_array_equal(reloaded.masked_lm.output_bias.numpy(),
                                  model.masked_lm.output_bias.numpy())
    encoder = BertEncoder.from_pretrained(tmp_path / fmt)
    assert encoder.bert_config == tiny_config
