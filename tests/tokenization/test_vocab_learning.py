"""Vocabulary learning and `keras-bert vocab`: Google's reserved layout, exact size, the same word
splitting as the tokenizer, and under 0.5% [UNK] on the learning corpus."""

import pytest

from keras_bert import cli
from keras_bert.tokenization import BertTokenizer, vocab_learning
from keras_bert.tokenization.vocab import load_vocab

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Tokenizers split words into WordPiece units, like token ##izer.",
    "Straße, café and naïve keep their accents only when cased!",
    "Numbers such as 3.14159 and 2718 appear too; so do symbols like $ and ^.",
    "ΟΔΟΣ and 中文 are here as well, with the final sigma.",
    "Learning, learned, learner and learns share the stem learn.",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("corpus")
    for part in range(2):
        lines = [f"{s} Line {i} of part {part}." for i in range(40) for s in SENTENCES]
        (directory / f"part{part}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def uncased_vocab(corpus):
    return vocab_learning.learn_vocab(str(corpus / "*.txt"), 300, num_unused=3, progress=False)


def test_count_words_uses_the_tokenizers_word_split(corpus):
    counts = vocab_learning.count_words([str(corpus / "part0.txt")], lower_case=True,
                                        progress=False)
    assert counts["the"] == 40 * 4
    assert counts["straße"] == 40 and counts["cafe"] == 40 and counts["οδος"] == 40
    # Per round: 6 line ends, "3.14159", "^.", "dog.", "##izer.", "sigma." and "learn.".
    assert counts["中"] == 40 and counts["."] == 40 * 12
    cased = vocab_learning.count_words([str(corpus / "part0.txt")], lower_case=False,
                                       progress=False)
    assert cased["The"] == 40 and cased["café"] == 40 and "cafe" not in cased


def test_learned_vocab_layout_and_size(uncased_vocab):
    assert len(uncased_vocab) == 300
    assert uncased_vocab[:8] == ["[PAD]", "[unused0]", "[unused1]", "[unused2]", "[UNK]",
                                 "[CLS]", "[SEP]", "[MASK]"]
    assert len(set(uncased_vocab)) == 300
    assert "the" in uncased_vocab and "##s" in uncased_vocab
    assert not any(t.lower() != t for t in uncased_vocab if not t.startswith("["))


def test_learned_vocab_has_few_unknowns_on_its_corpus(corpus, uncased_vocab):
    tokenizer = BertTokenizer(vocabulary=uncased_vocab)
    tokens = [t for path in sorted(corpus.glob("*.txt"))
              for line in path.read_text(encoding="utf-8").splitlines()
              for t in tokenizer.tokenize(line)]
    assert len(tokens) > 9_000
    assert tokens.count("[UNK]") / len(tokens) < 0.005


def test_small_vocab_size_is_rejected(corpus):
    with pytest.raises(ValueError, match="no room after the 5 reserved tokens"):
        vocab_learning.learn_vocab(str(corpus / "*.txt"), 5, progress=False)
    with pytest.raises(FileNotFoundError, match="no input files match"):
        vocab_learning.learn_vocab(str(corpus / "*.nothing"), 100, progress=False)


def test_cli_writes_a_cased_vocab(corpus, tmp_path, capsys):
    output = tmp_path / "vocab.txt"
    argv = ["vocab", "--input", str(corpus / "*.txt"), "--vocab_size", "400", "--output",
            str(output), "--no_do_lower_case", "--no_progress"]
    assert cli.main(argv) == 0
    assert "wrote 400 tokens (cased)" in capsys.readouterr().out
    vocab = load_vocab(str(output))
    assert len(vocab) == 400 and vocab["[PAD]"] == 0 and vocab["[UNK]"] == 1
    assert "The" in vocab
    assert [p.name for p in tmp_path.glob("vocab.txt*")] == ["vocab.txt"]  # no temporary left
    assert cli.main(argv) == 2  # Refuses to overwrite without --overwrite.
    assert "exists; pass --overwrite" in capsys.readouterr().err
