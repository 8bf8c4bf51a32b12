"""Hugging Face tokenizer files: the vocabulary read from a transformers-5 tokenizer.json gives
our tokenizer the ids transformers gave (tests/fixtures/hf_heads/, make_hf_fixtures.py); the
files we write give, through transformers 5.23's AutoTokenizer, our ids except on the known
departures (hf_tokenizer_files_reference.json, make_hf_tokenizer_files_fixture.py); bad files
fail with the file and field named."""

import doctest
import json
import logging
import pathlib
import re
import unicodedata

import numpy as np
import pytest

from keras_bert.tokenization import BertTokenizer, hf_tokenizer_files
from keras_bert.tokenization.basic import basic_tokenize
from keras_bert.tokenization.hf_tokenizer_files import (read_tokenizer_json,
                                                        write_hf_tokenizer_files)
from keras_bert.tokenization.vocab import read_vocab_tokens
from tests.tokenization.make_hf_tokenizer_files_fixture import cased_vocabulary

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "hf_heads"
MODEL_FOLDERS = sorted(p.name for p in FIXTURES.iterdir() if (p / "tokenizer.json").exists())
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Written vs transformers' own tokenizer.json: the two fields where ours says what Google does.
OURS_NOT_TRANSFORMERS = {("normalizer", "strip_accents"): (True, None),
                         ("model", "max_input_chars_per_word"): (200, 100)}


def _fixture_tokenizer() -> tuple[list[str], bool | None]:
    return read_tokenizer_json(FIXTURES / "seq_cls" / "tokenizer.json")


# ---------------------------------------------------------------------------------- reading
def test_transformers_5_saves_no_vocab_txt():
    assert len(MODEL_FOLDERS) == 13
    for folder in MODEL_FOLDERS:
        assert not (FIXTURES / folder / "vocab.txt").exists()
        assert (FIXTURES / folder / "tokenizer_config.json").exists()


@pytest.mark.parametrize("folder", MODEL_FOLDERS)
def test_every_folder_has_the_vocabulary_its_config_states(folder):
    tokens, lower_case = read_tokenizer_json(FIXTURES / folder / "tokenizer.json")
    assert (tokens, lower_case) == _fixture_tokenizer()
    assert lower_case is True
    assert tokens[:5] == SPECIALS and "##believ" in tokens
    config = json.loads((FIXTURES / folder / "config.json").read_text())
    assert len(tokens) == config["vocab_size"] == 164


@pytest.mark.parametrize("folder", MODEL_FOLDERS)
def test_our_tokenizer_with_the_read_vocabulary_gives_transformers_ids(folder):
    tokens, lower_case = read_tokenizer_json(FIXTURES / folder / "tokenizer.json")
    tokenizer = BertTokenizer(vocabulary=tokens, lower_case=lower_case)
    with np.load(FIXTURES / folder / "expected.npz") as data:
        expected = {k: data[k] for k in data.files}
    batches = [p for p in ("", "pair_") if p + "texts" in expected]
    for prefix in batches:
        texts = expected[prefix + "texts"].tolist()
        pairs = expected[prefix + "text_pairs"].tolist() if prefix + "text_pairs" in expected \
            else None
        if "choices" in expected:  # multiple choice: each text with each of its choices
            choices = expected["choices"]
            texts = [t for t, row in zip(texts, choices) for _ in row]
            pairs = choices.reshape(-1).tolist()
        ours = tokenizer.encode_batch(texts, pairs)
        shape = (len(texts), -1)
        np.testing.assert_array_equal(ours["input_word_ids"],
                                      expected[prefix + "input_ids"].reshape(shape))
        np.testing.assert_array_equal(ours["input_mask"],
                                      expected[prefix + "attention_mask"].reshape(shape))
        np.testing.assert_array_equal(ours["input_type_ids"],
                                      expected[prefix + "token_type_ids"].reshape(shape))


def _write_json(path: pathlib.Path, value) -> pathlib.Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def _minimal(vocab: dict, **fields) -> dict:
    return {"model": {"type": "WordPiece", "unk_token": "[UNK]",
                      "continuing_subword_prefix": "##", "vocab": vocab}, **fields}


