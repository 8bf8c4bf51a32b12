"""Layer arguments renamed to BertConfig's names: configs saved under the old names still load."""

import logging

import numpy as np
import pytest

from keras_bert.layers import BertEmbeddings, BertSelfAttention, TransformerBlock

# (layer, its config as saved before the rename, {old name: new name})
SAVED_BEFORE = [
    (BertEmbeddings, dict(vocab_size=20, hidden_size=8, dropout=0.3),
     dict(dropout="hidden_dropout_prob")),
    (BertSelfAttention, dict(hidden_size=8, num_attention_heads=2, dropout=0.3),
     dict(dropout="attention_probs_dropout_prob")),
    (TransformerBlock, dict(hidden_size=8, num_attention_heads=2, intermediate_size=16,
                            hidden_dropout=0.3, attention_dropout=0.4),
     dict(hidden_dropout="hidden_dropout_prob", attention_dropout="attention_probs_dropout_prob")),
]


@pytest.mark.parametrize("layer_class,saved,renamed", SAVED_BEFORE,
                         ids=[row[0].__name__ for row in SAVED_BEFORE])
def test_a_config_saved_under_the_old_names_loads(layer_class, saved, renamed, caplog):
    with caplog.at_level(logging.WARNING, logger="keras_bert.layers.renamed_args"):
        layer = layer_class.from_config(saved)
    config = layer.get_config()
    for old, new in renamed.items():
        assert config[new] == saved[old]
        assert old not in config
        assert f"{old!r} is now called {new!r}" in caplog.text


def test_old_and_new_name_together_is_an_error():
    with pytest.raises(ValueError, match="give hidden_dropout_prob= only"):
        BertEmbeddings(20, 8, hidden_dropout_prob=0.2, dropout=0.3)


def test_rates_are_keyword_only():
    with pytest.raises(TypeError):
        TransformerBlock(8, 2, 16, "gelu", 0.1)  # the positional floats BertEncoder once passed
    block = TransformerBlock(8, 2, 16, hidden_act="relu", hidden_dropout_prob=0.0)
    hidden = np.ones((1, 3, 8), "float32")
    assert block(hidden, np.zeros((1, 1, 1, 3), "float32")).shape == (1, 3, 8)
