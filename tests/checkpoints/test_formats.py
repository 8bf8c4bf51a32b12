"""What a checkpoint folder holds, told from its files alone (``checkpoints.formats``): the
format, and the architecture its config file states, or why it holds no BERT checkpoint."""

import json
import re

import pytest

from keras_bert.checkpoints.formats import detect_format, stored_config, stored_label_names
from keras_bert.config import BertConfig


def folder_of(tmp_path, files):
    folder = tmp_path / "model"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_a_hugging_face_folder_states_its_layers_in_config_json(tmp_path):
    config = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=5,
                        num_attention_heads=2, intermediate_size=32)
    folder = folder_of(tmp_path, {"config.json": json.dumps(config.to_hf_dict()),
                                  "model.safetensors": ""})  # the weights are not read
    assert detect_format(folder) == "hf"
    assert stored_config(folder).num_hidden_layers == 5


def test_a_google_folder_states_them_in_bert_config_json(tmp_path):
    config = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=3,
                        num_attention_heads=2, intermediate_size=32)
    folder = folder_of(tmp_path, {"bert_config.json": config.to_json_string(),
                                  "bert_model.ckpt.index": ""})
    assert detect_format(folder) == "google"
    assert stored_config(folder).num_hidden_layers == 3
    assert stored_config(folder / "bert_model.ckpt") is None  # a prefix: not a folder


@pytest.mark.parametrize("files, message", [
    ({"config.json": json.dumps({"model_type": "distilbert"}), "pytorch_model.bin": ""},
     "config.json: model_type is 'distilbert' (a distilbert model), not 'bert'; keras-bert "
     "reads BERT checkpoints only"),
    ({"config.json": "{}"}, "has config.json but no weights: expected one of model.safetensors"),
    ({"notes.txt": ""}, "is not a checkpoint directory: expected bert_config.json + "
                        "*.ckpt.index (Google TF1)"),
])
def test_a_folder_without_a_bert_checkpoint_says_what_it_holds(tmp_path, files, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        stored_config(folder_of(tmp_path, files))


def test_stored_label_names_reads_id2label_without_tensorflow(tmp_path):
    def folder(name, **config):
        path = tmp_path / name
        path.mkdir()
        (path / "config.json").write_text(json.dumps({"model_type": "bert", **config}))
        (path / "model.safetensors").write_bytes(b"")
        return path

    assert stored_label_names(folder("named", id2label={"1": "pos", "0": "neg"})) == ["neg", "pos"]
    assert stored_label_names(folder("placeholders", id2label={"0": "LABEL_0",
                                                               "1": "LABEL_1"})) is None
    assert stored_label_names(folder("regression", problem_type="regression",
                                     id2label={"0": "score"})) is None
    assert stored_label_names(folder("encoder")) is None
