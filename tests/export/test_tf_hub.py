"""TF Hub's split export, used as TensorFlow's tutorials use Google's pairs: a process that cannot
import keras_bert (tests/export/tf_hub_consumer.py: tensorflow_hub, tf-keras) runs every call of the
API on the pair, and the results are compared here with keras_bert's own tokenizer and models:
ids exactly, floats within 1e-5."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.export import export_tf_hub
from keras_bert.models import BertPretrainer
from keras_bert.tokenization.preprocessor import BertPreprocessor
from keras_bert.tokenization.tokenizer import BertTokenizer
from tests.serving.exports import SEQ_LENGTH, tiny_encoder
from tests.serving.graph_mode import GraphModeModel

CONSUMER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_hub_consumer.py")
# The first text's fourth word ("fox") is the one the consumer masks.
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Héllo, wörld! Ünïcode and CJK 中文",
         "short", "A [MASK] token, tokenized as text; un-believable!!"]
FLOATS = dict(atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def exported(minilm_dir, tmp_path_factory):
    """A 2-layer BertPretrainer with BERT's uncased vocabulary, exported as a TF Hub pair."""
    preprocessor = BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), lower_case=True,
                                    seq_length=SEQ_LENGTH)
    pretrainer = BertPretrainer(tiny_encoder(len(preprocessor.vocabulary)))
    path = str(tmp_path_factory.mktemp("hub") / "bert")
    export_tf_hub(pretrainer, preprocessor, path)
    return path, pretrainer, preprocessor


def consume(hub_dir, out, mode, ids=None):
    """Runs tests/export/tf_hub_consumer.py; returns (arrays, facts)."""
    if ids is not None:
        np.savez(out + ".in.npz", **ids)
    subprocess.run([sys.executable, CONSUMER, hub_dir, out, mode, *TEXTS], check=True,
                   timeout=600, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    with open(out + ".json") as f:
        return dict(np.load(out + ".npz")), json.load(f)


@pytest.fixture(scope="module")
def consumed(exported, tmp_path_factory):
    path, _, _ = exported
    return consume(path, str(tmp_path_factory.mktemp("consumer") / "mlm"), "mlm")


def keras_outputs(model, packed):
    outputs = model.encoder(packed, training=False)
    return {"pooled": np.asarray(outputs["pooled_output"]),
            "sequence": np.asarray(outputs["sequence_output"]),
            "layers": np.stack([np.asarray(o) for o in outputs["encoder_outputs"]], 1)}


@pytest.mark.slow
def test_it_runs_on_tf_keras_without_keras_bert(consumed):
    _, facts = consumed
    assert facts["keras"].startswith("tf_keras"), facts["keras"]


@pytest.mark.slow
def test_tokenize_gives_the_wordpieces_of_each_word(exported, consumed):
    _, _, preprocessor = exported
    _, facts = consumed
    python = BertTokenizer(vocabulary=preprocessor.vocabulary, lower_case=True)
    expected = []
    for text in TEXTS:
        tokenized = python.tokenize_with_offsets(text)
        words = [[] for _ in range(max(tokenized.word_ids) + 1)]
        for word, token_id in zip(tokenized.word_ids, tokenized.ids):
            words[word].append(token_id)
        expected.append(words)
    assert facts["tokens_ragged_rank"] == 2
    assert facts["tokens"] == expected
    assert facts["tokens"][0][3] == [python.vocab["fox"]]


@pytest.mark.slow
def test_tokenize_with_offsets_gives_each_tokens_bytes(exported, consumed):
    _, _, preprocessor = exported
    _, facts = consumed
    python = BertTokenizer(vocabulary=preprocessor.vocabulary, lower_case=True)
    tokens, starts, limits = facts["tokens_with_offsets"]
    assert tokens == facts["tokens"]
    assert facts["offsets_dtypes"] == ["int32", "int64", "int64"]
    for row, text in enumerate(TEXTS):
        offsets = python.tokenize_with_offsets(text).offsets
        to_bytes = [len(text[:i].encode("utf-8")) for i in range(len(text) + 1)]
        assert [s for word in starts[row] for s in word] == [to_bytes[s] for s, _ in offsets]
        assert [e for word in limits[row] for e in word] == [to_bytes[e] for _, e in offsets]
    # "Héllo": the token "hello" spans the six bytes of the original word.
    assert (starts[1][0], limits[1][0]) == ([0], [6])
    assert facts["special_tokens_with_offsets"] == facts["special_tokens"]


@pytest.mark.slow
def test_get_special_tokens_dict(exported, consumed):
    _, _, preprocessor = exported
    _, facts = consumed
    vocab = {token: index for index, token in enumerate(preprocessor.vocabulary)}
    assert facts["special_tokens"] == {
        "vocab_size": len(vocab), "start_of_sequence_id": vocab["[CLS]"],
        "end_of_segment_id": vocab["[SEP]"], "padding_id": vocab["[PAD]"],
        "mask_id": vocab["[MASK]"]}
    assert facts["special_tokens_dtypes"] == ["int32"]


@pytest.mark.slow
def test_bert_pack_inputs_packs_to_any_length(exported, consumed):
    _, _, preprocessor = exported
    arrays, facts = consumed
    flat = tf.ragged.constant([[t for word in row for t in word] for row in facts["tokens"]],
                              dtype=tf.int32)
    reverse = tf.ragged.constant([row[::-1] for row in flat.to_list()], dtype=tf.int32)
    texts = tf.constant(TEXTS)
    expected = {
        "default": preprocessor(texts),
        "single_words_omitted": preprocessor(texts),
        "single_flat_64": preprocessor.with_seq_length(64)(texts),
        "pair_words_tensor_9": preprocessor.with_seq_length(9)((texts, texts)),
        "pair_flat_keras_40": preprocessor.with_seq_length(40).pack(flat, reverse),
    }
    for name, packed in expected.items():
        for key, value in packed.items():
            np.testing.assert_array_equal(arrays[f"pack.{name}.{key}"], value,
                                          err_msg=f"{name} {key}")
    types = arrays["pack.pair_words_tensor_9.input_type_ids"]
    assert types[0].tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]  # [CLS] a a a [SEP] b b b [SEP]
    assert "seq_length leaves no room" in facts["pair_seq_length_2"]


