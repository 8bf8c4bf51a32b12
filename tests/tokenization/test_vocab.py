"""Vocab files: strict reading (errors name the path and line), writing, and the casing of
checkpoint directories."""

import json

import pytest

from keras_bert.tokenization import vocab as vocab_lib
from keras_bert.tokenization.pretrained_vocab import read_pretrained_vocabulary


def write(tmp_path, text, name="vocab.txt"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return str(path)


def test_load_vocab_ids_are_line_numbers_and_lines_are_stripped(tmp_path):
    path = write(tmp_path, "[PAD]\r\n[UNK]\n  hello \n##lo\n")
    assert vocab_lib.load_vocab(path) == {"[PAD]": 0, "[UNK]": 1, "hello": 2, "##lo": 3}


def test_empty_vocab_is_rejected_with_its_path(tmp_path):
    path = write(tmp_path, "")
    with pytest.raises(ValueError, match=f"vocab file '{path}' is empty"):
        vocab_lib.load_vocab(path)


def test_duplicated_token_is_rejected_with_path_and_lines(tmp_path):
    path = write(tmp_path, "[PAD]\n[UNK]\nhello\nworld\nhello\n")
    with pytest.raises(ValueError, match=f"'{path}' line 5: token 'hello' duplicates line 3"):
        vocab_lib.load_vocab(path)


def test_blank_line_is_rejected_with_its_line(tmp_path):
    path = write(tmp_path, "[PAD]\n[UNK]\n\nhello\n")
    with pytest.raises(ValueError, match="line 3: token '' is empty"):
        vocab_lib.load_vocab(path)


def test_invalid_utf8_vocab_names_the_line(tmp_path):
    path = write(tmp_path, b"[PAD]\n[UNK]\nok\nbad\xff\n")
    with pytest.raises(ValueError, match="line 4: not valid UTF-8"):
        vocab_lib.load_vocab(path)


def test_vocab_without_unk_is_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"has no \[UNK\]"):
        vocab_lib.load_vocab(write(tmp_path, "[PAD]\nhello\n"))


def test_missing_vocab_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        vocab_lib.load_vocab(str(tmp_path / "nope.txt"))


def test_save_then_load_round_trips(tmp_path):
    tokens = ["[PAD]", "[UNK]", "straße", "中", "##ς"]
    path = str(tmp_path / "out.txt")
    vocab_lib.save_vocab(tokens, path)
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "[PAD]\n[UNK]\nstraße\n中\n##ς\n"
    assert list(vocab_lib.load_vocab(path)) == tokens


@pytest.mark.parametrize("config_name, config, dirname, expected", [
    ("tokenizer_config.json", {"do_lower_case": False}, "uncased_model", False),
    ("config.json", {"do_lower_case": True}, "cased_model", True),
    (None, None, "uncased_L-12_H-768_A-12", True),
    (None, None, "cased_L-12_H-768_A-12", False),
    (None, None, "mystery", True),
])
def test_the_casing_of_a_pretrained_folder(tmp_path, config_name, config, dirname, expected):
    directory = tmp_path / dirname
    directory.mkdir()
    write(directory, "[PAD]\n[UNK]\n")
    if config_name:
        (directory / config_name).write_text(json.dumps(config))
    assert read_pretrained_vocabulary(str(directory)) == (["[PAD]", "[UNK]"], expected)


def test_the_vocabulary_of_the_minilm_package(minilm_dir):
    tokens, lower_case = read_pretrained_vocabulary(minilm_dir)
    assert lower_case is True
    vocab = vocab_lib.validate_vocab(tokens)
    assert len(vocab) == 30522
    assert [vocab[t] for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 100, 101,
                                                                                 102, 103]
