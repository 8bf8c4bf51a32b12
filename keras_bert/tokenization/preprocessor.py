"""BertPreprocessor: a Keras layer that turns raw text (single texts or pairs) into the TF Hub
encoder inputs in-graph with tensorflow-text, giving exactly the Python BertTokenizer's ids.

Tokenization routes each row. Rows of printable ASCII (plus tab, newline, carriage return) are
lower-cased with ``tf.strings.lower`` and handed to ``FastWordpieceTokenizer`` with its own
pretokenization: on such text its whitespace and punctuation classes are Google's, and a byte is
a character, so its ``max_bytes_per_word=200`` is Google's 200-character limit. Other rows go
through ``GraphNormalizer`` (Google's normalization from Python's Unicode tables), are split at
spaces, and their words are looked up with ``FastWordpieceTokenizer`` on whole words. A batch
without such rows skips that path under a ``tf.cond``.

Special-token text such as "[MASK]" is tokenized as ordinary text, as Google does. With
``keep_special_tokens=True`` (the Python tokenizer's switch of the same name) each literal special
token becomes its own id: the texts are split around the special tokens (``regex_split``, keeping
them), the other pieces are tokenized as above, and the rows are put back together.
"""

from __future__ import annotations

import hashlib
import os
import re
import weakref

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert.tokenization import vocab as vocab_lib
from keras_bert.tokenization.graph_normalizer import GraphNormalizer
from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.tokenization.wordpiece import MAX_CHARS_PER_WORD, SUFFIX_INDICATOR

_CLEAN_ASCII = r"[\t\n\r\x20-\x7e]*"
_MAX_UTF8_BYTES_PER_CHAR = 4
# Stands in until load_assets or set_vocabulary brings the real vocabulary (see from_config).
_PLACEHOLDER_VOCABULARY = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a")
# The preprocessors alive in this process by vocabulary fingerprint, so that an in-memory
# from_config(get_config()) (clone_model, with_seq_length...) finds the tokens it names.
_LIVE_VOCABULARIES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