@pytest.mark.slow
def test_encoder_outputs_equal_the_keras_models(exported, consumed):
    _, pretrainer, preprocessor = exported
    arrays, _ = consumed
    expected = keras_outputs(pretrainer, preprocessor(tf.constant(TEXTS)))
    for name in ("pooled", "sequence", "layers"):
        np.testing.assert_allclose(arrays[name], expected[name], **FLOATS, err_msg=name)
    np.testing.assert_array_equal(arrays["default"], arrays["pooled"])


@pytest.mark.slow
def test_keras_layer_trains_with_dropout_and_infers_without(exported, consumed):
    _, pretrainer, preprocessor = exported
    arrays, facts = consumed
    expected = keras_outputs(pretrainer, preprocessor(tf.constant(TEXTS)))["pooled"]
    np.testing.assert_array_equal(arrays["keras_inference_1"], arrays["keras_inference_2"])
    np.testing.assert_allclose(arrays["keras_inference_1"], expected, **FLOATS)
    # Dropout acts: each training call draws new masks.
    for a, b in (("keras_training_1", "keras_inference_1"),
                 ("keras_training_1", "keras_training_2")):
        assert np.abs(arrays[a] - arrays[b]).max() > 1e-3, (a, b)
    trainable = len(pretrainer.encoder.trainable_weights)
    assert facts["trainable_variables"] == facts["keras_layer_trainable_weights"] == trainable
    assert facts["variables_with_gradients"] == trainable
    assert facts["regularization_losses"] == facts["keras_layer_losses"] == 0


