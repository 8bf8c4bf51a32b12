"""A sentence-transformers folder is read at its author's length: ``max_seq_length`` in
``sentence_bert_config.json`` is the default ``seq_length`` of every model and preprocessor
loaded from it (an explicit one still wins), and writing the folder back keeps it."""

import json
import pathlib
import shutil

import pytest

from keras_bert import BertClassifier, BertEmbedder, BertPreprocessor
from keras_bert.checkpoints.saving import save_checkpoint

HF = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "hf_heads"


@pytest.fixture()
def folder(tmp_path):
    copy = tmp_path / "st"
    shutil.copytree(HF / "sentence_transformers", copy)
    (copy / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": 40, "do_lower_case": False}))
    return copy


def test_the_authors_length_is_the_default_and_kept_on_write_back(folder, tmp_path):
    embedder = BertEmbedder.from_pretrained(folder)
    assert embedder.preprocessor.seq_length == 40
    assert BertEmbedder.from_pretrained(folder, seq_length=16).preprocessor.seq_length == 16
    assert BertClassifier.from_pretrained(folder, 2).preprocessor.seq_length == 40
    assert BertPreprocessor.from_pretrained(str(folder)).seq_length == 40
    save_checkpoint(embedder, tmp_path / "back", "hf")
    written = json.loads((tmp_path / "back" / "sentence_bert_config.json").read_text())
    assert written["max_seq_length"] == 40
    assert BertEmbedder.from_pretrained(tmp_path / "back").preprocessor.seq_length == 40


def test_a_folder_that_says_no_length_keeps_the_default_and_a_bad_one_is_refused(folder):
    # the default, within the fixture's 64 positions
    assert BertEmbedder.from_pretrained(HF / "sentence_transformers").preprocessor.seq_length \
        == min(BertEmbedder.default_seq_length, 64)
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": "long"}))
    with pytest.raises(ValueError, match="max_seq_length must be an integer"):
        BertEmbedder.from_pretrained(folder)
