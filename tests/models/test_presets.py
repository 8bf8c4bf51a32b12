"""Presets: a directory with weights loads them; a named architecture is a new encoder
(``from_architecture``, random weights); every model saves as a preset and loads back whole."""

import os

import numpy as np
import pytest

from keras_bert import BertClassifier, BertEncoder, BertPreprocessor, BertPretrainer
from keras_bert.checkpoints.saving import save_checkpoint
from keras_bert.tasks.checkpoint_models import model_of_checkpoint


def tiny():
    return BertEncoder(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)


def test_a_named_architecture_is_a_new_encoder_and_a_directory_is_pointed_to_from_pretrained(
        minilm_dir):
    encoder = BertEncoder.from_architecture("L-2_H-128_A-2")
    assert encoder.bert_config.hidden_size == 128 and encoder.bert_config.num_hidden_layers == 2
    with pytest.raises(ValueError, match=r"not a named architecture .*load a checkpoint "
                                         r"directory with BertEncoder.from_pretrained"):
        BertEncoder.from_architecture(minilm_dir)
    assert not hasattr(BertEncoder, "from_preset")  # a name that promised weights it never had


def test_every_model_saves_to_a_preset_and_loads_back_whole(minilm_dir, tmp_path):
    vocab = os.path.join(minilm_dir, "vocab.txt")
    encoder = tiny()
    inputs = encoder.dummy_inputs(2, 8)
    save_checkpoint(encoder, str(tmp_path / "encoder"), vocabulary=vocab)
    assert sorted(os.listdir(tmp_path / "encoder")) == [
        "bert_config.json", "model.keras", "tokenizer_config.json", "vocab.txt"]
    loaded = BertEncoder.from_pretrained(str(tmp_path / "encoder"))
    np.testing.assert_allclose(loaded(inputs)["pooled_output"], encoder(inputs)["pooled_output"],
                               atol=1e-6)

    pretrainer = BertPretrainer(tiny())
    save_checkpoint(pretrainer, str(tmp_path / "pretrainer"), vocabulary=vocab)
    again = BertPretrainer.from_pretrained(str(tmp_path / "pretrainer"))
    for a, b in zip(again.get_weights(), pretrainer.get_weights()):
        np.testing.assert_array_equal(a, b)

    classifier = BertClassifier(tiny(), 2, preprocessor=BertPreprocessor(vocab, seq_length=16),
                                label_names=["no", "yes"])
    texts = ["a fine day", "rain again"]
    save_checkpoint(classifier, str(tmp_path / "classifier"))
    for back in (BertClassifier.from_pretrained(str(tmp_path / "classifier")),
                 model_of_checkpoint(str(tmp_path / "classifier"))):
        assert back.label_names == ["no", "yes"]
        np.testing.assert_allclose(back.predict(texts, verbose=0),
                                   classifier.predict(texts, verbose=0), atol=1e-6)
    with pytest.raises(FileExistsError):
        save_checkpoint(classifier, str(tmp_path / "classifier"))


def test_from_pretrained_on_a_saved_task_model_refuses_other_settings(minilm_dir, tmp_path):
    """A saved task model loads as it is; an argument that would change it is an error, not
    silently dropped."""
    vocab = os.path.join(minilm_dir, "vocab.txt")
    classifier = BertClassifier(tiny(), 2, preprocessor=BertPreprocessor(vocab, seq_length=16),
                                label_names=["neg", "pos"])
    path = save_checkpoint(classifier, str(tmp_path / "classifier"))
    loaded = BertClassifier.from_pretrained(path)
    assert loaded.num_classes == 2 and loaded.preprocessor.seq_length == 16
    same = BertClassifier.from_pretrained(path, num_classes=2, seq_length=16,
                                          label_names=("neg", "pos"))
    assert same.label_names == ["neg", "pos"]
    with pytest.raises(ValueError, match=r"num_classes=3 \(the saved model has 2\)"):
        BertClassifier.from_pretrained(path, num_classes=3)
    with pytest.raises(ValueError, match=r"seq_length=128 \(the saved model has 16\)"):
        BertClassifier.from_pretrained(path, seq_length=128)
    with pytest.raises(ValueError, match=r"dropout=0.3 \(the saved model has 0.1\)"):
        BertClassifier.from_pretrained(path, dropout=0.3)
    with pytest.raises(ValueError, match="with the features \\[\\], but was asked for \\['age'\\]"):
        BertClassifier.from_pretrained(path, numeric_features=["age"])
