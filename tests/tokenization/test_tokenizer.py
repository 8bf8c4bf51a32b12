"""The pure-Python BertTokenizer: Google's behaviour on the hard cases, offsets, packing with
Google's truncation, decoding, special tokens and the real uncased vocabulary."""

import numpy as np
import pytest

from keras_bert import tokenization
from keras_bert.tokenization import BertTokenizer
from keras_bert.tokenization.packing import truncate_pair
from tests.tokenization.hard_cases import HARD_CASES, VOCABULARY


@pytest.fixture(scope="module")
def uncased(hard_vocab_file):
    return BertTokenizer(hard_vocab_file, lower_case=True)


@pytest.fixture(scope="module")
def cased(hard_vocab_file):
    return BertTokenizer(hard_vocab_file, lower_case=False)


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    return BertTokenizer.from_pretrained(minilm_dir)


@pytest.mark.parametrize("name, text, expected_uncased, expected_cased", HARD_CASES,
                         ids=[case[0] for case in HARD_CASES])
def test_hard_cases(uncased, cased, name, text, expected_uncased, expected_cased):
    assert uncased.tokenize(text) == expected_uncased
    assert cased.tokenize(text) == expected_cased
    # The offset-tracking path gives the same tokens.
    assert uncased.tokenize_with_offsets(text).tokens == expected_uncased
    assert cased.tokenize_with_offsets(text).tokens == expected_cased


def test_invalid_utf8_bytes_are_dropped(uncased):
    assert uncased.tokenize(b"hel\xfflo w\xe2\x82orld") == ["hello", "world"]
    assert uncased.tokenize("hello world".encode()) == ["hello", "world"]
    with pytest.raises(TypeError, match="expected str or bytes"):
        uncased.tokenize(5)


def test_keep_special_tokens_switch(hard_vocab_file):
    keep = BertTokenizer(hard_vocab_file, keep_special_tokens=True)
    assert keep.tokenize("a[MASK]b [CLS]") == ["a", "[MASK]", "b", "[CLS]"]
    result = keep.tokenize_with_offsets("a[MASK]b")
    assert result.offsets == [(0, 1), (1, 7), (7, 8)]
    assert result.word_ids == [0, 1, 2]
    # Only the exact spelling is special.
    assert keep.tokenize("[cls]") == ["[", "cls", "]"]


def test_vocab_and_special_ids(uncased):
    assert list(uncased.vocab) == VOCABULARY
    assert uncased.inv_vocab[5] == "hello"
    assert (uncased.pad_id, uncased.unk_id, uncased.cls_id, uncased.sep_id,
            uncased.mask_id) == (0, 1, 2, 3, 4)
    assert uncased.convert_tokens_to_ids(["hello", "##world"]) == [5, 6]
    assert uncased.convert_ids_to_tokens(np.array([7, 0])) == ["world", "[PAD]"]
    with pytest.raises(KeyError, match="'nope' is not in the vocabulary"):
        uncased.convert_tokens_to_ids(["nope"])
    with pytest.raises(KeyError, match="outside the vocabulary"):
        uncased.convert_ids_to_tokens([999])


def test_missing_special_token_is_reported():
    tokenizer = BertTokenizer(vocabulary=["[UNK]", "a"])
    with pytest.raises(ValueError, match=r"has no \[CLS\] token"):
        tokenizer.encode("a")


def test_offsets_point_back_into_the_text(minilm):
    text = "  Héllo,  Wörld!  東京 café\u200b—ok"
    result = minilm.tokenize_with_offsets(text)
    assert result.tokens == ["hello", ",", "world", "!", "東", "京", "cafe", "—", "ok"]
    assert [text[s:e] for s, e in result.offsets] == ["Héllo", ",", "Wörld", "!", "東", "京",
                                                      "café", "—", "ok"]
    assert result.word_ids == [0, 1, 2, 3, 4, 5, 6, 7, 8]
    assert result.ids == minilm.convert_tokens_to_ids(result.tokens)


