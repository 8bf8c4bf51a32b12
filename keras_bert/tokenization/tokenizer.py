"""BertTokenizer: the pure-Python BERT tokenizer, identical to Google's FullTokenizer, with id
conversion, input packing ([CLS]/[SEP], segment ids, Google's pair truncation, padding),
decoding, and character offsets for mapping answers and labels back to the text."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from keras_bert.tokenization import basic, vocab as vocab_lib
from keras_bert.tokenization.packing import INPUT_NAMES, pack_ids
from keras_bert.tokenization.pretrained_vocab import read_pretrained_vocabulary
from keras_bert.tokenization.wordpiece import SUFFIX_INDICATOR, WordpieceTokenizer


@dataclasses.dataclass(frozen=True)
class TokenizedText:
    """Tokens of one text with where they came from.

    Args:
        tokens: the WordPiece tokens, as ``BertTokenizer.tokenize`` gives them.
        ids: their ids.
        offsets: per token, the (start, end) character span in the original text; end is
            exclusive. ``text[start:end]`` is the source of the token (before lower-casing).
        word_ids: per token, the index of the basic-tokenizer word it belongs to (words are
            split at whitespace and punctuation), for whole-word masking and word-level labels.
    """
    tokens: list[str]
    ids: list[int]
    offsets: list[tuple[int, int]]
    word_ids: list[int]


class BertTokenizer:
    """The BERT WordPiece tokenizer in pure Python, giving exactly Google's FullTokenizer tokens.

    Args:
        vocab_file: a vocab.txt (one token per line, local or ``gs://``). Give this or
            ``vocabulary``.
        lower_case: lower-case and strip accents, for uncased models.
        vocabulary: the tokens themselves, id 0 first, instead of a file.
        keep_special_tokens: when True, the literal text of a special token ("[CLS]", "[SEP]",
            "[MASK]", "[PAD]", "[UNK]") in the input becomes that token. By default it is
            tokenized as ordinary text, as Google does (``[``, ``cl``, ``##s``, ``]``).

    >>> tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...                                       "hello", "world", "##s", "!"])
    >>> tokenizer.tokenize("Hello worlds!")
    ['hello', 'world', '##s', '!']
    >>> tokenizer.encode("Hello", seq_length=5)["input_word_ids"]
    [2, 5, 3, 0, 0]
    """

    def __init__(self, vocab_file: str | None = None, lower_case: bool = True, *,
                 vocabulary: list[str] | None = None, keep_special_tokens: bool = False):
        if (vocab_file is None) == (vocabulary is None):
            raise ValueError("give exactly one of vocab_file (a path) and vocabulary (a token "
                             "list)")
        if vocab_file is not None:
            self.vocab = vocab_lib.load_vocab(vocab_file)
        else:
            self.vocab = vocab_lib.validate_vocab(list(vocabulary))
        self.vocab_file = vocab_file
        self.lower_case = lower_case
        self.keep_special_tokens = keep_special_tokens
        self.inv_vocab = {index: token for token, index in self.vocab.items()}
        self.wordpiece = WordpieceTokenizer(self.vocab)
        specials = [t for t in vocab_lib.SPECIAL_TOKENS if t in self.vocab]
        self._special_pattern = re.compile("|".join(re.escape(t) for t in specials)) \
            if specials else None

    @classmethod
    def from_pretrained(cls, path: str, lower_case: bool | None = None,
                        **kwargs) -> "BertTokenizer":
        """Builds the tokenizer of a checkpoint directory of any format whose vocabulary is a
        file (Google's, Hugging Face's, a keras-hub preset's; read without TensorFlow by
        ``pretrained_vocab.read_pretrained_vocabulary``), or of a vocab file.

        Args:
            path: the directory (with vocab.txt, the tokenizer.json transformers saves, or a
                keras-hub preset's tokenizer), or a vocab file.
            lower_case: overrides the casing read from the directory.
            **kwargs: passed to the constructor.
        """
        tokens, found_lower_case = read_pretrained_vocabulary(path)
        return cls(lower_case=found_lower_case if lower_case is None else lower_case,
                   vocabulary=tokens, **kwargs)

    @classmethod
    def from_checkpoint(cls, checkpoint, lower_case: bool | None = None,
                        **kwargs) -> "BertTokenizer":
        """The tokenizer of a checkpoint already read (``checkpoints.reading.read_checkpoint``),
        with its vocabulary and casing: nothing is read again.

        Args:
            checkpoint: a ``Checkpoint`` (any object with ``vocabulary``, ``lower_case`` and
                ``path``).
            lower_case: overrides the checkpoint's casing.
            **kwargs: passed to the constructor.

        Raises:
            ValueError: the checkpoint has no vocabulary.
        """
        if checkpoint.vocabulary is None:
            raise ValueError(f"{checkpoint.path!r} has no vocabulary (vocab.txt or "
                             f"tokenizer.json); pass a vocab file to BertTokenizer(vocab_file=...)")
        found = checkpoint.lower_case if checkpoint.lower_case is not None else True
        return cls(lower_case=found if lower_case is None else lower_case,
                   vocabulary=list(checkpoint.vocabulary), **kwargs)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def _special_id(self, token: str) -> int:
        if token not in self.vocab:
            raise ValueError(f"the vocabulary ({self.vocab_file or 'in memory'}) has no {token} "
                             f"token; add it to the vocab file")
        return self.vocab[token]

    pad_id = property(lambda self: self._special_id(vocab_lib.PAD), doc="Id of [PAD].")
    unk_id = property(lambda self: self._special_id(vocab_lib.UNK), doc="Id of [UNK].")
    cls_id = property(lambda self: self._special_id(vocab_lib.CLS), doc="Id of [CLS].")
    sep_id = property(lambda self: self._special_id(vocab_lib.SEP), doc="Id of [SEP].")
    mask_id = property(lambda self: self._special_id(vocab_lib.MASK), doc="Id of [MASK].")

    def basic_tokenize(self, text: str | bytes) -> list[str]:
        """Splits text into normalized words (Google's BasicTokenizer), before WordPiece."""
        return [word for segment, special in self._segments(basic.decode_text(text))
                for word in ([segment] if special else
                             basic.basic_tokenize(segment, self.lower_case))]

    def tokenize(self, text: str | bytes) -> list[str]:
        """Returns the WordPiece tokens of a text, as Google's ``FullTokenizer.tokenize``.

        Bytes are decoded as UTF-8; invalid bytes are dropped (see ``basic.decode_text``).
        """
        pieces = self.wordpiece.tokenize
        return [token for word in self.basic_tokenize(text) for token in pieces(word)]

    def tokenize_with_offsets(self, text: str | bytes) -> TokenizedText:
        """Tokenizes and reports each token's character span and word index.

        Offsets index the text as a str (bytes are decoded first).

        >>> t = BertTokenizer(vocabulary=["[UNK]", "new", "york", "##er", "!"])
        >>> r = t.tokenize_with_offsets("New Yorker!")
        >>> r.tokens, r.offsets, r.word_ids
        (['new', 'york', '##er', '!'], [(0, 3), (4, 8), (8, 10), (10, 11)], [0, 1, 1, 2])
        """
        text = basic.decode_text(text)
        tokens, offsets, word_ids = [], [], []
        position = 0
        words: list[tuple[basic.Word, bool]] = []
        for segment, special in self._segments(text):
            if special:
                words.append((basic.Word(segment, (position,), (position + len(segment),)), True))
            else:
                words += [(word, False) for word in
                          basic.basic_tokenize_with_offsets(segment, self.lower_case, position)]
            position += len(segment)
        for word_index, (word, special) in enumerate(words):
            spans = [(word.text, 0, 1)] if special else self.wordpiece.split_with_spans(word.text)
            for token, start, end in spans:
                tokens.append(token)
                offsets.append((word.starts[start], word.ends[end - 1]))
                word_ids.append(word_index)
        return TokenizedText(tokens, self.convert_tokens_to_ids(tokens), offsets, word_ids)

    def _segments(self, text: str) -> list[tuple[str, bool]]:
        """Splits text into (segment, is_special_token) when keeping special tokens."""
        if not self.keep_special_tokens or self._special_pattern is None:
            return [(text, False)]
        segments, last = [], 0
        for match in self._special_pattern.finditer(text):
            segments += [(text[last:match.start()], False), (match.group(), True)]
            last = match.end()
        segments.append((text[last:], False))
        return segments

    def convert_tokens_to_ids(self, tokens: list[str]) -> list[int]:
        """Maps tokens to ids; raises KeyError for a token not in the vocabulary."""
        try:
            return [self.vocab[token] for token in tokens]
        except KeyError as e:
            raise KeyError(f"token {e.args[0]!r} is not in the vocabulary") from None

    def convert_ids_to_tokens(self, ids) -> list[str]:
        """Maps ids to tokens; raises KeyError for an id outside the vocabulary."""
        try:
            return [self.inv_vocab[int(i)] for i in ids]
        except KeyError as e:
            raise KeyError(f"id {e.args[0]} is outside the vocabulary (size "
                           f"{len(self.vocab)})") from None

    def encode(self, text: str | bytes, pair: str | bytes | None = None,
               seq_length: int | None = None) -> dict[str, list[int]]:
        """Tokenizes one text or pair and packs it as ``[CLS] a [SEP] (b [SEP])``.

        Args:
            text: the first segment.
            pair: the optional second segment; one that is empty or tokenizes to nothing is
                left out (``[CLS] a [SEP]``), as in Google's run_classifier.py.
            seq_length: when given, truncate the pair as Google does (the longer segment loses
                its last token until the pair fits) and pad with [PAD] to exactly this length.

        Returns:
            ``input_word_ids``, ``input_mask`` and ``input_type_ids`` as lists of ints.
        """
        ids_a = self.convert_tokens_to_ids(self.tokenize(text))
        ids_b = None if pair is None else self.convert_tokens_to_ids(self.tokenize(pair))
        return pack_ids(ids_a, ids_b, seq_length, cls_id=self.cls_id, sep_id=self.sep_id,
                        pad_id=self.pad_id)

    def encode_batch(self, texts, pairs=None, seq_length: int | None = None
                     ) -> dict[str, np.ndarray]:
        """Encodes a list of texts (or pairs) into int32 arrays [batch, length].

        Args:
            texts: the first segments.
            pairs: the second segments, as many as ``texts``, or None.
            seq_length: the length of every row; None pads to the longest encoded row.
        """
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(pairs)} pairs")
        rows = [self.encode(text, None if pairs is None else pairs[i], seq_length)
                for i, text in enumerate(texts)]
        length = seq_length or max((len(r["input_word_ids"]) for r in rows), default=0)
        out = {}
        for name in INPUT_NAMES:
            fill = self.pad_id if name == "input_word_ids" else 0
            array = np.full((len(rows), length), fill, dtype=np.int32)
            for i, row in enumerate(rows):
                array[i, :len(row[name])] = row[name]
            out[name] = array
        return out

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """Turns ids back into text: pieces joined, ``##`` continuations glued to their word.

        The result is normalized text (lower-cased when uncased; punctuation spaced).
        """
        words: list[str] = []
        for token in self.convert_ids_to_tokens(ids):
            if skip_special_tokens and token in vocab_lib.SPECIAL_TOKENS:
                continue
            if token.startswith(SUFFIX_INDICATOR) and words:
                words[-1] += token[len(SUFFIX_INDICATOR):]
            else:
                words.append(token)
        return " ".join(words)
