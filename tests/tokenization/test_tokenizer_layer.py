"""BertTokenizerLayer on its own: the Python tokenizer's ids, its inputs, tf.data, its config
(the vocabulary named, not held) and its vocabulary as a .keras asset."""

import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert.tokenization import BertTokenizer, BertTokenizerLayer, tokenizer_layer
from tests.tokenization.hard_cases import HARD_CASES, VOCABULARY

TEXTS = ["Hello world!", "Héllo wörld — ΟΔΟΣ 中文 \x00ß", "", "a" * 300, "The [MASK] sat."]


@pytest.fixture(scope="module")
def minilm_layer(minilm_dir):
    return BertTokenizerLayer(f"{minilm_dir}/vocab.txt", lower_case=True)


def test_the_python_tokenizers_ids_on_the_hard_cases():
    texts = [case[1] for case in HARD_CASES]
    for lower in (True, False):
        layer = BertTokenizerLayer(vocabulary=VOCABULARY, lower_case=lower)
        python = BertTokenizer(vocabulary=VOCABULARY, lower_case=lower)
        assert layer(tf.constant(texts)).to_list() == [
            python.convert_tokens_to_ids(python.tokenize(t)) for t in texts]


def test_keep_special_tokens_as_the_python_tokenizer(minilm_dir):
    for keep in (True, False):
        layer = BertTokenizerLayer(f"{minilm_dir}/vocab.txt", keep_special_tokens=keep)
        python = BertTokenizer.from_pretrained(minilm_dir, keep_special_tokens=keep)
        assert layer(tf.constant(TEXTS)).to_list() == [
            python.convert_tokens_to_ids(python.tokenize(t)) for t in TEXTS]
    assert layer(tf.constant(["The [MASK] sat."])).to_list() == [[1996, 1031, 7308, 1033,
                                                                  2938, 1012]]


def test_inputs_python_numpy_column_and_tf_data(minilm_layer):
    expected = minilm_layer(tf.constant(TEXTS)).to_list()
    assert expected[0] == [7592, 2088, 999] and expected[3] == [100]
    for texts in (TEXTS, np.array(TEXTS), tf.constant([[t] for t in TEXTS])):
        assert minilm_layer(texts).to_list() == expected
    assert minilm_layer("Hello world!").to_list() == [expected[0]]
    with pytest.raises(ValueError, match=r"expected a batch of strings \[batch\] or "
                                         r"\[batch, 1\], got shape \(1, 1, 1\)"):
        minilm_layer(tf.constant([[["a"]]]))
    dataset = tf.data.Dataset.from_tensor_slices(TEXTS).batch(2).map(minilm_layer)
    assert [row for batch in dataset for row in batch.to_list()] == expected


def test_symbolic_call_gives_ragged_int32(minilm_layer):
    spec = minilm_layer(keras.Input(shape=(), dtype="string"))
    assert spec.ragged and spec.dtype == "int32" and tuple(spec.shape) == (None, None)
    assert minilm_layer.supports_jit is False


def test_the_config_names_the_vocabulary_and_does_not_hold_it(monkeypatch):
    layer = BertTokenizerLayer(vocabulary=VOCABULARY, lower_case=False,
                               keep_special_tokens=True, name="words")
    config = layer.get_config()
    assert {k: config[k] for k in ("name", "lower_case", "keep_special_tokens",
                                   "vocabulary_size", "vocabulary_sha256")} == {
        "name": "words", "lower_case": False, "keep_special_tokens": True,
        "vocabulary_size": len(VOCABULARY),
        "vocabulary_sha256": tokenizer_layer.vocabulary_fingerprint(VOCABULARY)}
    assert "vocabulary" not in config
    assert BertTokenizerLayer.from_config(config).vocabulary == VOCABULARY  # this process
    monkeypatch.setattr(tokenizer_layer, "_NAMED_VOCABULARIES", {})  # another process
    pending = BertTokenizerLayer.from_config(config)
    assert pending.get_config() == config
    for use in (lambda: pending(tf.constant(["a"])), pending.get_vocabulary):
        with pytest.raises(ValueError, match=r"words was built from a config, which names its "
                                             r"vocabulary \(66 tokens\) but does not hold it"):
            use()
    pending.set_vocabulary(VOCABULARY)
    assert pending(tf.constant(["ΣΑΣ"])).to_list() == layer(tf.constant(["ΣΑΣ"])).to_list()


