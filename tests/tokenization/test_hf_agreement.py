"""Agreement with Hugging Face's slow Python BertTokenizer on the real uncased vocabulary, from the
fixture that make_hf_fixture.py wrote; where Hugging Face departs from Google, Google wins."""

import json
import os

import pytest
import tensorflow as tf

from keras_bert.tokenization import BertPreprocessor, BertTokenizer

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_reference.json")

_SUPER = ["##up", "##er", "##cal", "##if", "##rag", "##ilis"]
# Text -> Google's tokens, for the sentences where Hugging Face knowingly differs.
GOOGLE_NOT_HF = {
    # HF turns words over 100 characters into [UNK]; Google's limit is 200.
    "supercalifragilistic" * 6:
        ["super", "##cal", "##if", "##rag", "##ilis", "##tics"] + (_SUPER + ["##tics"]) * 4
        + _SUPER + ["##tic"],
    # HF deletes every C* category; Google only Cc and Cf, so private-use and unassigned
    # characters stay and make their words [UNK].
    "private \ue000use and unassigned ab\u0378cd":
        ["private", "[UNK]", "and", "una", "##ssi", "##gned", "[UNK]"],
    # HF keeps special-token text whole; Google tokenizes it as text.
    "Predict the [MASK] token after [CLS].":
        ["predict", "the", "[", "mask", "]", "token", "after", "[", "cl", "##s", "]", "."],
}


@pytest.fixture(scope="module")
def records():
    with open(FIXTURE, encoding="utf-8") as f:
        return json.load(f)["records"]


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    return BertTokenizer.from_pretrained(minilm_dir)


def test_python_tokenizer_matches_hf_except_where_google_differs(records, tokenizer):
    assert len(records) >= 290
    agreed = 0
    for record in records:
        tokens = tokenizer.tokenize(record["text"])
        ids = tokenizer.convert_tokens_to_ids(tokens)
        if record["text"] in GOOGLE_NOT_HF:
            assert tokens == GOOGLE_NOT_HF[record["text"]]
            assert ids != record["ids"]
        else:
            assert ids == record["ids"], record["text"]
            agreed += 1
    assert agreed == len(records) - len(GOOGLE_NOT_HF)


def test_preprocessor_matches_the_python_tokenizer_on_the_fixture(records, tokenizer,
                                                                  minilm_dir):
    preprocessor = BertPreprocessor.from_pretrained(minilm_dir)
    texts = [record["text"] for record in records]
    got = preprocessor.tokenize(tf.constant(texts)).to_list()
    assert got == [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t)) for t in texts]
