"""Checks that a WordPiece vocabulary suits pretraining data: special tokens and letter case.

A vocabulary learned from lower-cased text has no word pieces that start with an upper-case
letter; a cased one has many. Tokenizing with the wrong `do_lower_case` silently turns much of
the corpus into [UNK] (or never uses the capitalized pieces), so it is an error here.
"""

from __future__ import annotations

from collections.abc import Mapping

REQUIRED_TOKENS = ("[CLS]", "[SEP]", "[MASK]")
# A vocabulary counts as cased when at least this share of its word pieces starts upper-case
# (Google's cased BERT vocabulary: about 20%; uncased ones: none).
_CASED_SHARE = 0.01


def _is_special(token: str) -> bool:
    return token.startswith("[") and token.endswith("]")


def count_upper_case_pieces(vocab: Mapping[str, int]) -> tuple[int, int, list[str]]:
    """(word pieces starting with an upper-case letter, all word pieces, a few examples).

    Special tokens such as [CLS] or [unused0] are not word pieces; '##' is ignored.
    """
    upper, total, examples = 0, 0, []
    for token in vocab:
        if _is_special(token):
            continue
        total += 1
        piece = token[2:] if token.startswith("##") else token
        if piece[:1].isupper():
            upper += 1
            if len(examples) < 3:
                examples.append(token)
    return upper, total, examples


def check_vocab(vocab: Mapping[str, int], do_lower_case: bool, vocab_file: str) -> None:
    """Raises ValueError naming `vocab_file` if the vocabulary cannot serve pretraining data.

    Args:
        vocab: token -> id.
        do_lower_case: whether the text is lower-cased before WordPiece.
        vocab_file: the file `vocab` came from, for the message.
    """
    missing = [token for token in REQUIRED_TOKENS if token not in vocab]
    if missing:
        raise ValueError(f"vocab file {vocab_file!r} has no {', '.join(missing)} token(s); "
                         f"pretraining data needs {', '.join(REQUIRED_TOKENS)}")
    upper, total, examples = count_upper_case_pieces(vocab)
    if do_lower_case and upper >= max(1.0, _CASED_SHARE * total):
        raise ValueError(
            f"vocab file {vocab_file!r} looks cased ({upper:,} of {total:,} word pieces start "
            f"with an upper-case letter, e.g. {', '.join(examples)}) but do_lower_case is True; "
            f"pass --do_lower_case=false for a cased vocabulary, or use an uncased one")
    if not do_lower_case and upper == 0:
        raise ValueError(
            f"vocab file {vocab_file!r} looks uncased (none of its {total:,} word pieces starts "
            f"with an upper-case letter) but do_lower_case is False, so every capitalized word "
            f"would become [UNK]; pass --do_lower_case=true, or use a cased vocabulary")
