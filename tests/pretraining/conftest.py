"""Fixtures of the training tests: tiny pretraining TFRecords, their vocab and model configs."""

import json

import pytest

from tests.pretraining.records import VOCAB_SIZE, write_records, write_vocab


@pytest.fixture(scope="session")
def pretraining_files(tmp_path_factory) -> dict:
    """Two files of 64 records (seq 32, 5 predictions), the vocab and a tiny bert_config.json."""
    root = tmp_path_factory.mktemp("pretraining")
    pattern = write_records(str(root / "data"))
    vocab = write_vocab(str(root / "vocab.txt"))
    configs = {}
    for dropout in (0.0, 0.1):
        path = root / f"bert_config_dropout{dropout}.json"
        path.write_text(json.dumps(dict(
            vocab_size=VOCAB_SIZE, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, hidden_act="gelu", hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout, max_position_embeddings=64,
            type_vocab_size=2, initializer_range=0.02)))
        configs[dropout] = str(path)
    return {"root": root, "pattern": pattern, "vocab": vocab, "config": configs}
