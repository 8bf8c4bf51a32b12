"""WordPiece vocabulary files: reading them strictly, writing them, and finding the vocabulary and
casing of a Google or Hugging Face checkpoint directory.

A vocab file holds one token per line; the line number (from 0) is the token id. Files are read
through ``keras_bert.fileio`` (tf.io.gfile for remote paths) so that ``gs://`` paths work.
"""

from __future__ import annotations

import logging

from keras_bert import fileio

logger = logging.getLogger(__name__)

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
VOCAB_FILENAME = "vocab.txt"


def validate_vocab(tokens: list[str], source: str = "<vocabulary>") -> dict[str, int]:
    """Checks a token list and returns the token -> id mapping (ids in list order).

    Args:
        tokens: the tokens, id 0 first.
        source: where they came from, for error messages (a path, usually).

    Returns:
        An insertion-ordered dict token -> id.

    Raises:
        ValueError: the list is empty, or a token is empty, contains whitespace, or repeats
            (the message gives the 1-based line of each occurrence).

    >>> validate_vocab(["[PAD]", "[UNK]", "hello"])
    {'[PAD]': 0, '[UNK]': 1, 'hello': 2}
    """
    if not tokens:
        raise ValueError(f"vocab file '{source}' is empty; it must hold one token per line, "
                         f"e.g. [PAD], [UNK], [CLS], [SEP], [MASK] and the WordPiece tokens")
    vocab: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if not token or token != token.strip() or len(token.split()) != 1:
            raise ValueError(f"vocab file '{source}' line {index + 1}: token {token!r} is empty "
                             f"or contains whitespace; write exactly one token per line")
        if token in vocab:
            raise ValueError(f"vocab file '{source}' line {index + 1}: token {token!r} duplicates "
                             f"line {vocab[token] + 1}; each token must appear once, because its "
                             f"line number is its id")
        vocab[token] = index
    if UNK not in vocab:
        raise ValueError(f"vocab file '{source}' has no {UNK} token; WordPiece needs it for words "
                         f"it cannot split")
    return vocab


def read_vocab_tokens(path: str) -> list[str]:
    """Reads a vocab file (UTF-8, one token per line, surrounding whitespace stripped).

    Args:
        path: the file, local or ``gs://``.

    Returns:
        The tokens in file order; not yet validated (see ``load_vocab``).
    """
    if not fileio.exists(path):
        raise FileNotFoundError(f"vocab file '{path}' does not exist")
    with fileio.open_file(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ValueError(f"vocab file '{path}' line {line}: not valid UTF-8 ({e.reason}); "
                         f"save the vocabulary as UTF-8") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # The newline that ends the last line.
    # Google's load_vocab strips each line (this also drops Windows "\r").
    return [line.strip() for line in lines]


def load_vocab(path: str) -> dict[str, int]:
    """Reads and validates a vocab file.

    Args:
        path: the file, local or ``gs://``.

    Returns:
        An insertion-ordered dict token -> id.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is empty, not UTF-8, or has an empty or duplicated token; the
            message names the path and line.
    """
    return validate_vocab(read_vocab_tokens(path), source=path)


def save_vocab(tokens: list[str], path: str) -> None:
    """Writes tokens one per line (UTF-8), after validating them.

    The file is written under a temporary name and then renamed, so an interrupted write leaves
    no partial vocabulary at ``path``.

    Args:
        tokens: the tokens, id 0 first.
        path: the output file, local or ``gs://``.
    """
    validate_vocab(tokens, source=path)
    with fileio.atomic_write(path) as f:
        f.write("".join(token + "\n" for token in tokens))
