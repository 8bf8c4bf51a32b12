"""keras-hub presets: the reader maps a BertBackbone / BertTextClassifier preset that keras-hub
itself saved (tests/fixtures/keras_hub/make_keras_hub_fixtures.py) to Google's names, and our
encoder with those values gives keras-hub's outputs. No keras-hub is needed here."""

import dataclasses
import json
import os
import shutil
import unicodedata

import numpy as np
import pytest

from keras_bert import BertEncoder, BertTokenizer
from keras_bert.checkpoints.keras_hub import is_keras_hub_preset, read_keras_hub_preset
from keras_bert.checkpoints.names import encoder_weight_names

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
BACKBONE = os.path.join(FIXTURES, "keras_hub", "bert_backbone")
CLASSIFIER = os.path.join(FIXTURES, "keras_hub", "bert_text_classifier")
TOLERANCE = 1e-5


def _expected(directory):
    with np.load(os.path.join(directory, "expected.npz")) as data:
        return {k: data[k] for k in data.files}


def _encoder_outputs(preset, expected):
    encoder = BertEncoder.from_bert_config(preset.config)
    weights = encoder_weight_names(encoder)
    assert {w.google for w in weights} == set(preset.values), "every value has a weight"
    for weight in weights:
        weight.variable.assign(preset.values[weight.google])
    outputs = encoder({"input_word_ids": expected["token_ids"],
                       "input_mask": expected["padding_mask"].astype(np.int32),
                       "input_type_ids": expected["segment_ids"]})
    return np.asarray(outputs["sequence_output"]), np.asarray(outputs["pooled_output"])


def test_backbone_config_is_bert_in_googles_terms():
    preset = read_keras_hub_preset(BACKBONE)
    config = preset.config
    assert (config.vocab_size, config.hidden_size, config.num_hidden_layers,
            config.num_attention_heads, config.intermediate_size,
            config.max_position_embeddings, config.type_vocab_size) == (152, 32, 2, 2, 64, 64, 2)
    assert config.hidden_act == "gelu"  # keras-hub's gelu_approximate: the tanh form
    assert config.layer_norm_eps == 1e-12
    assert preset.task_class is None and preset.head is None
    assert preset.values["bert/encoder/layer_1/attention/self/query/kernel"].shape == (32, 32)
    assert preset.values["bert/encoder/layer_0/attention/output/dense/kernel"].shape == (32, 32)
    assert all(v.dtype == np.float32 for v in preset.values.values())
    with open(os.path.join(FIXTURES, "tiny_vocab.txt"), encoding="utf-8") as f:
        assert preset.vocabulary == f.read().splitlines()
    assert preset.lower_case is True and preset.strip_accents is False


def test_our_encoder_gives_keras_hubs_backbone_outputs():
    expected = _expected(BACKBONE)
    sequence, pooled = _encoder_outputs(read_keras_hub_preset(BACKBONE), expected)
    np.testing.assert_allclose(sequence, expected["sequence_output"], atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(pooled, expected["pooled_output"], atol=TOLERANCE, rtol=0)
    assert not expected["padding_mask"].all(), "the batch has padding"
    assert expected["segment_ids"].any(), "the batch has pairs"


@pytest.mark.parametrize("change", [{"hidden_act": "gelu_exact"}, {"layer_norm_eps": 1e-5}])
def test_the_tanh_gelu_and_epsilon_1e_12_are_what_keras_hub_computes(change):
    # Guards the two facts the reader takes from keras-hub's code, not its config: with the erf
    # GELU or Keras' default epsilon the outputs miss by far more than the tolerance.
    preset = read_keras_hub_preset(BACKBONE)
    preset.config = dataclasses.replace(preset.config, **change)
    expected = _expected(BACKBONE)
    sequence, _ = _encoder_outputs(preset, expected)
    assert np.abs(sequence - expected["sequence_output"]).max() > 10 * TOLERANCE


def test_classifier_head_in_run_classifiers_layout_gives_keras_hubs_logits():
    preset = read_keras_hub_preset(CLASSIFIER)
    assert preset.task_class == "BertTextClassifier"
    head = preset.head
    assert head["task"] == "classification" and head["num_classes"] == 3
    assert head["output_weights"].shape == (3, 32) and head["output_bias"].shape == (3,)
    assert head["activation"] is None  # saved as "linear": logits
    assert head["dropout"] == 0.1
    expected = _expected(CLASSIFIER)
    _, pooled = _encoder_outputs(preset, expected)
    logits = pooled @ head["output_weights"].T + head["output_bias"]
    np.testing.assert_allclose(logits, expected["logits"], atol=TOLERANCE, rtol=0)
    assert np.ptp(expected["logits"], axis=0).min() > 100 * TOLERANCE, "rows differ"


def test_classifier_preset_shares_the_backbone_values():
    backbone, classifier = read_keras_hub_preset(BACKBONE), read_keras_hub_preset(CLASSIFIER)
    assert classifier.config == backbone.config
    for name, value in backbone.values.items():
        np.testing.assert_array_equal(classifier.values[name], value)


def test_our_tokenizer_gives_keras_hubs_ids_except_for_accents():
    preset = read_keras_hub_preset(CLASSIFIER)
    expected = _expected(CLASSIFIER)
    tokenizer = BertTokenizer(vocabulary=preset.vocabulary, lower_case=preset.lower_case)
    texts, pairs = expected["text_a"].tolist(), [b or None for b in expected["text_b"].tolist()]
    packed = tokenizer.encode_batch(texts, pairs, seq_length=expected["token_ids"].shape[1])
    accented = np.array([unicodedata.normalize("NFD", t) != t for t in texts])
    assert 0 < accented.sum() < len(texts)
    same = ~accented
    np.testing.assert_array_equal(packed["input_word_ids"][same], expected["token_ids"][same])
    np.testing.assert_array_equal(packed["input_mask"][same], expected["padding_mask"][same])
    np.testing.assert_array_equal(packed["input_type_ids"][same], expected["segment_ids"][same])
    assert expected["padding_mask"][same].all(axis=1).any(), "a pair was truncated to fit"
    # keras-hub lowercases without stripping accents (strip_accents=False): "héllo" is [UNK]
    # there; Google's uncased tokenizer, ours, reads "hello".
    row = int(np.flatnonzero(accented)[0])
    assert tokenizer.convert_ids_to_tokens(packed["input_word_ids"][row][1:2]) == ["hello"]
    assert expected["token_ids"][row][1] == tokenizer.unk_id


def test_is_keras_hub_preset(tmp_path):
    assert is_keras_hub_preset(BACKBONE) and is_keras_hub_preset(CLASSIFIER)
    assert not is_keras_hub_preset(os.path.join(FIXTURES, "google_heads", "classifier"))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32}))
    assert not is_keras_hub_preset(str(tmp_path))


