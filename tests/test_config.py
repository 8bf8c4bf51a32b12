"""BertConfig: bert_config.json and HF config.json in and out, validation, presets."""

import json

import pytest

from keras_bert import BertConfig

GOOGLE_BASE = {
    "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 512, "num_attention_heads": 12, "num_hidden_layers": 12,
    "type_vocab_size": 2, "vocab_size": 30522,
}


def test_google_json_round_trip_is_exact(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(dict(GOOGLE_BASE, some_future_field="ignored")))
    config = BertConfig.from_json_file(str(path))
    assert config == BertConfig.preset("bert_base_uncased")
    config.to_json_file(str(tmp_path / "out.json"))
    assert json.loads((tmp_path / "out.json").read_text()) == GOOGLE_BASE


@pytest.mark.parametrize("hf_act, ours, back", [
    ("gelu", "gelu_exact", "gelu"), ("gelu_new", "gelu", "gelu_new"),
    ("gelu_pytorch_tanh", "gelu", "gelu_new"), ("relu", "relu", "relu")])
def test_hf_activation_names_translate(hf_act, ours, back):
    config = BertConfig.from_hf_dict(dict(GOOGLE_BASE, hidden_act=hf_act, model_type="bert",
                                          layer_norm_eps=1e-12))
    assert config.hidden_act == ours
    assert config.to_hf_dict()["hidden_act"] == back


def test_hf_json_round_trip_keeps_layer_norm_eps(tmp_path):
    config = BertConfig.preset("L-4_H-256_A-4", layer_norm_eps=1e-7, hidden_act="gelu_exact")
    config.to_hf_json_file(str(tmp_path / "config.json"))
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["hidden_act"] == "gelu" and written["layer_norm_eps"] == 1e-7
    assert BertConfig.from_hf_json_file(str(tmp_path / "config.json")) == config


@pytest.mark.parametrize("overrides, message", [
    ({"hidden_size": 100, "num_attention_heads": 12}, "not divisible by num_attention_heads=12"),
    ({"vocab_size": 0}, "vocab_size must be a positive integer"),
    ({"num_hidden_layers": -1}, "num_hidden_layers must be a positive integer"),
    ({"hidden_act": "gelu_fastest"}, "unknown hidden_act 'gelu_fastest'"),
    ({"hidden_dropout_prob": 1.5}, r"hidden_dropout_prob must be in \[0, 1\)"),
])
def test_validation_errors_say_what_is_wrong(overrides, message):
    with pytest.raises(ValueError, match=message):
        BertConfig(**overrides)


def test_invalid_file_names_the_path(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(dict(GOOGLE_BASE, num_attention_heads=7)))
    with pytest.raises(ValueError, match=f"{path}.*hidden_size=768 is not divisible"):
        BertConfig.from_json_file(str(path))
    path.write_text("{not json")
    with pytest.raises(ValueError, match="is not valid JSON"):
        BertConfig.from_json_file(str(path))
    with pytest.raises(FileNotFoundError):
        BertConfig.from_json_file(str(tmp_path / "missing.json"))


def test_hf_non_bert_model_is_rejected():
    with pytest.raises(ValueError, match="model_type is 'roberta'"):
        BertConfig.from_hf_dict(dict(GOOGLE_BASE, model_type="roberta"))


def test_presets_cover_base_large_and_googles_24_small_berts():
    names = BertConfig.presets()
    small = [n for n in names if n.startswith("L-")]
    assert len(small) == 24
    assert {"L-2_H-128_A-2", "L-4_H-256_A-4", "L-8_H-512_A-8", "L-12_H-768_A-12"} <= set(small)
    tiny = BertConfig.preset("L-2_H-128_A-2")
    assert (tiny.num_hidden_layers, tiny.hidden_size, tiny.num_attention_heads,
            tiny.intermediate_size) == (2, 128, 2, 512)
    large = BertConfig.preset("bert_large_cased")
    assert (large.num_hidden_layers, large.hidden_size, large.num_attention_heads,
            large.intermediate_size, large.vocab_size) == (24, 1024, 16, 4096, 28996)
    base_uncased, base_cased = BertConfig.preset("bert_base_uncased"), BertConfig.preset("bert_base_cased")
    assert base_uncased.vocab_size == 30522 and base_cased.vocab_size == 28996
    assert {k: v for k, v in base_uncased.to_dict().items() if k != "vocab_size"} == \
        {k: v for k, v in base_cased.to_dict().items() if k != "vocab_size"}
    with pytest.raises(ValueError, match="unknown preset 'bert_huge'"):
        BertConfig.preset("bert_huge")
