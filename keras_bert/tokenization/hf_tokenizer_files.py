"""Hugging Face tokenizer files of a WordPiece vocabulary: reading the vocabulary and casing from
a ``tokenizer.json``, and writing the files that ``transformers.AutoTokenizer`` loads.

transformers 5 saves a BERT tokenizer as ``tokenizer.json`` + ``tokenizer_config.json`` only (no
vocab.txt), so a folder saved by it is read through ``read_tokenizer_json``. The files written by
``write_hf_tokenizer_files`` give, through ``AutoTokenizer.from_pretrained`` (transformers 5.23),
the ids of our ``BertTokenizer`` (Google's FullTokenizer), except where Hugging Face's tokenizer
departs from Google's whatever its files say: the literal text of a special token ("[MASK]") is
kept whole; characters of the categories Co (private use) and Cn (unassigned) are deleted (Google
keeps them, and their words become [UNK]); transformers 5's BertTokenizer makes a word of more
than 100 characters [UNK] (Google: 200, which tokenizer.json states for other readers of the file);
and a capital sigma is lower-cased to σ even at the end of a word (Python's ``lower()``, and so
Google, gives ς there).

Pure Python: no TensorFlow.

Example:
>>> import tempfile
>>> folder = tempfile.mkdtemp()
>>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "!"]
>>> write_hf_tokenizer_files(folder, tokens, lower_case=True, model_max_length=512)
>>> read_tokenizer_json(folder + "/tokenizer.json") == (tokens, True)
True
"""

from __future__ import annotations

import json
import os
import logging
from typing import Any

from keras_bert import fileio
from keras_bert.fileio import join
from keras_bert.tokenization import vocab as vocab_lib
from keras_bert.tokenization.wordpiece import MAX_CHARS_PER_WORD, SUFFIX_INDICATOR

logger = logging.getLogger(__name__)

TOKENIZER_JSON_NAME = "tokenizer.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_NAME = "special_tokens_map.json"
# transformers' names for the special tokens of a BERT tokenizer.
SPECIAL_TOKEN_ROLES = {"unk_token": vocab_lib.UNK, "sep_token": vocab_lib.SEP,
                       "pad_token": vocab_lib.PAD, "cls_token": vocab_lib.CLS,
                       "mask_token": vocab_lib.MASK}


def read_tokenizer_json(path: fileio.PathLike) -> tuple[list[str], bool | None]:
    """The WordPiece vocabulary of a Hugging Face ``tokenizer.json``, in id order, and its casing.

    Added tokens whose ids follow the model's vocabulary are appended to it (their embedding
    rows follow the vocabulary's); an added token inside it must be the same token.

    Args:
        path: the tokenizer.json, local or ``gs://``.

    Returns:
        (tokens, lower_case): ``lower_case`` is the ``lowercase`` of the ``BertNormalizer`` (the
        normalizer itself or one inside a ``Sequence``), or None when the file has none.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not JSON, its model is not WordPiece with ``##`` continuations,
            or its ids have gaps or repeats; the message names the file and the field.
    """
    path = os.fspath(path)
    if not fileio.exists(path):
        raise FileNotFoundError(f"tokenizer file {path!r} does not exist")
    with fileio.open_file(path) as f:
        try:
            document = json.load(f)
        except ValueError as error:
            raise ValueError(f"tokenizer file {path!r} is not JSON: {error}") from None
    model = document.get("model") if isinstance(document, dict) else None
    if not isinstance(model, dict):
        raise ValueError(f"tokenizer file {path!r} has no 'model' object; it is not a Hugging "
                         f"Face tokenizer.json")
    if model.get("type") != "WordPiece":
        raise ValueError(f"tokenizer file {path!r}: model.type is {model.get('type')!r}; BERT "
                         f"needs a 'WordPiece' tokenizer (keras-bert does not read BPE, Unigram "
                         f"or WordLevel vocabularies)")
    prefix = model.get("continuing_subword_prefix", SUFFIX_INDICATOR)
    if prefix != SUFFIX_INDICATOR:
        raise ValueError(f"tokenizer file {path!r}: model.continuing_subword_prefix is "
                         f"{prefix!r}; BERT's WordPiece marks continuations with "
                         f"{SUFFIX_INDICATOR!r}")
    tokens = _tokens_in_id_order(model.get("vocab"), document.get("added_tokens") or [], path)
    unk = model.get("unk_token", vocab_lib.UNK)
    if unk != vocab_lib.UNK:
        raise ValueError(f"tokenizer file {path!r}: model.unk_token is {unk!r}; keras-bert's "
                         f"WordPiece uses {vocab_lib.UNK!r}")
    vocab_lib.validate_vocab(tokens, source=path)
    return tokens, _lower_case(document.get("normalizer"), path)


