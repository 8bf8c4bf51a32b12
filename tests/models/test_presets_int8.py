"""Presets of quantized models: an encoder or task model after ``quantize("int8")`` saves as a
preset (the same files as a float32 one) and loads back quantized through
``from_pretrained``, ``load_model`` and ``keras-bert export --tf_hub``, on the int8 path with
the same outputs; Google and Hugging Face checkpoints, which hold float32 weights, refuse it
before writing anything."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertClassifier, BertEncoder, BertPreprocessor
from keras_bert.cli import main
from keras_bert.export import saved_model_op_types
from keras_bert.layers.int8 import is_int8
from keras_bert.checkpoints.saving import save_checkpoint
from keras_bert.tasks.checkpoint_models import convert_checkpoint as convert
from keras_bert.tasks.checkpoint_models import model_of_checkpoint

TEXTS = np.array(["a fine day", "rain again, and more rain tomorrow"], object)


def tiny():
    return BertEncoder(vocab_size=30522, hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=128, max_position_embeddings=32)


def int8_matmuls(encoder, inputs) -> int:
    """How many of oneDNN's int8 matmuls the encoder's inference graph runs."""
    graph = tf.function(lambda x: encoder(x, training=False)).get_concrete_function(inputs).graph
    return sum(op.type == "_QuantizedMatMul" for op in graph.get_operations())


@pytest.fixture(scope="module")
def vocab(minilm_dir):
    return os.path.join(minilm_dir, "vocab.txt")


def test_a_quantized_encoder_preset_loads_back_quantized_with_the_same_outputs(vocab, tmp_path):
    encoder = tiny()
    save_checkpoint(encoder, str(tmp_path / "float"), vocabulary=vocab)
    encoder.quantize("int8")
    save_checkpoint(encoder, str(tmp_path / "int8"), vocabulary=vocab)
    assert sorted(os.listdir(tmp_path / "int8")) == sorted(os.listdir(tmp_path / "float"))
    for name in ("bert_config.json", "tokenizer_config.json", "vocab.txt"):
        assert ((tmp_path / "int8" / name).read_bytes()
                == (tmp_path / "float" / name).read_bytes()), name
    inputs = encoder.dummy_inputs(2, 8)
    expected = np.asarray(encoder(inputs)["sequence_output"])
    matmuls = int8_matmuls(encoder, inputs)
    assert matmuls >= 2 * 4  # per block: Q, K and V (maybe as one), and three more
    path = str(tmp_path / "int8")
    of_checkpoint = model_of_checkpoint(path)
    # A loaded int8 preset (not called yet) saves again, still int8.
    again = model_of_checkpoint(save_checkpoint(of_checkpoint, str(tmp_path / "again"),
                                                vocabulary=vocab))
    for loaded in (BertEncoder.from_pretrained(path), of_checkpoint, again):
        assert isinstance(loaded, BertEncoder) and is_int8(loaded)
        assert int8_matmuls(loaded, inputs) == matmuls
        np.testing.assert_allclose(loaded(inputs)["sequence_output"], expected, atol=1e-6)
    assert not is_int8(BertEncoder.from_pretrained(str(tmp_path / "float")))


@pytest.mark.slow
def test_a_quantized_task_preset_predicts_as_before_and_exports_an_int8_hub_encoder(vocab,
                                                                                    tmp_path,
                                                                                    capsys):
    classifier = BertClassifier(tiny(), 3, preprocessor=BertPreprocessor(vocab, seq_length=16),
                                label_names=["a", "b", "c"])
    classifier.quantize("int8")
    expected = classifier.predict(TEXTS, verbose=0)
    path = save_checkpoint(classifier, str(tmp_path / "classifier"))
    for loaded in (BertClassifier.from_pretrained(path), model_of_checkpoint(path)):
        assert is_int8(loaded) and loaded.label_names == ["a", "b", "c"]
        np.testing.assert_allclose(loaded.predict(TEXTS, verbose=0), expected, atol=1e-6)
    encoder = BertEncoder.from_pretrained(path)
    assert is_int8(encoder)
    packed = classifier.preprocessor(tf.constant(TEXTS))
    assert int8_matmuls(encoder, packed) == int8_matmuls(classifier.encoder, packed) >= 2 * 4

    out = str(tmp_path / "hub")
    assert main(["export", path, out, "--tf_hub"]) == 0
    assert f"exported a TF Hub encoder to {out}/encoder" in capsys.readouterr().out
    assert "_QuantizedMatMul" in saved_model_op_types(f"{out}/encoder")
    hub_encoder = tf.saved_model.load(f"{out}/encoder")
    np.testing.assert_allclose(hub_encoder(packed)["pooled_output"],
                               classifier.encoder(packed, training=False)["pooled_output"],
                               atol=1e-5)


def test_google_and_hugging_face_checkpoints_refuse_an_int8_model(vocab, tmp_path):
    encoder = tiny()
    encoder.quantize("int8")
    for fmt in ("google", "hf"):
        with pytest.raises(ValueError, match=f"quantized to int8, and '{fmt}' checkpoints hold "
                                             "float32 weights.*Save it as a 'keras' checkpoint"):
            save_checkpoint(encoder, str(tmp_path / fmt), fmt, vocabulary=vocab)
    preset = save_checkpoint(encoder, str(tmp_path / "preset"), vocabulary=vocab)
    with pytest.raises(ValueError, match="quantized to int8"):
        convert(preset, str(tmp_path / "converted"), "hf")
    assert sorted(os.listdir(tmp_path)) == ["preset"]
    convert(preset, str(tmp_path / "copy"), "keras")  # keras keeps int8
    assert is_int8(model_of_checkpoint(str(tmp_path / "copy")))


def test_a_pretrainer_refuses_int8_and_leaves_its_weights_float():
    # Its masked-LM head reads the word-embedding table, which int8 would store as integers.
    from keras_bert import BertPretrainer
    pretrainer = BertPretrainer(tiny())
    with pytest.raises(ValueError, match="quantize pretrainer.encoder"):
        pretrainer.quantize("int8")
    assert not is_int8(pretrainer)
    pretrainer.encoder.quantize("int8")  # the encoder alone, for inference
    assert is_int8(pretrainer.encoder)
