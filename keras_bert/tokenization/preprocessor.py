"""BertPreprocessor: a Keras layer that turns raw text (single texts or pairs) into the TF Hub
encoder inputs in-graph with tensorflow-text, giving exactly the Python BertTokenizer's ids.

It routes its inputs and composes two layers, as keras-hub's preprocessors do:
``BertTokenizerLayer`` (text -> WordPiece ids; it holds the vocabulary, a ``.keras`` asset) and
``BertPackerLayer`` (``[CLS] a [SEP] (b [SEP])``: truncation, type ids, mask, padding). Also
``trim_to_longest``, which cuts a packed batch to its longest row.
"""

from __future__ import annotations

import os

import keras
import tensorflow as tf

from keras_bert.tokenization import vocab as vocab_lib
from keras_bert.tokenization.packer_layer import BertPackerLayer
from keras_bert.tokenization.pretrained_vocab import (pretrained_seq_length,
                                                      read_pretrained_vocabulary)
from keras_bert.tokenization.tokenizer_layer import BertTokenizerLayer, as_string_tensor

DEFAULT_SEQ_LENGTH = 128  # the packed length when neither the caller nor the checkpoint says one


@keras.saving.register_keras_serializable(package="keras_bert")
class BertPreprocessor(keras.layers.Layer):
    """Raw text -> ``input_word_ids``, ``input_mask``, ``input_type_ids`` (int32
    [batch, seq_length]), tokenized in-graph exactly as ``BertTokenizer`` does.

    Call it on a string tensor [batch] (single texts) or on a pair ``(texts_a, texts_b)``; pairs
    are truncated as Google does (the longer segment loses its last token until the pair fits).
    It works in ``tf.data.Dataset.map``, inside a Keras model and in a SavedModel (which then
    needs ``import tensorflow_text`` to load). String ops cannot be XLA-compiled, so the layer
    sets ``supports_jit = False`` and ``jit_compile="auto"`` leaves a model holding it uncompiled.

    Its two parts are layers of their own: ``tokenizer`` (a ``BertTokenizerLayer``) and
    ``packer`` (a ``BertPackerLayer``, whose [CLS], [SEP] and [PAD] ids follow the tokenizer's
    vocabulary: change the vocabulary through ``set_vocabulary`` here).

    Args:
        vocab_file: a vocab.txt (local or ``gs://``). Give this or ``vocabulary``.
        lower_case: lower-case and strip accents, for uncased models.
        seq_length: the packed length, [CLS] and [SEP] included.
        vocabulary: the tokens themselves, id 0 first, instead of a file. A ``.keras`` file
            carries them as the tokenizer's asset (``vocab.txt``), as keras-hub's tokenizers do;
            ``get_config`` names them by size and fingerprint only (``vocabulary_size``,
            ``vocabulary_sha256``), which keeps configs and Keras' error messages short.
        keep_special_tokens: when True, the literal text of a special token ("[CLS]", "[SEP]",
            "[MASK]", "[PAD]", "[UNK]") in the input becomes that token, as
            ``BertTokenizer(keep_special_tokens=True)`` does. By default it is tokenized as
            ordinary text, as Google does.
        vocabulary_size, vocabulary_sha256: a vocabulary named but not given, as ``get_config``
            records it (see ``BertTokenizerLayer``): ``from_config`` in the process that made
            the config finds the tokens; elsewhere ``keras.saving.load_model`` reads them from
            the ``.keras`` file, or ``set_vocabulary`` gives them.
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
                 seq_length: int = DEFAULT_SEQ_LENGTH, *, vocabulary: list[str] | None = None,
                 keep_special_tokens: bool = False, vocabulary_size: int | None = None,
                 vocabulary_sha256: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.supports_jit = False
        self.built = True
        self.tokenizer = BertTokenizerLayer(
            vocab_file, lower_case, vocabulary=vocabulary,
            keep_special_tokens=keep_special_tokens, vocabulary_size=vocabulary_size,
            vocabulary_sha256=vocabulary_sha256, name=f"{self.name}_tokenizer")
        self.packer = BertPackerLayer(
            seq_length, **_packing_ids(self.tokenizer.vocabulary, vocab_file),
            name=f"{self.name}_packer")

    vocabulary = property(lambda self: self.tokenizer.vocabulary,
                          doc="The tokens, id 0 first.")
    vocabulary_sha256 = property(lambda self: self.tokenizer.vocabulary_sha256,
                                 doc="The vocabulary's fingerprint (see get_config).")
    lower_case = property(lambda self: self.tokenizer.lower_case)
    keep_special_tokens = property(lambda self: self.tokenizer.keep_special_tokens)
    seq_length = property(lambda self: self.packer.seq_length)
    pad_id = property(lambda self: self.packer.pad_id, doc="Id of [PAD].")
    cls_id = property(lambda self: self.packer.cls_id, doc="Id of [CLS].")
    sep_id = property(lambda self: self.packer.sep_id, doc="Id of [SEP].")

    def set_vocabulary(self, tokens: list[str], source: str | None = None) -> None:
        """Uses ``tokens`` (id 0 first) as the vocabulary of the tokenizer and the packer."""
        ids = _packing_ids(tokens, source)
        self.tokenizer.set_vocabulary(tokens, source)
        self._pack_with(ids)

    @classmethod
    def from_pretrained(cls, path: str, lower_case: bool | None = None,
                        seq_length: int | None = None, **kwargs) -> "BertPreprocessor":
        """Builds the preprocessor of a checkpoint directory of any format whose vocabulary is
        a file (Google's, Hugging Face's, a keras-hub preset's), or of a vocab file.

        Args:
            path: the directory (with vocab.txt, the tokenizer.json transformers saves, or a
                keras-hub preset's tokenizer), or a vocab file.
            lower_case: overrides the casing read from the directory.
            seq_length: the packed length (None: the one the folder's author meant, a
                sentence-transformers folder's ``max_seq_length``, else 128).
            **kwargs: passed to the constructor.
        """
        tokens, found_lower_case = read_pretrained_vocabulary(path)
        if seq_length is None:
            seq_length = pretrained_seq_length(path) or DEFAULT_SEQ_LENGTH
        return cls(lower_case=found_lower_case if lower_case is None else lower_case,
                   seq_length=seq_length, vocabulary=tokens, **kwargs)

    @classmethod
    def from_checkpoint(cls, checkpoint, lower_case: bool | None = None,
                        seq_length: int | None = None, **kwargs) -> "BertPreprocessor":
        """The preprocessor of a checkpoint already read (``checkpoints.reading
        .read_checkpoint``), with its vocabulary, casing and meant length: nothing is read
        again.

        Args:
            checkpoint: a ``Checkpoint``.
            lower_case: overrides the checkpoint's casing.
            seq_length: the packed length (None: ``checkpoint.seq_length``, else 128).
            **kwargs: passed to the constructor.

        Raises:
            ValueError: the checkpoint has no vocabulary.
        """
        if checkpoint.vocabulary is None:
            raise ValueError(f"{checkpoint.path!r} has no vocabulary (vocab.txt or "
                             f"tokenizer.json); pass a vocab file to "
                             f"BertPreprocessor(vocab_file=...)")
        found = checkpoint.lower_case if checkpoint.lower_case is not None else True
        if seq_length is None:
            seq_length = checkpoint.seq_length or DEFAULT_SEQ_LENGTH
        return cls(lower_case=found if lower_case is None else lower_case,
                   seq_length=seq_length, vocabulary=list(checkpoint.vocabulary), **kwargs)

    @tf.autograph.experimental.do_not_convert
    def tokenize(self, texts) -> tf.RaggedTensor:
        """Tokenizes without packing: string [batch] -> int32 ids [batch, (tokens)].

        Bytes that are not valid UTF-8 are dropped, as in ``BertTokenizer``.
        """
        return self.tokenizer.tokenize(texts)

    @tf.autograph.experimental.do_not_convert
    def pack(self, ids_a: tf.RaggedTensor, ids_b: tf.RaggedTensor | None = None
             ) -> dict[str, tf.Tensor]:
        """Packs token ids (int32 [batch, (tokens)] each) as ``[CLS] a [SEP] (b [SEP])`` into
        the encoder inputs (int32 [batch, seq_length]); see ``BertPackerLayer.pack``."""
        return self.packer.pack(ids_a, ids_b)

    def __call__(self, inputs, *args, **kwargs):
        # Keras accepts only tensors as positional inputs; texts may come as Python strings,
        # lists or NumPy arrays, so they become string tensors here. A list of strings is one
        # batch; a tuple or list of batches is a segment pair.
        if isinstance(inputs, (tuple, list)) and not _is_texts(inputs):
            inputs = type(inputs)(as_string_tensor(x) for x in inputs)
        else:
            inputs = as_string_tensor(inputs)
        return super().__call__(inputs, *args, **kwargs)

    @tf.autograph.experimental.do_not_convert
    def call(self, inputs) -> dict[str, tf.Tensor]:
        texts = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        if not 1 <= len(texts) <= 2:
            raise ValueError(f"BertPreprocessor takes one or two text tensors, got {len(texts)}")
        return self.packer(tuple(self.tokenizer.tokenize(t) for t in texts))

    def compute_output_spec(self, inputs):
        return self.packer.compute_output_spec(inputs)

    def get_config(self) -> dict:
        """The settings and the vocabulary's size and fingerprint, not the tokens (see
        ``BertTokenizerLayer.get_config``)."""
        config = super().get_config()
        named = self.tokenizer.get_config()
        config.update(lower_case=self.lower_case, seq_length=self.seq_length,
                      keep_special_tokens=self.keep_special_tokens,
                      vocabulary_size=named["vocabulary_size"],
                      vocabulary_sha256=named["vocabulary_sha256"])
        return config

    def load_assets(self, dir_path: str | None) -> None:
        """Reads the vocabulary that the config named from the tokenizer's own assets
        (``tokenizer/vocab.txt``). Keras would hand the tokenizer its assets next; reading
        them now lets the packer take their [CLS], [SEP] and [PAD] ids."""
        if dir_path is None:
            return
        dir_path = os.path.join(dir_path, "tokenizer")
        self.tokenizer.load_assets(dir_path)
        self._pack_with(_packing_ids(self.tokenizer.vocabulary,
                                     os.path.join(dir_path, vocab_lib.VOCAB_FILENAME)))

    def with_seq_length(self, seq_length: int) -> "BertPreprocessor":
        """A copy that packs to ``seq_length``."""
        return type(self)(lower_case=self.lower_case, seq_length=seq_length,
                          vocabulary=self.tokenizer.get_vocabulary(),
                          keep_special_tokens=self.keep_special_tokens)

    def _pack_with(self, ids: dict[str, int]) -> None:
        """Gives the packer the [CLS], [SEP] and [PAD] ids of the tokenizer's vocabulary."""
        self.packer.cls_id, self.packer.sep_id, self.packer.pad_id = (
            ids["cls_id"], ids["sep_id"], ids["pad_id"])


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


def _packing_ids(tokens: list[str], source: str | None) -> dict[str, int]:
    """The [CLS], [SEP] and [PAD] ids of a vocabulary, checked."""
    vocab = vocab_lib.validate_vocab(tokens, source=source or "<vocabulary>")
    missing = [t for t in (vocab_lib.PAD, vocab_lib.CLS, vocab_lib.SEP) if t not in vocab]
    if missing:
        raise ValueError(f"the vocabulary ({source or 'in memory'}) lacks {missing}; "
                         f"packing needs them")
    return dict(cls_id=vocab[vocab_lib.CLS], sep_id=vocab[vocab_lib.SEP],
                pad_id=vocab[vocab_lib.PAD])


def _is_texts(values) -> bool:
    return bool(values) and all(isinstance(v, (str, bytes)) for v in values)