def _tokens_in_id_order(vocab: Any, added_tokens: list, path: str) -> list[str]:
    if not isinstance(vocab, dict) or not vocab:
        raise ValueError(f"tokenizer file {path!r}: model.vocab must be a non-empty object of "
                         f"token -> id")
    by_id: dict[int, str] = {}
    for token, index in vocab.items():
        if not isinstance(index, int) or index < 0:
            raise ValueError(f"tokenizer file {path!r}: model.vocab gives {token!r} the id "
                             f"{index!r}; ids are integers from 0")
        if index in by_id:
            raise ValueError(f"tokenizer file {path!r}: model.vocab gives the id {index} to both "
                             f"{by_id[index]!r} and {token!r}")
        by_id[index] = token
    gaps = sorted(set(range(len(by_id))) - set(by_id))
    if gaps:
        raise ValueError(f"tokenizer file {path!r}: model.vocab's ids have gaps (no token for "
                         f"ids {gaps[:10]}{' ...' if len(gaps) > 10 else ''}); the ids must be "
                         f"0 to {len(by_id) - 1}")
    tokens = [by_id[i] for i in range(len(by_id))]
    extra = {}
    for entry in added_tokens:
        index, content = entry.get("id"), entry.get("content")
        if index is None or content is None:
            raise ValueError(f"tokenizer file {path!r}: an added_tokens entry lacks 'id' or "
                             f"'content': {entry!r}")
        if index < len(tokens):
            if tokens[index] != content:
                raise ValueError(f"tokenizer file {path!r}: added_tokens gives id {index} to "
                                 f"{content!r}, but model.vocab gives it to {tokens[index]!r}")
        else:
            extra[index] = content
    for index in sorted(extra):
        if index != len(tokens):
            raise ValueError(f"tokenizer file {path!r}: added_tokens has id {index} after the "
                             f"vocabulary's last id {len(tokens) - 1}; the ids must follow on")
        tokens.append(extra[index])
    return tokens


def _lower_case(normalizer: Any, path: str) -> bool | None:
    """The BertNormalizer's ``lowercase``; warns where Hugging Face's normalizer would not do
    what Google's tokenizer (and ours) does with that casing."""
    if isinstance(normalizer, dict) and normalizer.get("type") == "Sequence":
        found = [n for n in normalizer.get("normalizers", []) if isinstance(n, dict)
                 and n.get("type") == "BertNormalizer"]
        normalizer = found[0] if found else None
    if not isinstance(normalizer, dict) or normalizer.get("type") != "BertNormalizer":
        return None
    lower_case = normalizer.get("lowercase")
    if not isinstance(lower_case, bool):
        return None
    strip_accents = normalizer.get("strip_accents")
    if strip_accents is not None and strip_accents != lower_case:
        logger.warning("tokenizer file %r: normalizer.strip_accents is %s with lowercase %s; "
                       "keras-bert's tokenizer (Google's) strips accents exactly when it "
                       "lower-cases, so accented words may get other ids", path,
                       strip_accents, lower_case)
    if normalizer.get("handle_chinese_chars") is False:
        logger.warning("tokenizer file %r: normalizer.handle_chinese_chars is false; "
                       "keras-bert's tokenizer (Google's) always splits CJK ideographs into "
                       "words of their own", path)
    return lower_case


def write_hf_tokenizer_files(directory: fileio.PathLike, tokens: list[str], lower_case: bool,
                             model_max_length: int) -> None:
    """Writes a BERT tokenizer as Hugging Face reads it: vocab.txt, tokenizer.json,
    tokenizer_config.json and special_tokens_map.json.

    ``transformers.AutoTokenizer.from_pretrained(directory)`` then gives our ``BertTokenizer``'s
    ids (see the module docstring for the few texts where it cannot).

    Args:
        directory: the folder (created if missing), local or ``gs://``.
        tokens: the vocabulary, id 0 first; it must hold [PAD], [UNK], [CLS], [SEP] and [MASK].
        lower_case: lower-case and strip accents (an uncased model).
        model_max_length: the longest input the model takes (max_position_embeddings).
    """
    vocab = vocab_lib.validate_vocab(list(tokens), source=join(directory, vocab_lib.VOCAB_FILENAME))
    missing = [t for t in SPECIAL_TOKEN_ROLES.values() if t not in vocab]
    if missing:
        raise ValueError(f"cannot write a Hugging Face BERT tokenizer to {directory!r}: the "
                         f"vocabulary has no {', '.join(missing)}")
    fileio.makedirs(directory)
    vocab_lib.save_vocab(list(tokens), join(directory, vocab_lib.VOCAB_FILENAME))
    fileio.write_json(join(directory, TOKENIZER_JSON_NAME), _tokenizer_json(vocab, lower_case))
    fileio.write_json(join(directory, TOKENIZER_CONFIG_NAME), {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": lower_case,
        "strip_accents": lower_case,
        "tokenize_chinese_chars": True,
        "model_max_length": model_max_length,
        **SPECIAL_TOKEN_ROLES,
    })
    fileio.write_json(join(directory, SPECIAL_TOKENS_MAP_NAME), SPECIAL_TOKEN_ROLES)


def _tokenizer_json(vocab: dict[str, int], lower_case: bool) -> dict:
    """The tokenizers-library pipeline of Google's FullTokenizer over ``vocab``."""
    def special(token: str, type_id: int) -> dict:
        return {"SpecialToken": {"id": token, "type_id": type_id}}

    def sequence(name: str, type_id: int) -> dict:
        return {"Sequence": {"id": name, "type_id": type_id}}

    cls, sep = vocab_lib.CLS, vocab_lib.SEP
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": vocab[token], "content": token, "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False,
                          "special": True}
                         for token in sorted(SPECIAL_TOKEN_ROLES.values(), key=vocab.get)],
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": lower_case,
                       "lowercase": lower_case},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special(cls, 0), sequence("A", 0), special(sep, 0)],
            "pair": [special(cls, 0), sequence("A", 0), special(sep, 0), sequence("B", 1),
                     special(sep, 1)],
            "special_tokens": {token: {"id": token, "ids": [vocab[token]], "tokens": [token]}
                               for token in (cls, sep)},
        },
        "decoder": {"type": "WordPiece", "prefix": SUFFIX_INDICATOR, "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": vocab_lib.UNK,
                  "continuing_subword_prefix": SUFFIX_INDICATOR,
                  "max_input_chars_per_word": MAX_CHARS_PER_WORD, "vocab": vocab},
    }
