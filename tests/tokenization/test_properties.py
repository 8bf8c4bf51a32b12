"""Property tests: on random Unicode text (and random bytes) the in-graph preprocessor gives the
Python tokenizer's ids, nothing raises, offsets point into the text, and the in-graph offsets
are the Python tokenizer's."""

import unicodedata

import pytest
import tensorflow as tf
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from keras_bert.tokenization import BertPreprocessor, BertTokenizer, BertTokenizerLayer

# Characters that exercise every rule: controls, Unicode spaces, marks, sigma and its context,
# CJK, punctuation classes, expanding lower-casing, canonical reordering.
TRICKY = ("\x00\x07\x0b\x1f\x7f\x85\u200b\u00ad\ufeff\ufffd \t\n\r\u00a0\u2028\u3000"
          "\u0301\u0345\u0307\u05b0\U0001d165\U0001d16d\U0001d15f\u0e4e"
          "ΣΑσς'.·:İIıßẞ中\uf900\U0002f800ｱＡ！$^`~¡¿\u037e\u1fefé")
# Lone surrogates (Cs) are left out: they cannot be encoded as UTF-8, so no string tensor can
# hold them.
texts = st.text(alphabet=st.sampled_from(TRICKY) | st.characters(exclude_categories=["Cs"]),
                max_size=40)
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def pair(request, minilm_dir):
    tokenizer = BertTokenizer.from_pretrained(minilm_dir, lower_case=request.param)
    preprocessor = BertPreprocessor.from_pretrained(minilm_dir, lower_case=request.param)
    tokenize = tf.function(preprocessor.tokenize,
                           input_signature=[tf.TensorSpec([None], tf.string)])
    return tokenizer, tokenize


def python_ids(tokenizer, text):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))


@SETTINGS
@given(batch=st.lists(texts, min_size=1, max_size=8))
def test_graph_ids_equal_python_ids(pair, batch):
    tokenizer, tokenize = pair
    got = tokenize(tf.constant(batch, dtype=tf.string)).to_list()
    assert got == [python_ids(tokenizer, text) for text in batch]


@SETTINGS
@given(batch=st.lists(st.binary(max_size=30), min_size=1, max_size=8))
def test_random_bytes_agree_and_do_not_raise(pair, batch):
    tokenizer, tokenize = pair
    got = tokenize(tf.constant(batch, dtype=tf.string)).to_list()
    assert got == [python_ids(tokenizer, raw) for raw in batch]


@SETTINGS
@given(text=texts)
def test_offsets_cover_the_tokens(pair, text):
    tokenizer, _ = pair
    result = tokenizer.tokenize_with_offsets(text)
    assert result.tokens == tokenizer.tokenize(text)
    starts = [start for start, _ in result.offsets]
    assert starts == sorted(starts)
    assert all(0 <= start < end <= len(text) for start, end in result.offsets)
    assert result.word_ids == sorted(result.word_ids)


# Text with literal special tokens (and near misses) among the tricky characters and bytes.
SPECIAL_PIECES = ["[MASK]", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[mask]", "[MASK", "MASK]", "[",
                  "]", "Σ", " "]
special_texts = st.lists(st.sampled_from(SPECIAL_PIECES) | texts, max_size=6).map("".join)


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def keeping_pair(request, minilm_dir):
    tokenizer = BertTokenizer.from_pretrained(minilm_dir, lower_case=request.param,
                                              keep_special_tokens=True)
    preprocessor = BertPreprocessor.from_pretrained(minilm_dir, lower_case=request.param,
                                                    keep_special_tokens=True)
    tokenize = tf.function(preprocessor.tokenize,
                           input_signature=[tf.TensorSpec([None], tf.string)])
    return tokenizer, tokenize


@SETTINGS
@given(batch=st.lists(special_texts | st.binary(max_size=20).map(lambda b: b + b"[SEP]" + b),
                      min_size=1, max_size=8))
def test_keep_special_tokens_graph_ids_equal_python_ids(keeping_pair, batch):
    tokenizer, tokenize = keeping_pair
    got = tokenize(tf.constant(batch, dtype=tf.string)).to_list()
    assert got == [python_ids(tokenizer, text) for text in batch]


def python_byte_offsets(tokenizer, text):
    """The Python tokenizer's ids and offsets, characters turned into UTF-8 bytes."""
    result = tokenizer.tokenize_with_offsets(text)
    to_bytes = [0]
    for char in text:
        to_bytes.append(to_bytes[-1] + len(char.encode("utf-8")))
    return (result.ids, [to_bytes[start] for start, _ in result.offsets],
            [to_bytes[end] for _, end in result.offsets])


def reorders_spacing_marks(text):
    """Whether NFD may move a spacing mark here: two or more in one text (the one place the
    graph's offsets and the Python tokenizer's differ, see tokenize_with_offsets)."""
    return sum(unicodedata.category(c) == "Mc" and unicodedata.combining(c) > 0
               for c in text) > 1


def offsets_function(minilm_dir, lower_case, keep_special_tokens):
    layer = BertTokenizerLayer(f"{minilm_dir}/vocab.txt", lower_case,
                               keep_special_tokens=keep_special_tokens)
    return tf.function(layer.tokenize_with_offsets,
                       input_signature=[tf.TensorSpec([None], tf.string)])


@pytest.fixture(scope="module")
def offsets_pair(pair, minilm_dir):
    tokenizer, _ = pair
    return tokenizer, offsets_function(minilm_dir, tokenizer.lower_case, False)


@pytest.fixture(scope="module")
def keeping_offsets_pair(keeping_pair, minilm_dir):
    tokenizer, _ = keeping_pair
    return tokenizer, offsets_function(minilm_dir, tokenizer.lower_case, True)


def assert_graph_offsets_are_pythons(pair, batch):
    assume(not any(reorders_spacing_marks(text) for text in batch))
    tokenizer, tokenize_with_offsets = pair
    ids, starts, limits = tokenize_with_offsets(tf.constant(batch, dtype=tf.string))
    got = list(zip(ids.to_list(), starts.to_list(), limits.to_list()))
    assert got == [python_byte_offsets(tokenizer, text) for text in batch]


@SETTINGS
@given(batch=st.lists(texts, min_size=1, max_size=8))
def test_graph_offsets_equal_python_offsets(offsets_pair, batch):
    assert_graph_offsets_are_pythons(offsets_pair, batch)


@SETTINGS
@given(batch=st.lists(special_texts, min_size=1, max_size=8))
def test_keep_special_tokens_graph_offsets_equal_python_offsets(keeping_offsets_pair, batch):
    assert_graph_offsets_are_pythons(keeping_offsets_pair, batch)


@SETTINGS
@given(batch=st.lists(st.binary(max_size=30), min_size=1, max_size=8))
def test_offsets_of_random_bytes_stay_in_the_text(offsets_pair, batch):
    tokenizer, tokenize_with_offsets = offsets_pair
    ids, starts, limits = tokenize_with_offsets(tf.constant(batch, dtype=tf.string))
    assert ids.to_list() == [python_ids(tokenizer, raw) for raw in batch]
    for raw, row_starts, row_limits in zip(batch, starts.to_list(), limits.to_list()):
        assert all(0 <= s < e <= len(raw) for s, e in zip(row_starts, row_limits))