def test_a_bpe_tokenizer_is_refused(tmp_path):
    path = _write_json(tmp_path / "tokenizer.json", {"model": {
        "type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})
    with pytest.raises(ValueError, match=r"tokenizer.json': model.type is 'BPE'; BERT needs a "
                                         r"'WordPiece' tokenizer"):
        read_tokenizer_json(path)


@pytest.mark.parametrize("document, message", [
    (_minimal({"[UNK]": 0, "a": 2}), r"model.vocab's ids have gaps \(no token for ids \[1\]\)"),
    (_minimal({"[UNK]": 0, "a": 0}), "model.vocab gives the id 0 to both '\\[UNK\\]' and 'a'"),
    (_minimal({"[UNK]": 0, "a": "1"}), "model.vocab gives 'a' the id '1'"),
    (_minimal({}), "model.vocab must be a non-empty object"),
    (_minimal({"a": 0}), "has no \\[UNK\\] token"),
    (_minimal({"[UNK]": 0, "a": 1}, added_tokens=[{"id": 1, "content": "[MASK]"}]),
     "added_tokens gives id 1 to '\\[MASK\\]', but model.vocab gives it to 'a'"),
    (_minimal({"[UNK]": 0}, added_tokens=[{"id": 2, "content": "x"}]),
     "added_tokens has id 2 after the vocabulary's last id 0"),
    ({"model": {"type": "WordPiece", "continuing_subword_prefix": "@@", "vocab": {"[UNK]": 0}}},
     "model.continuing_subword_prefix is '@@'"),
    ({"version": "1.0"}, "has no 'model' object"),
])
def test_bad_tokenizer_json(tmp_path, document, message):
    path = _write_json(tmp_path / "tokenizer.json", document)
    with pytest.raises(ValueError, match="tokenizer.json'.*" + message):
        read_tokenizer_json(path)


def test_not_json_and_missing(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{'model': }")
    with pytest.raises(ValueError, match="tokenizer.json' is not JSON"):
        read_tokenizer_json(tmp_path / "tokenizer.json")
    with pytest.raises(FileNotFoundError, match="nothing.json' does not exist"):
        read_tokenizer_json(tmp_path / "nothing.json")


def test_added_tokens_after_the_vocabulary_extend_it(tmp_path):
    path = _write_json(tmp_path / "tokenizer.json", _minimal(
        {"[UNK]": 0, "a": 1}, added_tokens=[{"id": 0, "content": "[UNK]"},
                                            {"id": 3, "content": "<new2>"},
                                            {"id": 2, "content": "<new1>"}]))
    assert read_tokenizer_json(path) == (["[UNK]", "a", "<new1>", "<new2>"], None)


@pytest.mark.parametrize("normalizer, lower_case", [
    (None, None),
    ({"type": "BertNormalizer", "lowercase": False}, False),
    ({"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "BertNormalizer",
                                                             "lowercase": True}]}, True),
    ({"type": "Lowercase"}, None),
])
def test_the_casing_is_the_bert_normalizers(tmp_path, normalizer, lower_case):
    path = _write_json(tmp_path / "tokenizer.json",
                       _minimal({"[UNK]": 0}, normalizer=normalizer))
    assert read_tokenizer_json(path)[1] is lower_case


def test_a_normalizer_google_cannot_follow_is_warned_about(tmp_path, caplog):
    path = _write_json(tmp_path / "tokenizer.json", _minimal({"[UNK]": 0}, normalizer={
        "type": "BertNormalizer", "lowercase": True, "strip_accents": False,
        "handle_chinese_chars": False}))
    with caplog.at_level(logging.WARNING):
        assert read_tokenizer_json(path)[1] is True
    assert "strip_accents is False with lowercase True" in caplog.text
    assert "handle_chinese_chars is false" in caplog.text


# ---------------------------------------------------------------------------------- writing
@pytest.mark.parametrize("lower_case", [True, False])
def test_written_files_read_back(tmp_path, lower_case):
    tokens = _fixture_tokenizer()[0] + ["Paris", "##É"]
    write_hf_tokenizer_files(tmp_path, tokens, lower_case=lower_case, model_max_length=64)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt"]
    assert read_tokenizer_json(tmp_path / "tokenizer.json") == (tokens, lower_case)
    assert read_vocab_tokens(str(tmp_path / "vocab.txt")) == tokens
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config == {"tokenizer_class": "BertTokenizer", "do_lower_case": lower_case,
                      "strip_accents": lower_case, "tokenize_chinese_chars": True,
                      "model_max_length": 64, "unk_token": "[UNK]", "sep_token": "[SEP]",
                      "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"}
    special = json.loads((tmp_path / "special_tokens_map.json").read_text())
    assert special == {k: v for k, v in config.items() if k.endswith("_token")}


def test_written_tokenizer_json_is_what_transformers_writes_but_two_fields(tmp_path):
    tokens, _ = _fixture_tokenizer()
    write_hf_tokenizer_files(tmp_path, tokens, lower_case=True, model_max_length=64)
    ours = json.loads((tmp_path / "tokenizer.json").read_text())
    theirs = json.loads((FIXTURES / "seq_cls" / "tokenizer.json").read_text())
    for (section, field), (our_value, their_value) in OURS_NOT_TRANSFORMERS.items():
        assert (ours[section].pop(field), theirs[section].pop(field)) == (our_value, their_value)
    assert ours == theirs
    their_config = json.loads((FIXTURES / "seq_cls" / "tokenizer_config.json").read_text())
    our_config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    for key in ("tokenizer_class", "do_lower_case", "tokenize_chinese_chars", "unk_token",
                "sep_token", "pad_token", "cls_token", "mask_token"):
        assert our_config[key] == their_config[key], key


def test_docstring_example_runs():
    assert doctest.testmod(hf_tokenizer_files).failed == 0


def test_writing_needs_the_special_tokens(tmp_path):
    with pytest.raises(ValueError, match="the vocabulary has no \\[CLS\\], \\[MASK\\]"):
        write_hf_tokenizer_files(tmp_path, ["[PAD]", "[UNK]", "[SEP]", "a"], lower_case=True,
                                 model_max_length=8)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------- transformers on the files we write
@pytest.fixture(scope="module")
def reference() -> dict:
    with open(HERE / "hf_tokenizer_files_reference.json", encoding="utf-8") as f:
        return json.load(f)


SPECIAL_TEXT = re.compile(r"\[(PAD|UNK|CLS|SEP|MASK)\]")


def departure_reasons(text: str, lower_case: bool) -> set[str]:
    """Why transformers' BertTokenizer may give other ids than Google's for ``text``."""
    reasons = set()
    if SPECIAL_TEXT.search(text):
        reasons.add("special-token text kept whole")
    if any(unicodedata.category(c) in ("Co", "Cn") for c in text):
        reasons.add("private-use or unassigned character deleted")
    if any(100 < len(word) <= 200 for word in basic_tokenize(text, lower_case)):
        reasons.add("word of 101 to 200 characters is [UNK]")
    if lower_case and "\u03a3" in text:
        reasons.add("final capital sigma lower-cased to σ, not ς")
    return reasons


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_transformers_reads_our_files_as_our_tokenizer_but_known_departures(
        reference, minilm_dir, casing):
    uncased = read_vocab_tokens(str(pathlib.Path(minilm_dir) / "vocab.txt"))
    lower_case = casing == "uncased"
    tokens = uncased if lower_case else cased_vocabulary(uncased)
    assert reference["cased_words"] == 4000 and len(tokens) == (30522 if lower_case else 37129)
    tokenizer = BertTokenizer(vocabulary=tokens, lower_case=lower_case)
    keeping_specials = BertTokenizer(vocabulary=tokens, lower_case=lower_case,
                                     keep_special_tokens=True)
    agreed, seen = 0, set()
    for text, theirs in zip(reference["texts"], reference[casing], strict=True):
        ours = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
        if ours == theirs:
            agreed += 1
            continue
        reasons = departure_reasons(text, lower_case)
        assert reasons, f"transformers departs from Google on {text!r} for no known reason"
        seen |= reasons
        if reasons == {"special-token text kept whole"}:
            assert keeping_specials.convert_tokens_to_ids(keeping_specials.tokenize(text)) \
                == theirs
    assert agreed >= 300
    # every known departure shows up: none is listed without need
    assert len(seen) == (4 if lower_case else 3), seen