@pytest.mark.slow
def test_the_api_pages_keras_pair_model(exported, consumed):
    _, pretrainer, preprocessor = exported
    arrays, _ = consumed
    pairs = (tf.constant(TEXTS), tf.constant(TEXTS[::-1]))
    expected = keras_outputs(pretrainer, preprocessor.with_seq_length(40)(pairs))["pooled"]
    np.testing.assert_allclose(arrays["keras_pair_pooled"], expected, **FLOATS)


@pytest.mark.slow
def test_fill_the_mask_with_encoder_mlm(exported, consumed):
    _, pretrainer, preprocessor = exported
    arrays, facts = consumed
    ids = arrays["mlm_input_word_ids"]
    mask_id = preprocessor.vocabulary.index("[MASK]")
    assert ids[0, 4] == mask_id and arrays["mlm_positions"].tolist() == [[4]]  # [CLS] the quick brown
    inputs = {"input_word_ids": ids, "input_mask": (ids > 0).astype("int32"),
              "input_type_ids": np.zeros_like(ids), "masked_lm_positions": arrays["mlm_positions"]}
    logits = np.asarray(pretrainer(inputs, training=False)["mlm_logits"])
    np.testing.assert_allclose(arrays["mlm_logits"], logits, **FLOATS)
    assert facts["filled"] == preprocessor.vocabulary[int(logits[0, 0].argmax())]
    assert np.abs(arrays["mlm_training"] - arrays["mlm_logits"]).max() > 1e-3  # dropout
    assert facts["mlm_output_names"] == ["default", "encoder_outputs", "mlm_logits",
                                         "pooled_output", "sequence_output"]
    assert facts["mlm_trainable_variables"] == (len(pretrainer.encoder.trainable_weights)
                                                + len(pretrainer.masked_lm.trainable_weights))
    assert facts["mlm_keras_layer_trainable_weights"] == facts["mlm_trainable_variables"]
    np.testing.assert_allclose(arrays["mlm_keras_layer"], logits, **FLOATS)
    assert facts["mlm_regularization_losses"] == 0


@pytest.mark.slow
def test_an_encoder_export_needs_no_tensorflow_text_and_has_no_mlm(exported, tmp_path):
    _, pretrainer, preprocessor = exported
    path = str(tmp_path / "bert")
    export_tf_hub(pretrainer.encoder, preprocessor, path)
    packed = {k: np.asarray(v) for k, v in preprocessor(tf.constant(TEXTS)).items()}
    expected = keras_outputs(pretrainer, packed)
    arrays, facts = consume(path, str(tmp_path / "no-text"), "no-text", packed)
    np.testing.assert_allclose(arrays["ids_pooled"], expected["pooled"], **FLOATS)
    np.testing.assert_allclose(arrays["ids_layers"], expected["layers"], **FLOATS)
    assert not facts["encoder_has_mlm"]
    graph = GraphModeModel(os.path.join(path, "encoder")).run("serving_default", **packed)
    np.testing.assert_allclose(graph["default"], expected["pooled"], **FLOATS)
    with pytest.raises(FileExistsError):
        export_tf_hub(pretrainer.encoder, preprocessor, path)


def test_a_failed_export_leaves_nothing(exported, tmp_path, monkeypatch):
    from keras_bert.export import tf_hub
    _, pretrainer, preprocessor = exported

    def broken(*args):
        raise ValueError("disk full")
    monkeypatch.setattr(tf_hub, "PreprocessModule", broken)
    with pytest.raises(ValueError, match="disk full"):
        export_tf_hub(pretrainer.encoder, preprocessor, str(tmp_path / "bert"))
    assert os.listdir(tmp_path) == []  # no encoder without its preprocessing, no scratch


def test_only_encoders_export(exported, tmp_path):
    _, _, preprocessor = exported
    with pytest.raises(TypeError, match="exports a BertEncoder, a BertPretrainer"):
        export_tf_hub(preprocessor, preprocessor, str(tmp_path / "bert"))
