"""BertTokenizerLayer: a Keras layer that turns raw text into WordPiece ids in-graph with
tensorflow-text, giving exactly the Python BertTokenizer's ids; its vocabulary is a ``.keras``
asset.

Tokenization routes each row. Rows of printable ASCII (plus tab, newline, carriage return) are
lower-cased with ``tf.strings.lower`` and handed to ``FastWordpieceTokenizer`` with its own
pretokenization: on such text its whitespace and punctuation classes are Google's, and a byte is
a character, so its ``max_bytes_per_word=200`` is Google's 200-character limit. Other rows go
through ``GraphNormalizer`` (Google's normalization from Python's Unicode tables), are split at
spaces, and their words are looked up with ``FastWordpieceTokenizer`` on whole words
(``unicode_wordpiece``). A batch without such rows skips that path under a ``tf.cond``.

Special-token text such as "[MASK]" is tokenized as ordinary text, as Google does. With
``keep_special_tokens=True`` (the Python tokenizer's switch of the same name) each literal special
token becomes its own id: the texts are split around the special tokens (``regex_split``, keeping
them), the other pieces are tokenized as above, and the rows are put back together.

``tokenize_with_offsets`` also gives each token's byte span in its text (tensorflow-text's
offsets on the ASCII path; on the other path, offsets carried through the normalization), and
``group_words`` groups ids by word, as TF Hub's BERT ``tokenize`` returns them; ``tokenize``
itself does neither.
"""

from __future__ import annotations

import hashlib
import os
import re

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert.tokenization import vocab as vocab_lib
from keras_bert.tokenization.graph_normalizer import GraphNormalizer
from keras_bert.tokenization.unicode_wordpiece import (merge_rows, regroup, tokenize_unicode,
                                                        tokenize_unicode_with_offsets)
from keras_bert.tokenization.wordpiece import MAX_CHARS_PER_WORD, SUFFIX_INDICATOR

_CLEAN_ASCII = r"[\t\n\r\x20-\x7e]*"
_MAX_UTF8_BYTES_PER_CHAR = 4
# Stands in until load_assets or set_vocabulary brings a vocabulary that a config only named.
_PLACEHOLDER_VOCABULARY = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a")

# The vocabularies this process has named in a config, by sha256. A config names its vocabulary
# (size and sha256) and leaves the tokens to the .keras file's assets, which keeps configs and
# Keras' error messages short. An in-memory from_config(get_config()) (clone_model, a task
# model's from_config, its copies for mixed precision or multi-worker evaluation) has no assets,
# and finds the tokens here. Why a table for the whole process: Keras calls the same get_config
# to write a .keras file and to copy a model in memory, and has no public way to tell the two
# apart, so a config cannot carry the tokens in one case only. An entry is the exact tokens its
# sha256 names, and is never dropped, so from_config answers the same whatever else is alive.
_NAMED_VOCABULARIES: dict[str, tuple[str, ...]] = {}