def test_offsets_of_word_pieces(minilm):
    text = "Tokenization unaffable"
    result = minilm.tokenize_with_offsets(text)
    assert result.tokens == ["token", "##ization", "una", "##ffa", "##ble"]
    assert [text[s:e] for s, e in result.offsets] == ["Token", "ization", "una", "ffa", "ble"]
    assert result.word_ids == [0, 0, 1, 1, 1]


def test_offsets_of_expanding_and_deleted_characters(minilm):
    text = "İs\u00ad\u0301a"  # İ lower-cases to two characters; soft hyphen and accent vanish.
    result = minilm.tokenize_with_offsets(text)
    assert result.tokens == ["isa"]
    assert result.offsets == [(0, 5)]


def test_from_pretrained_reads_the_casing(minilm):
    assert minilm.lower_case is True
    assert minilm.vocab_size == 30522
    assert minilm.tokenize("Hello World") == ["hello", "world"]


def test_truncate_pair_matches_googles_loop():
    a, b = list(range(10)), list(range(3))
    truncate_pair(a, b, 5)
    assert (len(a), len(b)) == (3, 2)
    a, b = list(range(10)), [1]
    truncate_pair(a, b, 5)
    assert (a, b) == ([0, 1, 2, 3], [1])
    a, b = [1, 2], list(range(10))
    truncate_pair(a, b, 6)
    assert (a, b) == ([1, 2], [0, 1, 2, 3])


def test_encode_single_and_pair(minilm):
    single = minilm.encode("Hello world!")
    assert single == {"input_word_ids": [101, 7592, 2088, 999, 102],
                      "input_mask": [1, 1, 1, 1, 1], "input_type_ids": [0, 0, 0, 0, 0]}
    pair = minilm.encode("hello world", "good morning everyone", seq_length=8)
    # Google's truncation drops from the longer segment first: 2 + 3 tokens -> 2 + 3 fits 5.
    assert pair["input_word_ids"] == [101, 7592, 2088, 102, 2204, 2851, 3071, 102]
    assert pair["input_type_ids"] == [0, 0, 0, 0, 1, 1, 1, 1]
    short = minilm.encode("hello world", "good morning everyone", seq_length=7)
    assert short["input_word_ids"] == [101, 7592, 2088, 102, 2204, 2851, 102]
    padded = minilm.encode("hello", seq_length=5)
    assert padded == {"input_word_ids": [101, 7592, 102, 0, 0], "input_mask": [1, 1, 1, 0, 0],
                      "input_type_ids": [0, 0, 0, 0, 0]}
    with pytest.raises(ValueError, match="no room"):
        minilm.encode("a", "b", seq_length=2)


def test_encode_batch(minilm):
    batch = minilm.encode_batch(["hello", "hello world"], ["world", "!"])
    np.testing.assert_array_equal(batch["input_word_ids"], [[101, 7592, 102, 2088, 102, 0],
                                                            [101, 7592, 2088, 102, 999, 102]])
    np.testing.assert_array_equal(batch["input_type_ids"], [[0, 0, 0, 1, 1, 0],
                                                            [0, 0, 0, 0, 1, 1]])
    np.testing.assert_array_equal(batch["input_mask"], [[1, 1, 1, 1, 1, 0], [1] * 6])
    assert batch["input_word_ids"].dtype == np.int32
    fixed = minilm.encode_batch(["a b c d e f"], seq_length=4)
    np.testing.assert_array_equal(fixed["input_word_ids"], [[101, 1037, 1038, 102]])


def test_decode(minilm):
    ids = minilm.encode("Tokenization isn't unaffable!")["input_word_ids"]
    assert minilm.decode(ids) == "tokenization isn ' t unaffable !"
    assert minilm.decode(ids, skip_special_tokens=False).startswith("[CLS] tokenization")


def test_top_level_exports():
    import keras_bert
    assert keras_bert.BertTokenizer is tokenization.BertTokenizer