def _edited_copy(source, tmp_path, file_name, edit):
    directory = str(tmp_path / "preset")
    shutil.copytree(source, directory)
    path = os.path.join(directory, file_name)
    with open(path, encoding="utf-8") as f:
        content = json.load(f)
    edit(content)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(content, f)
    return directory


def test_another_architecture_is_refused_naming_config_json(tmp_path):
    directory = _edited_copy(BACKBONE, tmp_path, "config.json",
                             lambda c: c.update(class_name="DistilBertBackbone"))
    with pytest.raises(ValueError, match=r"config\.json: class_name is 'DistilBertBackbone'"):
        read_keras_hub_preset(directory)


def test_another_task_is_refused_naming_task_json(tmp_path):
    directory = _edited_copy(CLASSIFIER, tmp_path, "task.json",
                             lambda c: c.update(class_name="BertMaskedLM"))
    with pytest.raises(ValueError, match=r"task\.json: class_name is 'BertMaskedLM'"):
        read_keras_hub_preset(directory)


def test_weights_that_do_not_fit_the_config_are_refused(tmp_path):
    directory = _edited_copy(BACKBONE, tmp_path, "config.json",
                             lambda c: c["config"].update(intermediate_dim=128))
    with pytest.raises(ValueError, match=r"_feedforward_intermediate_dense/vars/0 has shape "
                                         r"\(32, 64\), but the config implies \(32, 128\)"):
        read_keras_hub_preset(directory)


def test_bfloat16_weights_are_widened_exactly(tmp_path):
    # A preset saved with dtype="bfloat16": Keras' H5IOStore writes each such weight as
    # create_dataset(data=<ml_dtypes.bfloat16 array>) with attrs["dtype"] = "bfloat16".
    import h5py
    import ml_dtypes

    directory = str(tmp_path / "preset")
    shutil.copytree(BACKBONE, directory)
    datasets = []
    with h5py.File(os.path.join(directory, "model.weights.h5"), "a") as h5:
        h5.visititems(lambda name, obj: datasets.append(name)
                      if isinstance(obj, h5py.Dataset) else None)
        for name in datasets:
            value = np.asarray(h5[name]).astype(ml_dtypes.bfloat16)
            del h5[name]
            h5.create_dataset(name, data=value).attrs["dtype"] = "bfloat16"
    original = read_keras_hub_preset(BACKBONE).values
    widened = read_keras_hub_preset(directory).values
    for name, value in original.items():
        expected = value.astype(ml_dtypes.bfloat16).astype(np.float32)
        np.testing.assert_array_equal(widened[name], expected, err_msg=name)
    assert any(not np.array_equal(widened[n], v) for n, v in original.items()), "rounded"


def test_sharded_weights_are_refused_naming_the_index(tmp_path):
    directory = str(tmp_path / "preset")
    shutil.copytree(BACKBONE, directory)
    os.rename(os.path.join(directory, "model.weights.h5"),
              os.path.join(directory, "model_00000.weights.h5"))
    with open(os.path.join(directory, "model.weights.json"), "w", encoding="utf-8") as f:
        json.dump({"metadata": {}, "weight_map": {}}, f)
    with pytest.raises(ValueError, match=r"model\.weights\.json: sharded weights"):
        read_keras_hub_preset(directory)
