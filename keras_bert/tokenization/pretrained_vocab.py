"""The vocabulary and casing of a pretrained checkpoint folder: Google's ``vocab.txt``, the
``tokenizer.json`` that transformers 5 saves instead, or a keras-hub preset's tokenizer (pure
Python, no TensorFlow). Every checkpoint format's vocabulary is read here.

Example:
>>> import tempfile
>>> folder = tempfile.mkdtemp(prefix="uncased_tiny-")
>>> _ = open(folder + "/vocab.txt", "w").write("[PAD]\\n[UNK]\\n[CLS]\\n[SEP]\\nhello\\n")
>>> read_pretrained_vocabulary(folder)
(['[PAD]', '[UNK]', '[CLS]', '[SEP]', 'hello'], True)
"""

from __future__ import annotations

import json
import logging
import os

from keras_bert import fileio
from keras_bert.config import _read_json
from keras_bert.fileio import join
from keras_bert.tokenization import vocab as vocab_lib
from keras_bert.tokenization.hf_tokenizer_files import (TOKENIZER_CONFIG_NAME,
                                                        TOKENIZER_JSON_NAME, read_tokenizer_json)

logger = logging.getLogger(__name__)

CONFIG_NAMES = (TOKENIZER_CONFIG_NAME, "config.json")  # where a folder may state its casing
# A keras-hub preset's tokenizer: a Keras config (same file name as transformers' tokenizer.json,
# another content) and its vocabulary asset.
KERAS_HUB_TOKENIZER_NAME = "tokenizer.json"
KERAS_HUB_VOCABULARY_NAME = "assets/tokenizer/vocabulary.txt"
KERAS_HUB_TOKENIZER_CLASS = "BertTokenizer"
# keras-hub tokenizer settings our BertTokenizer (Google's FullTokenizer) has no way to follow.
KERAS_HUB_FIXED_SETTINGS = {"split": True, "suffix_indicator": "##", "oov_token": "[UNK]",
                            "split_on_cjk": True}


def has_pretrained_vocabulary(path: fileio.PathLike) -> bool:
    """Whether ``path`` is a vocab file or a folder with ``vocab.txt`` or ``tokenizer.json``."""
    path = os.fspath(path)
    if not fileio.isdir(path):
        return fileio.exists(path)
    return any(fileio.exists(join(path, name))
               for name in (vocab_lib.VOCAB_FILENAME, TOKENIZER_JSON_NAME,
                            KERAS_HUB_VOCABULARY_NAME))


def read_pretrained_vocabulary(path: fileio.PathLike) -> tuple[list[str], bool]:
    """The tokens (id order) and casing of a checkpoint folder or of a vocab file.

    The tokens come from ``vocab.txt``, else from a keras-hub preset's tokenizer (its
    ``assets/tokenizer/vocabulary.txt`` and the ``lowercase`` of its ``tokenizer.json``;
    ``read_keras_hub_tokenizer``), else from ``tokenizer.json`` (a WordPiece tokenizer as
    transformers saves it). Otherwise the casing comes from the first of these that states it:
    ``tokenizer_config.json``'s ``do_lower_case`` (Hugging Face), the tokenizer.json
    normalizer's ``lowercase``, ``config.json``'s ``do_lower_case``, the folder's name as
    Google names its checkpoints (``uncased_L-12_H-768_A-12``, ``cased_L-12_...``), then the
    tokens themselves (a vocabulary of at least MIN_WORDS_TO_TELL words is cased when more than
    1% of them have an upper-case letter); otherwise uncased, with a warning.

    Args:
        path: a folder (local or gs://) or a vocab file.

    Raises:
        FileNotFoundError: nothing there, or a folder with neither file (naming both).
        ValueError: an unreadable vocabulary (naming the file and the line or field).
    """
    path = os.fspath(path)
    if not fileio.exists(path):
        raise FileNotFoundError(f"'{path}' does not exist; pass a Google or Hugging Face "
                                f"checkpoint directory or a vocab file")
    directory = path if fileio.isdir(path) else (os.path.dirname(path) or ".")
    stated = None
    if not fileio.isdir(path):
        tokens = vocab_lib.read_vocab_tokens(path)
    elif fileio.exists(join(path, vocab_lib.VOCAB_FILENAME)):
        tokens = vocab_lib.read_vocab_tokens(join(path, vocab_lib.VOCAB_FILENAME))
    elif fileio.exists(join(path, KERAS_HUB_VOCABULARY_NAME)):
        tokens, lower_case, _ = read_keras_hub_tokenizer(path)
        return tokens, lower_case
    elif fileio.exists(join(path, TOKENIZER_JSON_NAME)):
        tokens, stated = read_tokenizer_json(join(path, TOKENIZER_JSON_NAME))
    else:
        raise FileNotFoundError(
            f"no {vocab_lib.VOCAB_FILENAME} or {TOKENIZER_JSON_NAME} in '{path}': the checkpoint "
            f"has no vocabulary for raw text; pass a vocab file")
    vocab_lib.validate_vocab(tokens, source=path)
    return tokens, _casing(directory, path, stated, tokens)


