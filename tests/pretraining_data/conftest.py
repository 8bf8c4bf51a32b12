"""Shared fixtures for the pretraining-data tests: a small vocabulary and generated corpora."""

import os
import random

import pytest

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SUFFIXES = ["ing", "ed", "s"]
NUM_WORDS = 300
SMALL_VOCABULARY = (SPECIALS + [f"w{i}" for i in range(NUM_WORDS)]
                    + [f"##{s}" for s in SUFFIXES] + [".", ","])


def make_corpus(num_documents: int, seed: int, sentences=(4, 30), words=(4, 14)) -> str:
    """Text in the pretraining format: a sentence per line, blank lines between documents.

    Words are w0..w299, 15% of them with a suffix that WordPiece splits off (w7ing -> w7 ##ing).
    """
    rng = random.Random(seed)
    documents = []
    for _ in range(num_documents):
        lines = []
        for _ in range(rng.randint(*sentences)):
            sentence = []
            for _ in range(rng.randint(*words)):
                word = f"w{rng.randrange(NUM_WORDS)}"
                if rng.random() < 0.15:
                    word += rng.choice(SUFFIXES)
                sentence.append(word)
            lines.append(" ".join(sentence) + " .")
        documents.append("\n".join(lines))
    return "\n\n".join(documents) + "\n"


@pytest.fixture(scope="session")
def small_vocab_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(t + "\n" for t in SMALL_VOCABULARY), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory) -> str:
    """About 600 documents; with dupe_factor 10 a little over 10,000 instances."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(make_corpus(600, seed=1), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def real_vocab_file(minilm_dir) -> str:
    """The real uncased BERT vocabulary (30,522 tokens) of all-MiniLM-L6-v2."""
    return os.path.join(minilm_dir, "vocab.txt")
