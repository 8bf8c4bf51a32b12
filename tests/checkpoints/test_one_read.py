"""A checkpoint is read once per load: every door (``from_pretrained`` on each class,
``model_of_checkpoint``, ``convert_checkpoint``, the ``convert``, ``export`` and ``info``
commands, and a whole ``finetune`` run) reads its weights file once, and ``from_checkpoint`` on
an already read checkpoint reads nothing."""

from __future__ import annotations

import collections
import json
import os
import shutil
from pathlib import Path

import pytest

from keras_bert import cli, fileio
from keras_bert.checkpoints import reading
from keras_bert.checkpoints.reading import read_checkpoint
from keras_bert.models import BertEncoder, BertPretrainer
from keras_bert.tasks.checkpoint_models import convert_checkpoint, model_of_checkpoint
from keras_bert.tasks.classification.model import BertClassifier
from keras_bert.tokenization.preprocessor import BertPreprocessor
from keras_bert.tokenization.tokenizer import BertTokenizer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HF = FIXTURES / "hf_heads"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "tf_model.h5", "model.weights.h5",
                "task.weights.h5", "model.keras")


@pytest.fixture
def reads(monkeypatch):
    """Counts, per file name, the weight files opened for reading, and the checkpoints read."""
    counts: collections.Counter = collections.Counter()
    open_file = fileio.open_file

    def counting_open(path, mode="r", *args, **kwargs):
        name = os.path.basename(os.fspath(path))
        if name in WEIGHT_FILES and "r" in mode:
            counts[name] += 1
        return open_file(path, mode, *args, **kwargs)

    def counted(function, name):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(fileio, "open_file", counting_open)
    monkeypatch.setattr(reading, "_read_weights_checkpoint",
                        counted(reading._read_weights_checkpoint, "checkpoint"))
    monkeypatch.setattr(reading, "_read_keras", counted(reading._read_keras, "checkpoint"))
    return counts


@pytest.mark.parametrize("load", [
    BertEncoder.from_pretrained, BertPretrainer.from_pretrained, BertClassifier.from_pretrained,
    model_of_checkpoint])
def test_each_door_reads_a_hugging_face_folder_once(reads, load):
    load(str(HF / "seq_cls"))
    assert reads == {"checkpoint": 1, "model.safetensors": 1}


def test_a_read_checkpoint_builds_every_class_without_reading_again(reads):
    checkpoint = read_checkpoint(str(HF / "seq_cls"))
    reads.clear()
    classifier = BertClassifier.from_checkpoint(checkpoint)
    encoder = BertEncoder.from_checkpoint(checkpoint)
    pretrainer = BertPretrainer.from_checkpoint(checkpoint)
    tokenizer = BertTokenizer.from_checkpoint(checkpoint)
    preprocessor = BertPreprocessor.from_checkpoint(checkpoint, seq_length=16)
    assert not reads
    assert classifier.num_classes == checkpoint.head.num_labels
    assert encoder.bert_config == checkpoint.config == pretrainer.encoder.bert_config
    assert list(tokenizer.vocab) == checkpoint.vocabulary
    assert list(preprocessor.vocabulary) == checkpoint.vocabulary
    assert preprocessor.lower_case == tokenizer.lower_case == checkpoint.lower_case
    # The same weights as from_pretrained's.
    again = BertEncoder.from_pretrained(str(HF / "seq_cls"))
    for ours, theirs in zip(encoder.weights, again.weights):
        assert (ours.numpy() == theirs.numpy()).all(), ours.path


def test_convert_reads_its_source_once(reads, tmp_path):
    convert_checkpoint(str(HF / "seq_cls"), str(tmp_path / "google"), "google")
    assert reads == {"checkpoint": 1, "model.safetensors": 1}
    reads.clear()
    assert cli.main(["convert", str(tmp_path / "google"), str(tmp_path / "hf"),
                     "--to", "hf"]) == 0
    assert reads == {"checkpoint": 1}  # a Google checkpoint: its variables through TensorFlow
    assert (tmp_path / "hf" / "model.safetensors").exists()


def test_info_and_export_read_their_checkpoint_once(reads, tmp_path, capsys):
    folder = tmp_path / "encoder"
    shutil.copytree(HF / "bert_model", folder)
    assert cli.main(["info", str(folder), "--json"]) == 0
    assert reads == {"checkpoint": 1, "model.safetensors": 1}
    reads.clear()
    # An encoder without a preprocessor of its own: export builds one from the same read.
    assert cli.main(["export", str(folder), str(tmp_path / "models"), "--model_name", "m",
                     "--seq_length", "16"]) == 0
    assert reads == {"checkpoint": 1, "model.safetensors": 1}
    assert (tmp_path / "models" / "m" / "1" / "saved_model.pb").exists()


def test_a_keras_hub_presets_vocabulary_is_read_by_the_tokenizers(reads):
    """The tokenizer's door reads every format's vocabulary file, keras-hub's included, as
    read_checkpoint does."""
    preset = str(FIXTURES / "keras_hub" / "bert_backbone")
    checkpoint = read_checkpoint(preset)
    tokenizer = BertTokenizer.from_pretrained(preset)
    assert list(tokenizer.vocab) == checkpoint.vocabulary
    assert tokenizer.lower_case == checkpoint.lower_case
    preprocessor = BertPreprocessor.from_pretrained(preset, seq_length=16)
    assert list(preprocessor.vocabulary) == checkpoint.vocabulary


def test_finetune_reads_its_checkpoint_once(reads, tmp_path, monkeypatch):
    """`keras-bert finetune` on a sentence-transformers folder: its weights file and
    sentence_bert_config.json (the length it is read at) once each, for the whole run."""
    from keras_bert.tokenization import pretrained_vocab
    read_json = pretrained_vocab.pretrained_seq_length

    def counting(path):
        reads["sentence_bert_config.json"] += 1
        return read_json(path)
    monkeypatch.setattr(pretrained_vocab, "pretrained_seq_length", counting)
    monkeypatch.setattr(reading, "pretrained_seq_length", counting)
    folder = tmp_path / "sentence_transformers"
    shutil.copytree(HF / "sentence_transformers", folder)
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 32}')
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"a good film {i},pos\na bad film {i},neg\n"
                                             for i in range(4)), encoding="utf-8")
    assert cli.main(["finetune", "--task", "classification", "--init_checkpoint",
                     str(folder), "--train_file", str(train),
                     "--output_dir", str(tmp_path / "out"), "--epochs", "1",
                     "--batch_size", "8", "--no_progress"]) == 0
    assert reads == {"checkpoint": 1, "model.safetensors": 1, "sentence_bert_config.json": 1}
    results = json.loads((tmp_path / "out" / "eval_results.json").read_text())
    assert results["options"]["seq_length"] == 32  # the length the folder says