@keras.saving.register_keras_serializable(package="keras_bert")
class BertTokenizerLayer(keras.layers.Layer):
    """Raw text -> WordPiece ids, in-graph, exactly as ``BertTokenizer`` tokenizes: string
    [batch] (or [batch, 1]) -> int32 [batch, (tokens)], a ragged tensor.

    It works in ``tf.data.Dataset.map``, inside a Keras model and in a SavedModel (which then
    needs ``import tensorflow_text`` to load). Bytes that are not valid UTF-8 are dropped, as in
    ``BertTokenizer``. String ops cannot be XLA-compiled, so the layer sets
    ``supports_jit = False``.

    Args:
        vocab_file: a vocab.txt (local or ``gs://``). Give this or ``vocabulary``.
        lower_case: lower-case and strip accents, for uncased models.
        vocabulary: the tokens themselves, id 0 first, instead of a file. A ``.keras`` file
            carries them as an asset (``vocab.txt``), as keras-hub's tokenizers do.
        keep_special_tokens: when True, the literal text of a special token ("[CLS]", "[SEP]",
            "[MASK]", "[PAD]", "[UNK]") in the input becomes that token, as
            ``BertTokenizer(keep_special_tokens=True)`` does. By default it is tokenized as
            ordinary text, as Google does.
        vocabulary_size, vocabulary_sha256: a vocabulary named but not given, as ``get_config``
            records it. The tokens come from this process when it made a config naming them;
            otherwise from ``load_assets`` (``keras.saving.load_model`` calls it) or
            ``set_vocabulary``, and tokenizing before then is an error that says so.
        **kwargs: Keras layer arguments (``name``...).

    >>> tokenizer = BertTokenizerLayer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]",
    ...                                            "[MASK]", "hello", "world", "!"])
    >>> tokenizer(["Hello", "wörld!"]).to_list()
    [[5], [6, 7]]
    """

    def __init__(self, vocab_file: str | None = None, lower_case: bool = True, *,
                 vocabulary: list[str] | None = None, keep_special_tokens: bool = False,
                 vocabulary_size: int | None = None, vocabulary_sha256: str | None = None,
                 **kwargs):
        super().__init__(**kwargs)
        given = (vocab_file is not None) + (vocabulary is not None)
        if given > 1 or (given == 0 and vocabulary_sha256 is None):
            raise ValueError("give exactly one of vocab_file (a path) and vocabulary (a token "
                             "list)")
        self.lower_case = lower_case
        self.keep_special_tokens = keep_special_tokens
        self.supports_jit = False
        self.built = True
        self._normalizer = GraphNormalizer(lower_case)
        if given:
            tokens = (vocab_lib.read_vocab_tokens(vocab_file) if vocab_file is not None
                      else list(vocabulary))
            _check_fingerprint(tokens, vocabulary_size, vocabulary_sha256, "the config")
            self.set_vocabulary(tokens, source=vocab_file)
        elif vocabulary_sha256 in _NAMED_VOCABULARIES:
            self.set_vocabulary(list(_NAMED_VOCABULARIES[vocabulary_sha256]))
        else:
            self.set_vocabulary(list(_PLACEHOLDER_VOCABULARY))
            self._vocabulary_pending = (vocabulary_size, vocabulary_sha256)

    def set_vocabulary(self, tokens: list[str], source: str | None = None) -> None:
        """Uses ``tokens`` (id 0 first) as the vocabulary: checks it and builds the lookups."""
        vocab = vocab_lib.validate_vocab(tokens, source=source or "<vocabulary>")
        self.vocabulary = list(tokens)
        common = dict(vocab=self.vocabulary, suffix_indicator=SUFFIX_INDICATOR,
                      unknown_token=vocab_lib.UNK, token_out_type=tf.int32)
        self._ascii_wordpiece = tf_text.FastWordpieceTokenizer(
            max_bytes_per_word=MAX_CHARS_PER_WORD, no_pretokenization=False, **common)
        self._word_wordpiece = tf_text.FastWordpieceTokenizer(
            max_bytes_per_word=MAX_CHARS_PER_WORD * _MAX_UTF8_BYTES_PER_CHAR,
            no_pretokenization=True, **common)
        specials = [t for t in vocab_lib.SPECIAL_TOKENS if t in vocab]
        self._special_tokens = specials
        self._special_ids = [vocab[t] for t in specials]
        self._special_pattern = "|".join(re.escape(t) for t in specials)
        self.vocabulary_sha256 = vocabulary_fingerprint(self.vocabulary)
        self._continuation = np.array([t.startswith(SUFFIX_INDICATOR) for t in self.vocabulary])
        self._vocabulary_pending = False

    def get_vocabulary(self) -> list[str]:
        """The tokens, id 0 first (an error while a config only names them)."""
        self._check_vocabulary()
        return list(self.vocabulary)

    def __call__(self, inputs, *args, **kwargs):
        # Keras accepts only tensors as positional inputs; texts may come as Python strings,
        # lists or NumPy arrays, so they become a string tensor here.
        return super().__call__(as_string_tensor(inputs), *args, **kwargs)

    @tf.autograph.experimental.do_not_convert
    def call(self, inputs) -> tf.RaggedTensor:
        return self.tokenize(inputs)

    @tf.autograph.experimental.do_not_convert  # Plain graph code; converting it is slow.
    def tokenize(self, texts) -> tf.RaggedTensor:
        """Tokenizes: string [batch] or [batch, 1] -> int32 ids [batch, (tokens)]."""
        self._check_vocabulary()
        texts = _as_batch(texts)
        if self.keep_special_tokens and self._special_tokens:
            return self._tokenize_keeping_special_tokens(texts)
        return self._tokenize_text(texts)

    @tf.autograph.experimental.do_not_convert
    def tokenize_with_offsets(self, texts):
        """Tokenizes and gives each token's byte span in its text: string [batch] or [batch, 1]
        -> (ids int32, starts int64, limits int64), each [batch, (tokens)].

        ``texts[i][starts[i][j]:limits[i][j]]`` is the source of token j of text i (before
        normalization), as ``BertTokenizer.tokenize_with_offsets`` gives it in characters,
        here in UTF-8 bytes as tensorflow-text's tokenizers give them. A piece of a word
        covers the characters it came from; [UNK] covers its whole word. Where NFD moves a
        spacing mark across characters (musical symbols, say), the characters of that run
        share its span, while ``BertTokenizer`` gives them their whitespace chunk's. With
        ``keep_special_tokens``, a text that is not valid UTF-8 is measured without its
        invalid bytes. The ids are ``tokenize``'s; that path does none of this work.

        >>> tokenizer = BertTokenizerLayer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]",
        ...                                            "[MASK]", "new", "york", "##er", "!"])
        >>> ids, starts, limits = tokenizer.tokenize_with_offsets(["New Yörker!"])
        >>> ids.to_list(), starts.to_list(), limits.to_list()
        ([[5, 6, 7, 8]], [[0, 4, 9, 11]], [[3, 9, 11, 12]])
        """
        self._check_vocabulary()
        texts = _as_batch(texts)
        if self.keep_special_tokens and self._special_tokens:
            return self._offsets_keeping_special_tokens(texts)
        return self._offsets_of_text(texts)

    @tf.autograph.experimental.do_not_convert
    def group_words(self, ids: tf.RaggedTensor) -> tf.RaggedTensor:
        """Groups token ids by word: int32 [batch, (tokens)] -> int32 [batch, (words),
        (tokens)], the shape of TF Hub's BERT ``tokenize``.

        A word is a basic-tokenizer word (split at whitespace and punctuation) or a kept
        special token. Every word starts with a token that is not a ``##`` continuation (words
        hold no "#", punctuation splits it off, and a word WordPiece cannot cover is one
        [UNK]), and every continuation belongs to the word before it, so the words can be
        found from the ids alone, after tokenizing, at the cost of one lookup per token.

        >>> tokenizer = BertTokenizerLayer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]",
        ...                                            "[MASK]", "new", "york", "##er", "!"])
        >>> tokenizer.group_words(tokenizer(["New Yorker!"])).to_list()
        [[[5], [6, 7], [8]]]
        """
        tokens = ids.flat_values
        starts = tf.logical_not(tf.gather(tf.constant(self._continuation), tokens))
        words = tf.RaggedTensor.from_row_starts(
            tokens, tf.cast(tf.where(starts)[:, 0], ids.row_splits.dtype), validate=False)
        words_before = tf.concat([[0], tf.cumsum(tf.cast(starts, ids.row_splits.dtype))], 0)
        return tf.RaggedTensor.from_row_splits(words, tf.gather(words_before, ids.row_splits),
                                               validate=False)

    def _tokenize_text(self, texts: tf.Tensor) -> tf.RaggedTensor:
        clean = tf.strings.regex_full_match(texts, _CLEAN_ASCII)
        return tf.cond(tf.reduce_all(clean), lambda: self._tokenize_clean_ascii(texts),
                       lambda: self._tokenize_mixed(texts, clean))

    def _tokenize_clean_ascii(self, texts: tf.Tensor) -> tf.RaggedTensor:
        if self.lower_case:
            texts = tf.strings.lower(texts)
        return self._ascii_wordpiece.tokenize(texts)

    def _tokenize_mixed(self, texts: tf.Tensor, clean: tf.Tensor) -> tf.RaggedTensor:
        ascii_rows = tf.cast(tf.where(clean)[:, 0], tf.int32)
        other_rows = tf.cast(tf.where(~clean)[:, 0], tf.int32)
        ascii_ids = self._tokenize_clean_ascii(tf.gather(texts, ascii_rows))

        other_ids = tokenize_unicode(tf.gather(texts, other_rows), self._normalizer,
                                     self._word_wordpiece)
        return merge_rows(ascii_ids, ascii_rows, other_ids, other_rows)

    def _tokenize_keeping_special_tokens(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Each literal special token -> its id; the text between them tokenized as usual."""
        pieces, _, special_rows, special_ids, text_rows = self._split_at_special_tokens(texts)
        special_pieces = tf.RaggedTensor.from_row_lengths(
            special_ids, tf.ones_like(special_rows, dtype=tf.int64), validate=False)
        text_pieces = tf.cast(self._tokenize_text(tf.gather(pieces.flat_values, text_rows)),
                              tf.int32)
        piece_ids = merge_rows(special_pieces, special_rows, text_pieces, text_rows)
        return regroup(piece_ids, pieces.row_splits)  # Row i: the ids of row i's pieces.

    def _split_at_special_tokens(self, texts: tf.Tensor):
        """Splits each text before and after each literal special token.

        Returns:
            pieces: string [batch, (pieces)]; their byte offsets in the texts, int64 [batch,
            (pieces)]; the flat indices of the special pieces, int32 [s], and their ids, int32
            [s]; the flat indices of the other pieces, int32 [t].
        """
        # Invalid UTF-8 is dropped first, as the Python tokenizer decodes before splitting.
        texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="ignore")
        # regex_split loses a row holding NUL; NUL and \x01 are both control characters that
        # tokenization deletes, so the swap changes no id.
        texts = tf.strings.regex_replace(texts, r"\x00", "\x01")
        pieces, piece_starts, _ = tf_text.regex_split_with_offsets(
            texts, self._special_pattern, keep_delim_regex_pattern=self._special_pattern)
        flat = pieces.flat_values
        matches = tf.equal(flat[:, None], tf.constant(self._special_tokens)[None, :])
        special = tf.reduce_any(matches, axis=1)
        special_rows = tf.cast(tf.where(special)[:, 0], tf.int32)
        text_rows = tf.cast(tf.where(~special)[:, 0], tf.int32)
        special_ids = tf.gather(tf.constant(self._special_ids, tf.int32),
                                tf.argmax(tf.gather(tf.cast(matches, tf.int32), special_rows),
                                          axis=1, output_type=tf.int32))
        return pieces, piece_starts, special_rows, special_ids, text_rows

    def _offsets_of_text(self, texts: tf.Tensor):
        """(ids, starts, limits) [batch, (tokens)] each, without special tokens."""
        clean = tf.strings.regex_full_match(texts, _CLEAN_ASCII)
        ascii_rows = tf.cast(tf.where(clean)[:, 0], tf.int32)
        other_rows = tf.cast(tf.where(~clean)[:, 0], tf.int32)
        ascii_texts = tf.gather(texts, ascii_rows)
        if self.lower_case:
            ascii_texts = tf.strings.lower(ascii_texts)  # ASCII: the bytes stay where they were
        ascii_parts = self._ascii_wordpiece.tokenize_with_offsets(ascii_texts)
        other_parts = tokenize_unicode_with_offsets(tf.gather(texts, other_rows),
                                                    self._normalizer, self._word_wordpiece)
        return tuple(merge_rows(a, ascii_rows, b, other_rows)
                     for a, b in zip(ascii_parts, other_parts))

    def _offsets_keeping_special_tokens(self, texts: tf.Tensor):
        """``_tokenize_keeping_special_tokens`` with offsets: each piece's own, shifted by
        where the piece starts in its text."""
        pieces, piece_starts, special_rows, special_ids, text_rows = (
            self._split_at_special_tokens(texts))
        lengths = tf.ones_like(special_rows, dtype=tf.int64)
        special_limits = tf.cast(tf.strings.length(tf.gather(pieces.flat_values, special_rows)),
                                 tf.int64)
        special_parts = [tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)
                         for values in (special_ids, tf.zeros_like(lengths), special_limits)]
        text_parts = self._offsets_of_text(tf.gather(pieces.flat_values, text_rows))
        ids, starts, limits = (merge_rows(a, special_rows, b, text_rows)
                               for a, b in zip(special_parts, text_parts))
        shift = tf.gather(piece_starts.flat_values, ids.value_rowids())
        starts = starts.with_flat_values(starts.flat_values + shift)
        limits = limits.with_flat_values(limits.flat_values + shift)
        return tuple(regroup(part, pieces.row_splits) for part in (ids, starts, limits))

    def compute_output_spec(self, inputs):
        return keras.KerasTensor((inputs.shape[0], None), dtype="int32", ragged=True)

    def get_config(self) -> dict:
        """The settings and the vocabulary's size and sha256, not the tokens: ``save_assets``
        writes them beside the config in a ``.keras`` file, and ``from_config`` in this process
        finds them by sha256."""
        config = super().get_config()
        if self._vocabulary_pending:
            size, fingerprint = self._vocabulary_pending
        else:
            size, fingerprint = len(self.vocabulary), self.vocabulary_sha256
            _NAMED_VOCABULARIES.setdefault(fingerprint, tuple(self.vocabulary))
        config.update(lower_case=self.lower_case, keep_special_tokens=self.keep_special_tokens,
                      vocabulary_size=size, vocabulary_sha256=fingerprint)
        return config

    def save_assets(self, dir_path: str) -> None:
        self._check_vocabulary()
        vocab_lib.save_vocab(self.vocabulary, os.path.join(dir_path, vocab_lib.VOCAB_FILENAME))

    def load_assets(self, dir_path: str | None) -> None:
        """Reads the vocabulary that the config named from ``dir_path/vocab.txt``. A layer that
        already holds it (found in this process, or from a config that held the tokens) keeps
        it."""
        if not self._vocabulary_pending or dir_path is None:
            return
        path = os.path.join(dir_path, vocab_lib.VOCAB_FILENAME)
        if not os.path.exists(path):
            return
        tokens = vocab_lib.read_vocab_tokens(path)
        _check_fingerprint(tokens, *self._vocabulary_pending, path)
        self.set_vocabulary(tokens, source=path)

    def _check_vocabulary(self) -> None:
        if self._vocabulary_pending:
            size, _ = self._vocabulary_pending
            raise ValueError(
                f"{self.name} was built from a config, which names its vocabulary ({size} tokens) "
                f"but does not hold it: load the whole model with keras.saving.load_model (the "
                f".keras file carries its vocab.txt asset), or call set_vocabulary(tokens)")


def vocabulary_fingerprint(tokens) -> str:
    """sha256 of the tokens, one per line: names a vocabulary in a config."""
    return hashlib.sha256("\n".join(tokens).encode("utf-8")).hexdigest()


def _check_fingerprint(tokens: list[str], size: int | None, fingerprint: str | None,
                       source: str) -> None:
    """Raises unless ``tokens`` are the vocabulary that a config named (if it named one)."""
    if fingerprint and fingerprint != vocabulary_fingerprint(tokens):
        raise ValueError(f"{source}: the vocabulary does not match the one the model was saved "
                         f"with (sha256 {fingerprint}, {size} tokens)")


def as_string_tensor(value):
    """Python or NumPy text -> a string tensor (one string: a batch of one); tensors and Keras
    symbolic inputs unchanged."""
    if tf.is_tensor(value) or isinstance(value, keras.KerasTensor):
        return value
    if isinstance(value, (str, bytes)):
        value = [value]
    return tf.convert_to_tensor(value, dtype=tf.string)


def _as_batch(texts) -> tf.Tensor:
    """string [batch] or [batch, 1] -> string [batch]."""
    texts = tf.convert_to_tensor(texts, dtype=tf.string)
    if texts.shape.rank is None:
        texts = tf.reshape(texts, [-1])
    if texts.shape.rank == 2:
        texts = tf.squeeze(texts, axis=1)
    if texts.shape.rank != 1:
        raise ValueError(f"expected a batch of strings [batch] or [batch, 1], got shape "
                         f"{texts.shape}")
    return texts
