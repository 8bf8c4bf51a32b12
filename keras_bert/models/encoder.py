"""BertEncoder: the BERT network as a Keras functional model with TF Hub's input and output names."""

from __future__ import annotations

import logging
import os
from typing import Any

import keras
from keras import ops

from keras_bert import fileio
from keras_bert.checkpoints.stored_head import StoredHead
from keras_bert.checkpoints.names import encoder_weight_names, is_pooler
from keras_bert.checkpoints.reading import Checkpoint
from keras_bert.config import BertConfig
from keras_bert.errors import SaveError, one_line_reason
from keras_bert.layers import BertEmbeddings, TransformerBlock, attention_mask_bias
from keras_bert.layers.int8 import check_int8_kernel, int8_dense_config
from keras_bert.layers.shapes import TOKEN_IDS, check_input_ranks
from keras_bert import keras_internals
from keras_bert.models.int8_calibration import calibrate_before_quantize
from keras_bert.models.loading import CheckpointLoading
from keras_bert.tokenization.packing import INPUT_NAMES

logger = logging.getLogger(__name__)


class SavesWhole:
    """Mixed in before ``keras.Model`` (BertEncoder, BertPretrainer, BertTask): ``save`` writes
    a scratch file beside the target and renames it into place once complete, so a failed save
    (a full disk) leaves an earlier file there as it was and says so in one line
    (``SaveError``)."""

    def save(self, filepath: fileio.PathLike, overwrite: bool = True, zipped: bool | None = None,
             **kwargs) -> None:
        """``keras.Model.save``, all or nothing (see the class)."""
        where = os.fspath(filepath)
        if not overwrite and fileio.exists(where):
            raise fileio.OutputExistsError(where)
        try:
            with fileio.atomic_path(where) as scratch:
                super().save(scratch, overwrite=True, zipped=zipped, **kwargs)
        except (OSError, RuntimeError) as e:
            raise SaveError(f"could not save the {type(self).__name__} to {where!r}: "
                            f"{one_line_reason(e)}; {where!r} was left as it was") from e


@keras.saving.register_keras_serializable(package="keras_bert")
class BertEncoder(CheckpointLoading, SavesWhole, keras.Model):
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
    ``quantize("int8", calibration_texts=..., preprocessor=...)`` first gives most of them static
    input ranges from sample texts (``models/int8_calibration.py``), which run faster;
    ``static_int8_ranges=True`` (a calibrated encoder's config) builds those ranges' weights.

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
                 dtype: Any = None, static_int8_ranges: bool = False, **kwargs):
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
                static_int8_ranges=static_int8_ranges, dtype=dtype,
                name=f"transformer_layer_{i}")
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
        self.refuse_xla_where_int8()  # a quantized encoder's config gives int8 layers

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
    def from_architecture(cls, name: str, **kwargs) -> "BertEncoder":
        """A new encoder of a named architecture (``BertConfig.presets()``, e.g.
        "bert_base_uncased" or "L-4_H-256_A-4"), with random weights, as for pretraining from
        scratch: keras-bert downloads nothing. Pretrained weights load with
        ``from_pretrained(<checkpoint directory>)``. Keyword arguments (e.g. ``dtype``) go to
        the constructor."""
        if name not in BertConfig.presets():
            raise ValueError(f"{name!r} is not a named architecture "
                             f"({', '.join(BertConfig.presets())}); load a checkpoint "
                             f"directory with BertEncoder.from_pretrained({name!r})")
        return cls.from_bert_config(BertConfig.preset(name), **kwargs)

    # ------------------------------------------------------------ from_pretrained's steps
    @classmethod
    def _new_encoder(cls, config: BertConfig, asked: dict[str, Any]) -> "BertEncoder":
        return cls.from_bert_config(config, **asked)

    @classmethod
    def _around(cls, encoder: "BertEncoder", checkpoint: Checkpoint, asked: dict[str, Any]
                ) -> "BertEncoder":
        return encoder

    def _weights_in(self, checkpoint: Checkpoint):
        return encoder_weight_names(self), is_pooler

    def _after_weights(self, checkpoint: Checkpoint, weights) -> None:
        if checkpoint.head is not None:
            logger.info("%s holds %s; the BertEncoder takes the encoder alone", checkpoint.path,
                        checkpoint.head.describe())

    def checkpoint_head(self) -> StoredHead | None:
        """An encoder has no head (``save_checkpoint`` writes BertModel)."""
        return None

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

    def quantize(self, mode=None, config=None, filters=None, *, calibration_texts=None,
                 preprocessor=None, **kwargs) -> None:
        """``keras.Model.quantize``; ``"int8"`` without ``filters`` quantizes ``int8_layers()``
        (``quantization_passes``). With ``calibration_texts`` (a few hundred texts like the
        ones to be served) and the ``preprocessor`` that tokenizes them, the float32 encoder is
        first calibrated on them (``models.int8_calibration.calibrate``: static input ranges,
        the export's faster int8 path), in place."""
        if calibration_texts is not None:
            calibrate_before_quantize(self, preprocessor, calibration_texts, mode, config,
                                      filters, kwargs)
        quantize_passes(self, self, mode, config, filters, kwargs)

    def refuse_xla_where_int8(self) -> None:
        """Marks the int8 layers ``supports_jit = False``: at inference they run oneDNN's
        ``_QuantizedMatMul``, which XLA cannot compile, so Keras' ``jit_compile="auto"`` (XLA on
        a GPU) leaves a quantized model's ``predict`` and ``fit`` unjitted instead of failing."""
        for layer in self.int8_layers():
            if layer.quantization_mode == "int8":
                layer.supports_jit = False

    @property
    def static_int8_ranges(self) -> bool:
        """Whether calibration gave the blocks static int8 input ranges (their kernels then
        hold W / c: ``models/int8_calibration.py``)."""
        return any(block.static_int8_ranges for block in self.transformer_layers)

    def get_config(self) -> dict[str, Any]:
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self._saved_dtype_policy()),
            **self.bert_config.to_dict(),
        }
        if self.static_int8_ranges:
            config["static_int8_ranges"] = True
        return config

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


