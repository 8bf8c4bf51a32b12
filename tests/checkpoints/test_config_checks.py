"""A checkpoint's config is checked against its weights before anything is built: an absurd
layer count, or sizes the weights do not have, fail at once in one line naming the checkpoint
(a config.json with num_hidden_layers: 1000000000 used to build for minutes)."""

import json
import pathlib
import shutil
import time

import pytest

from keras_bert import BertClassifier, BertEncoder
from keras_bert.checkpoints.reading import read_checkpoint
from tests.tasks.tiny_checkpoint import tiny_checkpoint

HF = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "hf_heads"


def edited_copy(tmp_path, source, name, **changes):
    folder = tmp_path / name
    shutil.copytree(source, folder)
    config_name = "config.json" if (folder / "config.json").exists() else "bert_config.json"
    config = json.loads((folder / config_name).read_text())
    config.update(changes)
    (folder / config_name).write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("changes, message", [
    ({"num_hidden_layers": 1_000_000_000}, "num_hidden_layers is 1000000000 but the weights "
                                           "hold 2 blocks"),
    ({"num_hidden_layers": 1}, "num_hidden_layers is 1 but the weights hold 2 blocks"),
    ({"vocab_size": 99}, "vocab_size x hidden_size is 99 x 32 but "
                         "embeddings.word_embeddings.weight is"),
    ({"hidden_size": 64, "num_attention_heads": 2}, "x hidden_size is"),
    ({"intermediate_size": 4096}, "intermediate_size is 4096 but"),
    ({"max_position_embeddings": 4096}, "max_position_embeddings x hidden_size is 4096 x 32"),
])
def test_a_config_that_disagrees_with_the_weights_fails_at_once(tmp_path, changes, message):
    folder = edited_copy(tmp_path, HF / "seq_cls", "bad", **changes)
    start = time.monotonic()
    with pytest.raises(ValueError, match="its config does not fit its weights") as error:
        BertClassifier.from_pretrained(folder)
    assert message in str(error.value) and str(folder) in str(error.value)
    assert time.monotonic() - start < 60  # not a build of a billion layers


def test_google_checkpoints_are_checked_too_and_good_ones_pass(tmp_path):
    good = tiny_checkpoint(str(tmp_path / "good"), "google")
    assert read_checkpoint(good).config.num_hidden_layers == 2
    bad = edited_copy(tmp_path, good, "bad", num_hidden_layers=3)
    with pytest.raises(ValueError, match="num_hidden_layers is 3 but the weights hold 2"):
        BertEncoder.from_pretrained(bad)