@keras.saving.register_keras_serializable(package="keras_bert")
class BertPreprocessor(keras.layers.Layer):
    """Raw text -> ``input_word_ids``, ``input_mask``, ``input_type_ids`` (int32
    [batch, seq_length]), tokenized in-graph exactly as ``BertTokenizer`` does.

    Call it on a string tensor [batch] (single texts) or on a pair ``(texts_a, texts_b)``; pairs
    are truncated as Google does (the longer segment loses its last token until the pair fits).
    It works in ``tf.data.Dataset.map``, inside a Keras model and in a SavedModel (which then
    needs ``import tensorflow_text`` to load). String ops cannot be XLA-compiled, so the layer
    sets ``supports_jit = False`` and ``jit_compile="auto"`` leaves a model holding it uncompiled.

    Args:
        vocab_file: a vocab.txt (local or ``gs://``). Give this or ``vocabulary``.
        lower_case: lower-case and strip accents, for uncased models.
        seq_length: the packed length, [CLS] and [SEP] included.
        vocabulary: the tokens themselves, id 0 first, instead of a file. A ``.keras`` file
            carries them as an asset (``assets/vocab.txt``), as keras-hub's tokenizers do;
            ``get_config`` names them by fingerprint (``vocabulary_sha256``) only, which keeps
            configs and Keras' error messages short.
        keep_special_tokens: when True, the literal text of a special token ("[CLS]", "[SEP]",
            "[MASK]", "[PAD]", "[UNK]") in the input becomes that token, as
            ``BertTokenizer(keep_special_tokens=True)`` does. By default it is tokenized as
            ordinary text, as Google does.
        **kwargs: Keras layer arguments (``name``...).

    >>> preprocessor = BertPreprocessor(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]",
    ...                                             "[MASK]", "hello", "world", "!"],
    ...                                 seq_length=6)
    >>> preprocessor(tf.constant(["Hello world!"]))["input_word_ids"].numpy().tolist()
    [[2, 5, 6, 7, 3, 0]]
    >>> preprocessor.tokenize(tf.constant(["Hello", "wörld!"])).to_list()
    [[5], [6, 7]]
    """

    def __init__(self, vocab_file: str | None = None, lower_case: bool = True,
                 seq_length: int = 128, *, vocabulary: list[str] | None = None,
                 keep_special_tokens: bool = False, **kwargs):
        super().__init__(**kwargs)
        if (vocab_file is None) == (vocabulary is None):
            raise ValueError("give exactly one of vocab_file (a path) and vocabulary (a token "
                             "list)")
        if seq_length < 2:
            raise ValueError(f"seq_length={seq_length} leaves no room for [CLS] and [SEP]")
        self.lower_case = lower_case
        self.seq_length = seq_length
        self.keep_special_tokens = keep_special_tokens
        self.supports_jit = False
        self.built = True
        self._normalizer = GraphNormalizer(lower_case)
        self.set_vocabulary(vocab_lib.read_vocab_tokens(vocab_file) if vocab_file is not None
                            else list(vocabulary), source=vocab_file)

    def set_vocabulary(self, tokens: list[str], source: str | None = None) -> None:
        """Uses ``tokens`` (id 0 first) as the vocabulary: checks it and builds the lookups."""
        vocab = vocab_lib.validate_vocab(tokens, source=source or "<vocabulary>")
        missing = [t for t in (vocab_lib.PAD, vocab_lib.CLS, vocab_lib.SEP) if t not in vocab]
        if missing:
            raise ValueError(f"the vocabulary ({source or 'in memory'}) lacks {missing}; "
                             f"packing needs them")
        self.vocabulary = list(tokens)
        self.pad_id, self.cls_id, self.sep_id = (vocab[vocab_lib.PAD], vocab[vocab_lib.CLS],
                                                 vocab[vocab_lib.SEP])
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
        self._vocabulary_pending = False
        _LIVE_VOCABULARIES[self.vocabulary_sha256] = self

    @classmethod
    def from_pretrained(cls, path: str, lower_case: bool | None = None, seq_length: int = 128,
                        **kwargs) -> "BertPreprocessor":
        """Builds the preprocessor of a Google or Hugging Face checkpoint directory.

        Args:
            path: the directory (with vocab.txt), or a vocab file.
            lower_case: overrides the casing read from the directory.
            seq_length: the packed length.
            **kwargs: passed to the constructor.
        """
        vocab_path, found_lower_case = vocab_lib.resolve_pretrained(path)
        return cls(vocab_path, found_lower_case if lower_case is None else lower_case,
                   seq_length, **kwargs)

    @tf.autograph.experimental.do_not_convert  # Plain graph code; converting it is slow.
    def tokenize(self, texts) -> tf.RaggedTensor:
        """Tokenizes without packing: string [batch] -> int32 ids [batch, (tokens)].

        Bytes that are not valid UTF-8 are dropped, as in ``BertTokenizer``.
        """
        self._check_vocabulary()
        texts = _as_batch(texts)
        if self.keep_special_tokens and self._special_tokens:
            return self._tokenize_keeping_special_tokens(texts)
        return self._tokenize_text(texts)

    def _tokenize_text(self, texts: tf.Tensor) -> tf.RaggedTensor:
        clean = tf.strings.regex_full_match(texts, _CLEAN_ASCII)
        return tf.cond(tf.reduce_all(clean), lambda: self._tokenize_clean_ascii(texts),
                       lambda: self._tokenize_mixed(texts, clean))

    def _tokenize_keeping_special_tokens(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Each literal special token -> its id; the text between them tokenized as usual."""
        # Invalid UTF-8 is dropped first, as the Python tokenizer decodes before splitting.
        texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="ignore")
        # regex_split loses a row holding NUL; NUL and \x01 are both control characters that
        # tokenization deletes, so the swap changes no id.
        texts = tf.strings.regex_replace(texts, r"\x00", "\x01")
        pieces = tf_text.regex_split(texts, self._special_pattern,
                                     keep_delim_regex_pattern=self._special_pattern)
        flat = pieces.flat_values
        matches = tf.equal(flat[:, None], tf.constant(self._special_tokens)[None, :])
        special = tf.reduce_any(matches, axis=1)
        special_rows = tf.cast(tf.where(special)[:, 0], tf.int32)
        text_rows = tf.cast(tf.where(~special)[:, 0], tf.int32)
        special_ids = tf.gather(tf.constant(self._special_ids, tf.int32),
                                tf.argmax(tf.gather(tf.cast(matches, tf.int32), special_rows),
                                          axis=1, output_type=tf.int32))
        special_pieces = tf.RaggedTensor.from_row_lengths(
            special_ids, tf.ones_like(special_rows, dtype=tf.int64), validate=False)
        text_pieces = tf.cast(self._tokenize_text(tf.gather(flat, text_rows)), tf.int32)
        piece_ids = tf.gather(tf.concat([special_pieces, text_pieces], axis=0),
                              tf.math.invert_permutation(
                                  tf.concat([special_rows, text_rows], axis=0)))
        # Row i: the ids of row i's pieces, in order.
        return tf.RaggedTensor.from_row_splits(
            piece_ids.flat_values, tf.gather(piece_ids.row_splits, pieces.row_splits),
            validate=False)

    def _tokenize_clean_ascii(self, texts: tf.Tensor) -> tf.RaggedTensor:
        if self.lower_case:
            texts = tf.strings.lower(texts)
        return self._ascii_wordpiece.tokenize(texts)

    def _tokenize_mixed(self, texts: tf.Tensor, clean: tf.Tensor) -> tf.RaggedTensor:
        ascii_rows = tf.cast(tf.where(clean)[:, 0], tf.int32)
        other_rows = tf.cast(tf.where(~clean)[:, 0], tf.int32)
        ascii_ids = self._tokenize_clean_ascii(tf.gather(texts, ascii_rows))

        words = tf.strings.split(self._normalizer.normalize_unicode(tf.gather(texts, other_rows)))
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
        # The literal "[UNK]" is a vocabulary token, so it maps to [UNK] as one word.
        flat_words = tf.where(too_long, vocab_lib.UNK, words.flat_values)
        pieces = self._word_wordpiece.tokenize(flat_words)  # [words, (pieces)]
        other_ids = tf.RaggedTensor.from_row_splits(  # Row i: the pieces of row i's words.
            pieces.flat_values, tf.gather(pieces.row_splits, words.row_splits), validate=False)

        ids = tf.concat([ascii_ids, other_ids], axis=0)
        order = tf.math.invert_permutation(tf.concat([ascii_rows, other_rows], axis=0))
        return tf.gather(ids, order)

    @tf.autograph.experimental.do_not_convert
    def pack(self, ids_a: tf.RaggedTensor, ids_b: tf.RaggedTensor | None = None
             ) -> dict[str, tf.Tensor]:
        """Packs token ids as ``[CLS] a [SEP] (b [SEP])``, truncated and padded to seq_length.

        Args:
            ids_a: int32 [batch, (tokens)], the first segments.
            ids_b: int32 [batch, (tokens)], the second segments, or None. A row whose second
                segment is empty is packed as a single text (``[CLS] a [SEP]``, a truncated to
                seq_length - 2), as Google's run_classifier.py packs an empty text_b.

        Returns:
            ``input_word_ids``, ``input_mask``, ``input_type_ids``: int32 [batch, seq_length].
        """
        length = self.seq_length
        position = tf.range(length)[None, :]  # [1, seq_length]
        if ids_b is None:
            keep_a = tf.minimum(tf.cast(ids_a.row_lengths(), tf.int32), length - 2)[:, None]
            b_start = end = keep_a + 2  # No second segment.
        else:
            length_a = tf.cast(ids_a.row_lengths(), tf.int32)
            length_b = tf.cast(ids_b.row_lengths(), tf.int32)
            pair_a, pair_b = _pair_lengths(length_a, length_b, length - 3)
            has_b = length_b > 0
            keep_a = tf.where(has_b, pair_a, tf.minimum(length_a, length - 2))[:, None]
            keep_b = tf.where(has_b, pair_b, 0)[:, None]  # [batch, 1]
            b_start = keep_a + 2
            end = tf.where(has_b[:, None], keep_a + keep_b + 3, keep_a + 2)
        word_ids = tf.where(position == 0, self.cls_id, self.pad_id)
        word_ids = tf.where((position >= 1) & (position <= keep_a),
                            _shifted(ids_a, position - 1, length), word_ids)
        if ids_b is not None:
            word_ids = tf.where((position >= b_start) & (position < end - 1),
                                _shifted(ids_b, position - b_start, length), word_ids)
        word_ids = tf.where((position == keep_a + 1) | (position == end - 1), self.sep_id,
                            word_ids)
        return {
            "input_word_ids": word_ids,
            "input_mask": tf.cast(position < end, tf.int32),
            "input_type_ids": tf.cast((position >= b_start) & (position < end), tf.int32),
        }

    def __call__(self, inputs, *args, **kwargs):
        # Keras accepts only tensors as positional inputs; texts may come as Python strings,
        # lists or NumPy arrays, so they become string tensors here. A list of strings is one
        # batch; a tuple or list of batches is a segment pair.
        if isinstance(inputs, (tuple, list)) and not _is_texts(inputs):
            inputs = type(inputs)(_as_string_tensor(x) for x in inputs)
        else:
            inputs = _as_string_tensor(inputs)
        return super().__call__(inputs, *args, **kwargs)

    @tf.autograph.experimental.do_not_convert
    def call(self, inputs) -> dict[str, tf.Tensor]:
        if isinstance(inputs, (tuple, list)):
            if len(inputs) == 1:
                return self.pack(self.tokenize(inputs[0]))
            if len(inputs) != 2:
                raise ValueError(f"BertPreprocessor takes one or two text tensors, got "
                                 f"{len(inputs)}")
            if self.seq_length < 3:
                raise ValueError(f"seq_length={self.seq_length} leaves no room for a pair's "
                                 f"[CLS] and two [SEP]")
            return self.pack(self.tokenize(inputs[0]), self.tokenize(inputs[1]))
        return self.pack(self.tokenize(inputs))

    def compute_output_spec(self, inputs):
        first = inputs[0] if isinstance(inputs, (tuple, list)) else inputs
        shape = (first.shape[0], self.seq_length)
        return {name: keras.KerasTensor(shape, dtype="int32")
                for name in INPUT_NAMES}

    def get_config(self) -> dict:
        """The settings and the vocabulary's fingerprint, not the tokens: ``save_assets`` writes
        them beside the config in a ``.keras`` file, and ``from_config`` finds them in this
        process by fingerprint."""
        config = super().get_config()
        size, fingerprint = self._vocabulary_pending or (len(self.vocabulary),
                                                          self.vocabulary_sha256)
        config.update(lower_case=self.lower_case, seq_length=self.seq_length,
                      keep_special_tokens=self.keep_special_tokens, vocabulary_size=size,
                      vocabulary_sha256=fingerprint)
        return config

    @classmethod
    def from_config(cls, config: dict) -> "BertPreprocessor":
        """From ``get_config()``. The tokens come from a preprocessor with the same vocabulary
        alive in this process (``clone_model``, ``from_config(get_config())``); otherwise from
        ``load_assets`` (``keras.saving.load_model`` calls it) or ``set_vocabulary``, and using
        the layer before then is an error that says so. A config holding the tokens themselves
        (saved before the vocabulary became an asset) is complete."""
        config = dict(config)
        size = config.pop("vocabulary_size", None)
        fingerprint = config.pop("vocabulary_sha256", None)
        if config.get("vocabulary") is not None or config.get("vocab_file") is not None:
            return cls(**config)
        live = _LIVE_VOCABULARIES.get(fingerprint) if fingerprint else None
        if live is not None and not live._vocabulary_pending:
            return cls(vocabulary=list(live.vocabulary), **config)
        layer = cls(vocabulary=list(_PLACEHOLDER_VOCABULARY), **config)
        layer._vocabulary_pending = (size, fingerprint)
        return layer

    def save_assets(self, dir_path: str) -> None:
        self._check_vocabulary()
        vocab_lib.save_vocab(self.vocabulary, os.path.join(dir_path, vocab_lib.VOCAB_FILENAME))

    def load_assets(self, dir_path: str) -> None:
        path = os.path.join(dir_path, vocab_lib.VOCAB_FILENAME)
        if not os.path.exists(path):  # a file saved when the config held the tokens
            return
        expected = self._vocabulary_pending
        self.set_vocabulary(vocab_lib.read_vocab_tokens(path), source=path)
        if expected and expected[1] and expected[1] != self.vocabulary_sha256:
            raise ValueError(f"{path}: the vocabulary does not match the one the model was "
                             f"saved with (sha256 {expected[1]}, {expected[0]} tokens)")

    def with_seq_length(self, seq_length: int) -> "BertPreprocessor":
        """A copy that packs to ``seq_length``."""
        return type(self)(lower_case=self.lower_case, seq_length=seq_length,
                          vocabulary=list(self.vocabulary),
                          keep_special_tokens=self.keep_special_tokens)

    def _check_vocabulary(self) -> None:
        if self._vocabulary_pending:
            size, _ = self._vocabulary_pending
            raise ValueError(
                f"{self.name} was built from a config, which names its vocabulary ({size} tokens) "
                f"but does not hold it: load the whole model with keras.saving.load_model (the "
                f".keras file carries assets/vocab.txt), or call set_vocabulary(tokens)")


PAD_MULTIPLE = 8  # packed lengths round up to this: few distinct shapes, aligned matmuls


def trim_to_longest(packed: dict[str, tf.Tensor], multiple_of: int = PAD_MULTIPLE
                    ) -> dict[str, tf.Tensor]:
    """Cuts packed ids ([..., seq_length] each) to the longest row's length rounded up to
    ``multiple_of`` (never past seq_length, never below ``min(multiple_of, seq_length)``).

    Real requests are short: a 10-word query padded to 128 costs what 128 tokens cost. Every
    position cut is padding (input_mask 0) in every row, so the encoder's outputs at the kept
    positions are the same as with full padding.

    >>> ids = tf.constant([[2, 5, 3, 0, 0, 0, 0, 0, 0, 0], [2, 3, 0, 0, 0, 0, 0, 0, 0, 0]])
    >>> packed = {"input_word_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32)}
    >>> trim_to_longest(packed, multiple_of=4)["input_word_ids"].shape.as_list()
    [2, 4]
    """
    mask = packed["input_mask"]
    full = tf.shape(mask)[-1]
    longest = tf.maximum(tf.reduce_max(tf.reduce_sum(mask, axis=-1)), 0)  # 0 rows: 0
    length = (longest + multiple_of - 1) // multiple_of * multiple_of
    length = tf.minimum(tf.maximum(length, multiple_of), full)
    return {name: value[..., :length] for name, value in packed.items()}


def vocabulary_fingerprint(tokens) -> str:
    """sha256 of the tokens, one per line: names a vocabulary in a config."""
    return hashlib.sha256("\n".join(tokens).encode("utf-8")).hexdigest()


def _is_texts(values) -> bool:
    return bool(values) and all(isinstance(v, (str, bytes)) for v in values)


def _as_string_tensor(value):
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


def _shifted(ids: tf.RaggedTensor, index: tf.Tensor, length: int) -> tf.Tensor:
    """Row i of ``ids`` read at ``index[i]`` (clipped): int32 [batch, length]."""
    dense = ids.to_tensor(0, shape=[None, length])
    index = tf.clip_by_value(tf.broadcast_to(index, tf.shape(dense)), 0, length - 1)
    return tf.gather(dense, index, batch_dims=1)


def _pair_lengths(length_a: tf.Tensor, length_b: tf.Tensor, budget: int):
    """Google's _truncate_seq_pair, in closed form: the lengths it leaves.

    Removing from the longer segment (b on a tie) until the pair fits is the same as giving each
    segment turns, a first: a short segment keeps everything and the other gets the rest;
    otherwise a keeps ceil(budget / 2) and b floor(budget / 2).
    """
    half_a, half_b = (budget + 1) // 2, budget // 2
    keep_a = tf.where(length_a <= half_a, length_a,
                      tf.where(length_b <= half_b, tf.minimum(length_a, budget - length_b),
                               half_a))
    keep_b = tf.where(length_a <= half_a, tf.minimum(length_b, budget - length_a),
                      tf.where(length_b <= half_b, length_b, half_b))
    return keep_a, keep_b
