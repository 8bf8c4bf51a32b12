"""Shared fixtures for the tokenization tests: the hard-case vocabulary file."""

import pytest

from tests.tokenization.hard_cases import VOCABULARY


@pytest.fixture(scope="session")
def hard_vocab_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in VOCABULARY), encoding="utf-8")
    return str(path)