def read_keras_hub_tokenizer(directory: fileio.PathLike) -> tuple[list[str], bool, bool]:
    """(tokens, lowercase, strip_accents) of a keras-hub preset's BertTokenizer: the tokens of
    ``assets/tokenizer/vocabulary.txt``, the settings of ``tokenizer.json`` (a Keras config).

    Raises:
        ValueError: ``tokenizer.json`` is not a keras-hub BertTokenizer, or asks for a setting
            Google's WordPiece cannot follow (naming the file and the setting).
    """
    directory = os.fspath(directory)
    tokenizer_path = join(directory, KERAS_HUB_TOKENIZER_NAME)
    config = _read_json(tokenizer_path)
    settings = config.get("config")
    if config.get("class_name") != KERAS_HUB_TOKENIZER_CLASS or not isinstance(settings, dict):
        raise ValueError(f"{tokenizer_path}: class_name is {config.get('class_name')!r}, not "
                         f"{KERAS_HUB_TOKENIZER_CLASS!r} with a config object; keras-bert reads "
                         f"keras-hub's BERT tokenizers only")
    for name, value in KERAS_HUB_FIXED_SETTINGS.items():
        if settings.get(name, value) != value:
            raise ValueError(f"{tokenizer_path}: config.{name} is {settings[name]!r}; keras-bert's "
                             f"tokenizer (Google's WordPiece) works only with {name}={value!r}")
    tokens = vocab_lib.read_vocab_tokens(join(directory, KERAS_HUB_VOCABULARY_NAME))
    vocab_lib.validate_vocab(tokens, source=join(directory, KERAS_HUB_VOCABULARY_NAME))
    lower_case = bool(settings.get("lowercase", False))
    strip_accents = bool(settings.get("strip_accents", False))
    if lower_case and not strip_accents:
        logger.warning(
            "%s: lowercase=True with strip_accents=False: keras-hub keeps accents where Google's "
            "uncased tokenizer (keras-bert's) strips them, so texts with accents get other ids",
            tokenizer_path)
    return tokens, lower_case, strip_accents


MIN_WORDS_TO_TELL = 100  # words (non-special tokens) a vocabulary needs to show its casing


def _casing(directory: str, path: str, from_tokenizer_json: bool | None,
            tokens: list[str]) -> bool:
    stated = _stated(join(directory, TOKENIZER_CONFIG_NAME))
    for value in (stated, from_tokenizer_json, _stated(join(directory, "config.json"))):
        if value is not None:
            return value
    base = os.path.basename(os.path.normpath(directory)).lower()
    if "uncased" in base:
        return True
    if "cased" in base:
        return False
    words = [t for t in tokens if not (t.startswith("[") and t.endswith("]"))]
    if len(words) >= MIN_WORDS_TO_TELL:
        return sum(any(c.isupper() for c in t) for t in words) <= 0.01 * len(words)
    logger.warning("Could not tell the casing of '%s' (no do_lower_case in tokenizer_config.json "
                   "or config.json, no lowercase in tokenizer.json, no 'cased'/'uncased' in its "
                   "name); assuming uncased. Choose with lower_case= in Python, --do_lower_case "
                   "/ --no_do_lower_case on the command line.", path)
    return True


def _stated(config_path: str) -> bool | None:
    """``do_lower_case`` of a JSON config file, when it is there and a bool."""
    if not fileio.exists(config_path):
        return None
    with fileio.open_file(config_path) as f:
        try:
            value = json.load(f).get("do_lower_case")
        except (ValueError, AttributeError):
            return None
    return value if isinstance(value, bool) else None


SENTENCE_CONFIG_NAME = "sentence_bert_config.json"  # sentence-transformers' settings


def pretrained_seq_length(path: fileio.PathLike) -> int | None:
    """The packed length a checkpoint folder's author meant it to be read at: a
    sentence-transformers folder's ``max_seq_length`` (``sentence_bert_config.json``); None
    where the folder says none (``tokenizer_config.json``'s ``model_max_length`` is the longest
    input the model takes, usually its 512 positions, not a length it was trained at)."""
    path = os.fspath(path)
    config_path = join(path, SENTENCE_CONFIG_NAME)
    if not fileio.isdir(path) or not fileio.exists(config_path):
        return None
    with fileio.open_file(config_path) as f:
        try:
            length = json.load(f).get("max_seq_length")
        except ValueError as e:
            raise ValueError(f"{config_path!r} is not valid JSON: {e}") from None
    if length is None:
        return None
    if not isinstance(length, int) or length < 2:
        raise ValueError(f"{config_path!r}: max_seq_length must be an integer of at least 2, "
                         f"got {length!r}")
    return length
