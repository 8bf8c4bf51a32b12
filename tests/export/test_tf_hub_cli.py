"""`keras-bert export CHECKPOINT DIR --tf_hub`: TF Hub's pair from our, Google's and Hugging
Face's checkpoints; a checkpoint with its masked-LM head (cls/*) gives the encoder ``mlm``."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the preprocessing model's ops)

from keras_bert import cli
from keras_bert.models import BertPretrainer
from keras_bert.checkpoints.saving import save_checkpoint
from tests.serving.exports import tiny_encoder
from tests.tokenization.hard_cases import VOCABULARY

IDS = {"input_word_ids": [[2, 5, 4, 7, 3, 0]], "input_mask": [[1, 1, 1, 1, 1, 0]],
       "input_type_ids": [[0] * 6]}
POSITIONS = [[2, 3]]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in VOCABULARY), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def pretrainer():
    model = BertPretrainer(tiny_encoder(len(VOCABULARY)))
    # A nonzero output bias, so a checkpoint that lost it would show in the logits.
    model.masked_lm.output_bias.assign(np.linspace(-1, 1, len(VOCABULARY)))
    return model


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["google", "hf", "keras"])
def test_a_checkpoint_with_heads_exports_the_pair_with_mlm(fmt, pretrainer, vocab_file,
                                                           tmp_path, capsys):
    checkpoint, out = str(tmp_path / fmt), str(tmp_path / "hub")
    save_checkpoint(pretrainer, checkpoint, fmt, vocabulary=vocab_file, lower_case=True)
    assert cli.main(["export", checkpoint, out, "--tf_hub", "--seq_length", "16"]) == 0
    assert f"exported a TF Hub encoder to {out}/encoder" in capsys.readouterr().out
    encoder = tf.saved_model.load(f"{out}/encoder")
    inputs = {k: tf.constant(v, tf.int32) for k, v in IDS.items()}
    positions = tf.constant(POSITIONS, tf.int32)
    logits = encoder.mlm(dict(inputs, masked_lm_positions=positions))["mlm_logits"]
    expected = pretrainer(dict(inputs, masked_lm_positions=positions), training=False)
    np.testing.assert_allclose(logits, expected["mlm_logits"], atol=1e-5, rtol=0)
    preprocess = tf.saved_model.load(f"{out}/preprocess")
    assert preprocess(tf.constant(["ab"]))["input_word_ids"].shape == (1, 16)
    assert preprocess.tokenize(tf.constant(["Hello abab"])).to_list() == [[[5], [15, 16, 17]]]


@pytest.mark.slow
def test_an_encoder_checkpoint_exports_without_mlm(pretrainer, vocab_file, tmp_path):
    checkpoint, out = str(tmp_path / "hf"), str(tmp_path / "hub")
    save_checkpoint(pretrainer.encoder, checkpoint, "hf", vocabulary=vocab_file)
    assert cli.main(["export", checkpoint, out, "--tf_hub"]) == 0
    encoder = tf.saved_model.load(f"{out}/encoder")
    assert not hasattr(encoder, "mlm")
    inputs = {k: tf.constant(v, tf.int32) for k, v in IDS.items()}
    pooled = encoder(inputs)["pooled_output"]
    expected = pretrainer.encoder(inputs, training=False)["pooled_output"]
    np.testing.assert_allclose(pooled, expected, atol=1e-5, rtol=0)


def test_serving_flags_are_refused_before_loading(tmp_path, capsys, monkeypatch):
    import keras_bert.tasks.checkpoint_models as checkpoints

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded before the flags were checked")

    monkeypatch.setattr(checkpoints, "model_of_checkpoint", no_loading)
    checkpoint = str(tmp_path)
    code = cli.main(["export", checkpoint, str(tmp_path / "hub"), "--tf_hub", "--model_name",
                     "m", "--version", "2"])
    assert code == 2
    assert "--model_name, --version do not apply to --tf_hub" in capsys.readouterr().err
    assert cli.main(["export", checkpoint, checkpoint, "--tf_hub"]) == 2
    assert "exists; export the TF Hub pair to a new directory" in capsys.readouterr().err
    assert cli.main(["export", checkpoint, str(tmp_path / "models")]) == 2
    assert "--model_name is required" in capsys.readouterr().err


@pytest.mark.slow
def test_a_saved_task_model_exports_its_encoder_and_preprocessor(pretrainer, vocab_file, tmp_path):
    from keras_bert import BertClassifier
    checkpoint = str(tmp_path / "hf")
    save_checkpoint(pretrainer.encoder, checkpoint, "hf", vocabulary=vocab_file)
    classifier = BertClassifier.from_pretrained(checkpoint, num_classes=2, seq_length=12)
    classifier.save(str(tmp_path / "classifier.keras"))
    out = str(tmp_path / "hub")
    assert cli.main(["export", str(tmp_path / "classifier.keras"), out, "--tf_hub"]) == 0
    packed = tf.saved_model.load(f"{out}/preprocess")(tf.constant(["hello abab"]))
    assert packed["input_word_ids"].shape == (1, 12)  # the classifier's own preprocessor
    pooled = tf.saved_model.load(f"{out}/encoder")(packed)["pooled_output"]
    expected = classifier.encoder(packed, training=False)["pooled_output"]
    np.testing.assert_allclose(pooled, expected, atol=1e-5, rtol=0)
