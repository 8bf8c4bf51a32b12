"""An empty second segment is a single text, as Google's run_classifier.py packs it (text_b that
is empty or tokenizes to nothing is dropped: ``[CLS] a [SEP]``, a truncated to seq_length - 2),
in the Python tokenizer and in-graph, row by row."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertPreprocessor, BertTokenizer

SEQ_LENGTH = 8
TEXTS = ["Hello world", "Hello world how are you today, my friend?", "x", "", "a b", "Hi"]
PAIRS = ["", "", " \t ", "", "c", "\x00\ufffd"]  # the last two: a real pair; control chars only


@pytest.fixture(scope="module")
def vocab(minilm_dir):
    return os.path.join(minilm_dir, "vocab.txt")


def google_single(tokenizer, text, seq_length):
    """run_classifier.convert_single_example with text_b = None, written out."""
    tokens = tokenizer.tokenize(text)[:seq_length - 2]
    ids = tokenizer.convert_tokens_to_ids(["[CLS]", *tokens, "[SEP]"])
    return ids + [0] * (seq_length - len(ids))


def test_tokenizer_drops_an_empty_second_segment(vocab):
    tokenizer = BertTokenizer(vocab, lower_case=True)
    encoded = tokenizer.encode("Hello world", "")
    assert tokenizer.convert_ids_to_tokens(encoded["input_word_ids"]) == \
        ["[CLS]", "hello", "world", "[SEP]"]
    assert encoded["input_type_ids"] == [0, 0, 0, 0]
    for text, pair in zip(TEXTS, PAIRS):
        row = tokenizer.encode(text, pair, seq_length=SEQ_LENGTH)
        if not tokenizer.tokenize(pair):
            assert row == tokenizer.encode(text, None, seq_length=SEQ_LENGTH)
            assert row["input_word_ids"] == google_single(tokenizer, text, SEQ_LENGTH)
        else:
            assert row["input_word_ids"].count(tokenizer.sep_id) == 2


def test_preprocessor_matches_the_tokenizer_row_by_row(vocab):
    tokenizer = BertTokenizer(vocab, lower_case=True)
    preprocessor = BertPreprocessor(vocab, lower_case=True, seq_length=SEQ_LENGTH)
    packed = preprocessor((tf.constant(TEXTS), tf.constant(PAIRS)))
    expected = tokenizer.encode_batch(TEXTS, PAIRS, seq_length=SEQ_LENGTH)
    for name in expected:
        np.testing.assert_array_equal(packed[name].numpy(), expected[name], err_msg=name)
    # Rows with a real second segment are still packed as pairs.
    assert packed["input_type_ids"].numpy()[4].tolist() == [0, 0, 0, 0, 1, 1, 0, 0]