def test_a_config_holding_other_tokens_than_it_names_is_refused():
    config = BertTokenizerLayer(vocabulary=VOCABULARY).get_config()
    with pytest.raises(ValueError, match="the config: the vocabulary does not match"):
        BertTokenizerLayer(**{**config, "vocabulary": VOCABULARY[:-1]})


def test_constructor_errors(tmp_path):
    with pytest.raises(ValueError, match="give exactly one of vocab_file"):
        BertTokenizerLayer()
    with pytest.raises(ValueError, match="give exactly one of vocab_file"):
        BertTokenizerLayer(str(tmp_path / "vocab.txt"), vocabulary=VOCABULARY)
    with pytest.raises(ValueError, match=r"has no \[UNK\] token"):
        BertTokenizerLayer(vocabulary=["[PAD]", "a"])


def test_the_vocabulary_is_an_asset_of_the_keras_file(tmp_path, monkeypatch):
    layer = BertTokenizerLayer(vocabulary=VOCABULARY, name="words")
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, layer(inputs))
    path = str(tmp_path / "words.keras")
    model.save(path)
    with zipfile.ZipFile(path) as archive:
        assert archive.read("assets/layers/bert_tokenizer_layer/vocab.txt").decode(
            "utf-8").splitlines() == VOCABULARY
        assert len(archive.read("config.json")) < 2000
    monkeypatch.setattr(tokenizer_layer, "_NAMED_VOCABULARIES", {})  # another process
    reloaded = keras.saving.load_model(path)
    texts = tf.constant(["Hello worlds!", "ΟΔΟΣ ß"])
    assert reloaded.get_layer("words").vocabulary == VOCABULARY
    assert reloaded(texts).to_list() == layer(texts).to_list() == [[5, 7, 64, 35], [47, 42]]


def _python_words(python, text):
    """The Python tokenizer's ids of ``text`` grouped by its word_ids."""
    tokenized = python.tokenize_with_offsets(text)
    words = [[] for _ in set(tokenized.word_ids)]
    for word, token_id in zip(tokenized.word_ids, tokenized.ids):
        words[word].append(token_id)
    return words


def test_group_words_gives_the_python_tokenizers_words():
    texts = [case[1] for case in HARD_CASES] + ["", "ab abab b", "[MASK]ab"]
    for lower, keep in ((True, False), (False, False), (True, True)):
        layer = BertTokenizerLayer(vocabulary=VOCABULARY, lower_case=lower,
                                   keep_special_tokens=keep)
        python = BertTokenizer(vocabulary=VOCABULARY, lower_case=lower, keep_special_tokens=keep)
        words = layer.group_words(layer(tf.constant(texts)))
        assert words.ragged_rank == 2 and words.dtype == tf.int32
        assert words.to_list() == [_python_words(python, t) for t in texts]
    assert words.to_list()[-2:] == [[[15], [15, 16, 17], [9]], [[4], [15]]]


def _python_byte_offsets(python, text):
    """The Python tokenizer's ids and offsets, characters turned into UTF-8 bytes."""
    result = python.tokenize_with_offsets(text)
    to_bytes = [len(text[:i].encode("utf-8")) for i in range(len(text) + 1)]
    return (result.ids, [to_bytes[start] for start, _ in result.offsets],
            [to_bytes[end] for _, end in result.offsets])


def test_tokenize_with_offsets_gives_the_python_tokenizers_offsets_in_bytes():
    texts = [case[1] for case in HARD_CASES] + TEXTS + ["é" * 250 + " ab", "ab " + "a" * 201]
    for lower, keep in ((True, False), (False, False), (True, True), (False, True)):
        layer = BertTokenizerLayer(vocabulary=VOCABULARY, lower_case=lower,
                                   keep_special_tokens=keep)
        python = BertTokenizer(vocabulary=VOCABULARY, lower_case=lower, keep_special_tokens=keep)
        ids, starts, limits = layer.tokenize_with_offsets(tf.constant(texts))
        assert (ids.dtype, starts.dtype, limits.dtype) == (tf.int32, tf.int64, tf.int64)
        assert list(zip(ids.to_list(), starts.to_list(), limits.to_list())) == [
            _python_byte_offsets(python, text) for text in texts], (lower, keep)
    # [UNK] for a word too long to look up covers the whole word: 250 two-byte characters.
    assert (starts[-2].numpy()[0], limits[-2].numpy()[0]) == (0, 500)