def quantize_passes(model: keras.Model, encoder: BertEncoder, mode, config, filters,
                    kwargs: dict) -> None:
    """``keras.Model.quantize`` of ``model`` (``encoder`` or a task model around it) for each of
    ``quantization_passes``, with one garbage collection for them all
    (``keras_internals.collecting_once``); then ``encoder``'s int8 layers refuse XLA."""
    with keras_internals.collecting_once():
        for pass_mode, pass_config, pass_filters in quantization_passes(encoder, mode, config,
                                                                        filters):
            keras.Model.quantize(model, pass_mode, config=pass_config, filters=pass_filters,
                                 **kwargs)
    encoder.refuse_xla_where_int8()


def quantization_passes(encoder: BertEncoder, mode, config, filters) -> list[tuple]:
    """The ``(mode, config, filters)`` of each ``keras.Model.quantize`` call that ``quantize`` of
    ``encoder`` (or of a task model around it) makes.

    For "int8" without filters: ``encoder.int8_layers()``; with Keras' default weight
    quantizer (``config`` None, or the default config Keras resolves it to), in two passes: the
    Dense layers with 7-bit weights (``layers.int8.INT8_WEIGHT_RANGE``, which oneDNN's int8
    matmul sums exactly on every x86-64 CPU) and the word embeddings with Keras' 8-bit rows.
    Otherwise the call as given. For int8 it first checks that this TensorFlow runs oneDNN's
    int8 matmul (``check_int8_kernel``: Int8KernelMissing, before anything is quantized)."""
    if (mode or getattr(config, "mode", None)) != "int8":
        return [(mode, config, filters)]
    check_int8_kernel()
    if filters is not None:
        return [(mode, config, filters)]
    chosen = {id(layer) for layer in encoder.int8_layers()}
    if config is not None and getattr(config, "weight_quantizer", None) is not None:
        return [(mode, config, lambda layer: id(layer) in chosen)]
    embeddings = encoder.embeddings.word_embeddings
    dense = chosen - {id(embeddings)}
    return [("int8", int8_dense_config(), lambda layer: id(layer) in dense),
            ("int8", config, lambda layer: layer is embeddings)]

