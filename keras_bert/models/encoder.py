"""BertEncoder: the BERT network as a Keras functional model with TF Hub's input and output names."""

from __future__ import annotations

import logging
from typing import Any

import keras
from keras import ops

from keras_bert.config import BertConfig
from keras_bert.layers import BertEmbeddings, TransformerBlock, attention_mask_bias
from keras_bert.layers.shapes import TOKEN_IDS, check_input_ranks
from keras_bert.optimization import keras_internals
from keras_bert.tokenization.packing import INPUT_NAMES

logger = logging.getLogger(__name__)


class RefusesCalibratedSave:
    """Mixed in before ``keras.Model`` (BertEncoder, BertTask): ``save`` refuses a copy that an
    int8 export calibrated (``BertEncoder.check_not_calibrated``) before Keras opens the file,
    which Keras would otherwise leave half-written when the config fails."""

    def save(self, filepath, *args, **kwargs) -> None:
        (self if isinstance(self, BertEncoder) else self.encoder).check_not_calibrated()
        super().save(filepath, *args, **kwargs)


@keras.saving.register_keras_serializable(package="keras_bert")
class BertEncoder(RefusesCalibratedSave, keras.Model):
    """The BERT encoder: embeddings, L post-LN transformer blocks and the tanh pooler.

    Constructor arguments are BertConfig's fields (``BertEncoder.from_bert_config`` takes a
    config). Weights start as truncated normal(initializer_range), biases zero, LayerNorm (1, 0).

    Inputs (a dict, TF Hub names), int32 [batch, seq]:
        input_word_ids: WordPiece ids, [CLS] first.
        input_mask: 1 for tokens, 0 for padding.
        input_type_ids: segment ids, 0 for the first segment, 1 for the second.

    Outputs (a dict):
        sequence_output: [batch, seq, hidden], the last layer.
        pooled_output: [batch, hidden], tanh(dense(sequence_output[:, 0])).
        encoder_outputs: a list of num_hidden_layers tensors [batch, seq, hidden], one per layer.

    Under a mixed policy (``dtype="mixed_bfloat16"`` or ``"mixed_float16"``) weights stay float32,
    matmuls run in the half type, and softmax and LayerNorm compute in float32.

    ``quantize("int8")`` (Keras' convention) stores ``int8_layers()`` as int8 and runs them on
    oneDNN's int8 matmul (``keras_bert.layers.int8``): in ``predict``, after saving to ``.keras``
    and ``keras.saving.load_model``, and in exports, which are then int8 exports.

    Example:
    >>> import numpy as np
    >>> encoder = BertEncoder(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=64)
    >>> ids = np.array([[2, 10, 11, 3, 0]], dtype="int32")
    >>> outputs = encoder({"input_word_ids": ids, "input_mask": np.int32(ids > 0),
    ...                    "input_type_ids": np.zeros_like(ids)})
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 5, 32), (1, 32))
    >>> len(outputs["encoder_outputs"])
    2
    """

    def __init__(self, vocab_size: int = 30522, hidden_size: int = 768,
                 num_hidden_layers: int = 12, num_attention_heads: int = 12,
                 intermediate_size: int = 3072, hidden_act: str = "gelu",
                 hidden_dropout_prob: float = 0.1, attention_probs_dropout_prob: float = 0.1,
                 max_position_embeddings: int = 512, type_vocab_size: int = 2,
                 initializer_range: float = 0.02, layer_norm_eps: float = 1e-12,
                 dtype: Any = None, **kwargs):
        config = BertConfig(
            vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=num_hidden_layers,
            num_attention_heads=num_attention_heads, intermediate_size=intermediate_size,
            hidden_act=hidden_act, hidden_dropout_prob=hidden_dropout_prob,
            attention_probs_dropout_prob=attention_probs_dropout_prob,
            max_position_embeddings=max_position_embeddings, type_vocab_size=type_vocab_size,
            initializer_range=initializer_range, layer_norm_eps=layer_norm_eps)

        # === Layers ===
        embeddings = BertEmbeddings(
            vocab_size, hidden_size, max_position_embeddings=max_position_embeddings,
            type_vocab_size=type_vocab_size, initializer_range=initializer_range,
            hidden_dropout_prob=hidden_dropout_prob, layer_norm_eps=layer_norm_eps,
            dtype=dtype, name="embeddings")
        blocks = [
            TransformerBlock(
                hidden_size, num_attention_heads, intermediate_size, hidden_act=hidden_act,
                hidden_dropout_prob=hidden_dropout_prob,
                attention_probs_dropout_prob=attention_probs_dropout_prob,
                initializer_range=initializer_range, layer_norm_eps=layer_norm_eps,
                dtype=dtype, name=f"transformer_layer_{i}")
            for i in range(num_hidden_layers)
        ]
        pooler = keras.layers.Dense(
            hidden_size, activation="tanh",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=dtype, name="pooler")

        # === Functional model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUT_NAMES}
        hidden = embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
        mask_bias = keras.layers.Lambda(attention_mask_bias, name="attention_mask_bias")(
            inputs["input_mask"])
        encoder_outputs = []
        for block in blocks:
            hidden = block(hidden, mask_bias)
            encoder_outputs.append(hidden)
        first_token = keras.layers.Lambda(lambda x: x[:, 0, :], name="first_token")(hidden)
        pooled = pooler(first_token)
        super().__init__(
            inputs=inputs,
            outputs={"sequence_output": hidden, "pooled_output": pooled,
                     "encoder_outputs": encoder_outputs},
            **kwargs)
        if dtype is not None:
            # Functional models do not keep the policy they were given; the layers have it.
            self.dtype_policy = keras.dtype_policies.get(dtype)
        if isinstance(self.dtype_policy, keras.dtype_policies.DTypePolicyMap):
            # A quantized encoder's config: each layer keeps its own policy, so it saves again.
            keras_internals.resolve_policy_maps(self)

        # === Config ===
        self.bert_config = config
        self.embeddings = embeddings
        self.transformer_layers = blocks
        self.pooler = pooler

    def __call__(self, inputs, *args, **kwargs):
        # Before Keras' own input handling, whose error names neither the input nor its axes.
        check_input_ranks("BertEncoder", inputs, dict.fromkeys(INPUT_NAMES, TOKEN_IDS))
        return super().__call__(inputs, *args, **kwargs)

    @property
    def word_embeddings(self) -> keras.layers.Embedding:
        return self.embeddings.word_embeddings

    @classmethod
    def from_bert_config(cls, config: BertConfig, **kwargs) -> "BertEncoder":
        """An encoder with random weights for ``config``."""
        return cls(**config.to_dict(), **kwargs)

    @classmethod
    def from_preset(cls, preset: str, *, random_weights: bool = False,
                    **kwargs) -> "BertEncoder":
        """An encoder from a preset: a directory (local or gs://) with weights loads them (our
        ``save_to_preset`` directories, Google or Hugging Face checkpoints); a named
        architecture (``BertConfig.presets()``, e.g. "bert_base_uncased") has no weights here
        (nothing is downloaded), so it gives random weights, with a warning unless
        ``random_weights=True`` says that is what you want.
        """
        from keras_bert import fileio
        if preset not in BertConfig.presets() and ("://" in preset or fileio.exists(preset)):
            if random_weights:
                raise ValueError(f"{preset!r} is a directory with weights; random_weights=True "
                                 "is for named architectures")
            return cls.from_pretrained(preset, **kwargs)
        if not random_weights:
            logger.warning(
                "BertEncoder.from_preset(%r): a named architecture, so the weights are RANDOM "
                "(keras-bert downloads nothing). Load weights with from_pretrained(<Google or "
                "Hugging Face checkpoint directory>) or from_preset(<a saved preset "
                "directory>); pass random_weights=True to say random weights are intended.",
                preset)
        return cls.from_bert_config(BertConfig.preset(preset), **kwargs)

    def save_to_preset(self, directory: str, vocab_file: str | None = None,
                       overwrite: bool = False) -> str:
        """Saves the encoder (with ``vocab_file``, for raw text) as a preset directory that
        ``from_preset``/``from_pretrained`` load; see ``keras_bert.models.checkpoint_io.save_preset``."""
        from keras_bert.models.checkpoint_io import save_preset
        return save_preset(self, directory, vocab_file, overwrite)

    @classmethod
    def from_pretrained(cls, path: str, **kwargs) -> "BertEncoder":
        """Loads weights from a Google TF1 directory, a Hugging Face directory or our own save.

        The format is detected from the files present; ``path`` may be local or gs://.
        Keyword arguments (e.g. ``dtype``) are passed to the constructor.
        """
        from keras_bert.models.checkpoint_io import load_encoder
        return load_encoder(path, **kwargs)

    def dummy_inputs(self, batch_size: int = 1, seq_length: int = 8) -> dict[str, Any]:
        """All-[PAD]-free int32 inputs of the given shape, for building or tracing."""
        ones = ops.ones((batch_size, seq_length), dtype="int32")
        return {"input_word_ids": ones, "input_mask": ones, "input_type_ids": ones * 0}

    def int8_layers(self) -> list[keras.layers.Layer]:
        """The layers ``quantize("int8")`` quantizes (the same as an int8 export): in every
        block the query, key, value, attention-output, intermediate and output Dense layers,
        and the word embeddings. The pooler ([batch, hidden]) and the position and segment
        tables stay float32: int8 saves no time there."""
        layers = [self.embeddings.word_embeddings]
        for block in self.transformer_layers:
            layers += [block.attention.query, block.attention.key, block.attention.value,
                       block.attention_output, block.intermediate, block.output_dense]
        return layers

    def quantize(self, mode=None, config=None, filters=None, **kwargs) -> None:
        """``keras.Model.quantize``; ``"int8"`` without ``filters`` quantizes ``int8_layers()``."""
        super().quantize(mode, config=config,
                         filters=quantization_filters(self, mode, config, filters), **kwargs)

    def check_not_calibrated(self) -> None:
        """Raises ValueError if an int8 export calibrated this encoder (export/int8.calibrate):
        such a copy cannot be saved (``TransformerBlock.check_not_calibrated``)."""
        for block in self.transformer_layers:
            block.check_not_calibrated()

    def get_config(self) -> dict[str, Any]:
        self.check_not_calibrated()
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self._saved_dtype_policy()),
            **self.bert_config.to_dict(),
        }

    def _saved_dtype_policy(self) -> keras.DTypePolicy:
        """The model's policy; once quantized, a DTypePolicyMap from each quantized layer's path
        to its policy (Keras' way to save them: the constructor hands it to every layer, and
        each one builds the int8 weights its path names, which the saved ones then fill)."""
        if isinstance(self.dtype_policy, keras.dtype_policies.DTypePolicyMap):
            return self.dtype_policy
        quantized = {layer.path: layer.dtype_policy for layer in keras_internals.sublayers(self)
                     if layer.quantization_mode is not None}
        if not quantized:
            return self.dtype_policy
        return keras.dtype_policies.DTypePolicyMap(default_policy=self.dtype_policy,
                                                   policy_map=quantized)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "BertEncoder":
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)


def quantization_filters(encoder: BertEncoder, mode, config, filters):
    """The ``filters`` that ``quantize`` of ``encoder`` (or of a task model around it) hands to
    Keras: for int8 without filters, ``encoder.int8_layers()``; otherwise ``filters``."""
    if filters is not None or (mode or getattr(config, "mode", None)) != "int8":
        return filters
    chosen = {id(layer) for layer in encoder.int8_layers()}
    return lambda layer: id(layer) in chosen
