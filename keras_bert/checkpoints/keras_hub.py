"""keras-hub BERT presets (``save_to_preset`` directories of ``keras_hub.models.BertBackbone`` or
``BertTextClassifier``), read with json and h5py into Google's TF1 names: no keras-hub needed.

A preset directory holds ``config.json`` (the backbone's Keras config), ``model.weights.h5`` (its
weights), ``tokenizer.json`` with ``assets/tokenizer/vocabulary.txt``, ``metadata.json``, and for
a task ``task.json``, ``task.weights.h5`` (the task's own layers) and ``preprocessor.json``.
tests/fixtures/keras_hub/README.md documents the layout that this module reads.

What keras-hub 0.32's BertBackbone fixes in code rather than in config.json, and this reader
therefore assumes: GELU is ``gelu_approximate`` (the tanh form, Google's ``"gelu"``), every
LayerNorm epsilon is 1e-12, blocks are post-LN (``normalize_first=False``), the initializer
stddev is 0.02, and ``dropout`` is both the hidden and the attention-probability dropout.
``num_segments`` is BERT's ``type_vocab_size``. BertTextClassifier's head is dropout then one
Dense(num_classes) on ``pooled_output``: Google's run_classifier.py head, no hidden layer.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

import h5py
import numpy as np

from keras_bert import fileio
from keras_bert.config import DEFAULT_LAYER_NORM_EPS, BertConfig, _read_json
from keras_bert.fileio import join
from keras_bert.tokenization.pretrained_vocab import (KERAS_HUB_VOCABULARY_NAME,
                                                      read_keras_hub_tokenizer)

logger = logging.getLogger(__name__)

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.weights.h5"
TASK_NAME = "task.json"
TASK_WEIGHTS_NAME = "task.weights.h5"
BACKBONE_CLASS = "BertBackbone"
TASK_CLASSES = ("BertTextClassifier",)
# What keras-hub's BertBackbone hard-codes (keras_hub/src/models/bert/bert_backbone.py).
KERAS_HUB_ACTIVATION = "gelu"  # keras_hub.src.utils.keras_utils.gelu_approximate: the tanh form
KERAS_HUB_INITIALIZER_STDDEV = 0.02
FLOAT_POLICIES = ("float32", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")


@dataclasses.dataclass
class KerasHubPreset:
    """A keras-hub BERT preset in keras-bert's terms.

    Args:
        config: the architecture (see the module docstring for what keras-hub fixes in code).
        values: every encoder weight under Google's TF1 name (``bert/embeddings/...``,
            ``bert/encoder/layer_N/...``, ``bert/pooler/dense/...``), float32, in Google's
            layouts (dense kernels [in, out]).
        vocabulary: the tokens of ``assets/tokenizer/vocabulary.txt``, id 0 first.
        lower_case: the tokenizer's ``lowercase``.
        strip_accents: the tokenizer's ``strip_accents``. keras-hub's BertTokenizer defaults to
            False, also when lowercasing, where Google's uncased tokenizer strips accents: texts
            with accents then tokenize differently.
        head: for a BertTextClassifier, ``{"task": "classification", "output_weights":
            [num_classes, hidden] (run_classifier.py's layout), "output_bias": [num_classes],
            "num_classes": n, "activation": None or the logits' activation name ("softmax"),
            "dropout": the rate before the Dense}``; None for a backbone.
        task_class: ``task.json``'s class (``"BertTextClassifier"``), None for a backbone.
    """

    config: BertConfig
    values: dict[str, np.ndarray]
    vocabulary: list[str]
    lower_case: bool
    strip_accents: bool
    head: dict[str, Any] | None
    task_class: str | None


def is_keras_hub_preset(path: fileio.PathLike) -> bool:
    """Whether ``path`` is a directory whose config.json is a keras-hub Keras config (any model)."""
    config_path = join(path, CONFIG_NAME)
    if not (fileio.isdir(path) and fileio.exists(config_path)):
        return False
    try:
        config = _read_json(config_path)
    except ValueError:
        return False
    return (str(config.get("registered_name", "")).startswith("keras_hub>")
            or str(config.get("module", "")).startswith("keras_hub."))


def read_keras_hub_preset(path: fileio.PathLike) -> KerasHubPreset:
    """Reads a keras-hub BertBackbone or BertTextClassifier preset directory (local or gs://).

    Raises:
        ValueError: another architecture or task, a tokenizer our BertTokenizer cannot follow,
            or weights that do not fit the config; the message names the file and the field.
        FileNotFoundError: a file of the preset is missing.
    """
    path = os.fspath(path)
    config_path = join(path, CONFIG_NAME)
    backbone_config = _keras_config(config_path, BACKBONE_CLASS)
    config = _bert_config(backbone_config["config"], config_path)
    values = _read_backbone_weights(join(path, WEIGHTS_NAME), config)
    vocabulary, lower_case, strip_accents = _read_tokenizer(path, config)

    task_path = join(path, TASK_NAME)
    head = task_class = None
    if fileio.exists(task_path):
        task = _read_json(task_path)
        task_class = task.get("class_name")
        if task_class not in TASK_CLASSES:
            raise ValueError(f"{task_path}: class_name is {task_class!r}; keras-bert reads the "
                             f"{' / '.join(TASK_CLASSES)} task of a keras-hub preset (or its "
                             f"backbone alone: remove {TASK_NAME} to read only the encoder)")
        head = _read_classifier_head(join(path, TASK_WEIGHTS_NAME), task.get("config", {}),
                                     task_path, config.hidden_size)
    return KerasHubPreset(config=config, values=values, vocabulary=vocabulary,
                          lower_case=lower_case, strip_accents=strip_accents, head=head,
                          task_class=task_class)


# ---------------------------------------------------------------------------------- configs
def _keras_config(path: str, expected_class: str) -> dict[str, Any]:
    """A Keras config file whose ``class_name`` must be ``expected_class``."""
    config = _read_json(path)
    if config.get("class_name") != expected_class:
        raise ValueError(f"{path}: class_name is {config.get('class_name')!r}, not "
                         f"{expected_class!r}; keras-bert reads keras-hub's BERT presets only")
    if not isinstance(config.get("config"), dict):
        raise ValueError(f"{path}: no config object")
    return config


def _bert_config(backbone: dict[str, Any], where: str) -> BertConfig:
    """BertConfig for a BertBackbone config (config.json's ``config``)."""
    dtype = backbone.get("dtype")
    policy = dtype
    if isinstance(dtype, dict):  # a serialized DTypePolicy; quantized ones have other classes
        policy = dtype.get("class_name") == "DTypePolicy" and dtype.get("config", {}).get("name")
    if dtype is not None and policy not in FLOAT_POLICIES:
        raise ValueError(f"{where}: config.dtype is {dtype!r}; keras-bert reads float presets "
                         f"({', '.join(FLOAT_POLICIES)}), not quantized ones")
    missing = [k for k in ("vocabulary_size", "num_layers", "num_heads", "hidden_dim",
                           "intermediate_dim") if k not in backbone]
    if missing:
        raise ValueError(f"{where}: config lacks {', '.join(missing)}")
    dropout = backbone.get("dropout", 0.1)
    return BertConfig.from_dict({
        "vocab_size": backbone["vocabulary_size"],
        "hidden_size": backbone["hidden_dim"],
        "num_hidden_layers": backbone["num_layers"],
        "num_attention_heads": backbone["num_heads"],
        "intermediate_size": backbone["intermediate_dim"],
        "hidden_act": KERAS_HUB_ACTIVATION,
        "hidden_dropout_prob": dropout,
        "attention_probs_dropout_prob": dropout,
        "max_position_embeddings": backbone.get("max_sequence_length", 512),
        "type_vocab_size": backbone.get("num_segments", 2),
        "initializer_range": KERAS_HUB_INITIALIZER_STDDEV,
        "layer_norm_eps": DEFAULT_LAYER_NORM_EPS,
    }, source=where)


def _read_tokenizer(path: str, config: BertConfig) -> tuple[list[str], bool, bool]:
    """(vocabulary, lowercase, strip_accents) of the preset's BertTokenizer, its size checked
    against the backbone's."""
    vocabulary, lower_case, strip_accents = read_keras_hub_tokenizer(path)
    if len(vocabulary) != config.vocab_size:
        raise ValueError(f"{join(path, KERAS_HUB_VOCABULARY_NAME)} has {len(vocabulary)} tokens "
                         f"but {CONFIG_NAME} says vocabulary_size={config.vocab_size}")
    return vocabulary, lower_case, strip_accents


# ---------------------------------------------------------------------------------- weights
class _Weights:
    """The datasets of a Keras ``*.weights.h5``: ``layers/<layer>/.../vars/<i>`` as float32."""

    def __init__(self, h5: h5py.File, where: str):
        self.h5 = h5
        self.where = where

    def check_name(self, layer: str, name: str) -> None:
        """Fails unless ``<layer>/vars`` exists and, where Keras recorded the layer's name as
        the group's ``name`` attribute, that is ``name``."""
        group = f"{layer}/vars"
        if group not in self.h5:
            raise ValueError(f"{self.where} has no {group}: not the weights of keras-hub's "
                             "BertBackbone / BertTextClassifier as keras-bert knows them")
        recorded = self.h5[group].attrs.get("name")
        if recorded is not None and recorded != name:
            raise ValueError(f"{self.where}: {group} holds layer {recorded!r}, expected {name!r}")

    def get(self, layer: str, index: int, shape: tuple[int, ...], name: str) -> np.ndarray:
        """``<layer>/vars/<index>`` as float32 (float16 and Keras' bfloat16 widened), checked
        against ``shape`` and the layer's ``name`` (see check_name)."""
        self.check_name(layer, name)
        dataset = self.h5[f"{layer}/vars/{index}"]
        if dataset.shape != shape:
            raise ValueError(f"{self.where}: {dataset.name} has shape {dataset.shape}, but the "
                             f"config implies {shape}")
        if dataset.attrs.get("dtype") == "bfloat16" and dataset.dtype.itemsize == 2:
            # Keras stores bfloat16 as 2 opaque bytes: the top half of a float32.
            bits = np.frombuffer(dataset[()].tobytes(), dtype="<u2").astype(np.uint32) << 16
            return bits.view(np.float32).reshape(shape)
        if dataset.dtype.kind != "f":
            raise ValueError(f"{self.where}: {dataset.name} has dtype {dataset.dtype}, expected "
                             "floats (a quantized preset?)")
        return np.asarray(dataset, dtype=np.float32)


def _open_h5(path: str):
    if not fileio.exists(path):
        sharded = path[: -len(".h5")] + ".json"
        if fileio.exists(sharded):
            raise ValueError(f"{sharded}: sharded weights (save_to_preset(max_shard_size=...)) "
                             "are not read by keras-bert; save the preset unsharded")
        raise FileNotFoundError(f"keras-hub preset file {path} does not exist")
    return fileio.open_file(path, "rb")


def _read_backbone_weights(path: str, config: BertConfig) -> dict[str, np.ndarray]:
    """Google-named float32 arrays from a BertBackbone's model.weights.h5."""
    hidden, heads = config.hidden_size, config.num_attention_heads
    head_size, inner = config.head_size, config.intermediate_size
    with _open_h5(path) as f, h5py.File(f, "r") as h5:
        w = _Weights(h5, path)
        values = {
            "bert/embeddings/word_embeddings": w.get(
                "layers/reversible_embedding", 0, (config.vocab_size, hidden), "token_embedding"),
            "bert/embeddings/position_embeddings": w.get(
                "layers/position_embedding", 0, (config.max_position_embeddings, hidden),
                "position_embedding"),
            "bert/embeddings/token_type_embeddings": w.get(
                "layers/embedding", 0, (config.type_vocab_size, hidden), "segment_embedding"),
            **_layer_norm(w, "layers/layer_normalization", "bert/embeddings/LayerNorm", hidden,
                          "embeddings_layer_norm"),
            **_dense(w, "layers/dense", "bert/pooler/dense", hidden, hidden, "pooled_dense"),
        }
        for i in range(config.num_hidden_layers):
            # Keras names a model's layers' groups by class, numbered in order.
            block = "layers/transformer_encoder" + (f"_{i}" if i else "")
            w.check_name(block, f"transformer_layer_{i}")
            google = f"bert/encoder/layer_{i}"
            attention = f"{block}/_self_attention_layer"
            for part in ("query", "key", "value"):
                # EinsumDense kernel [hidden, heads, head_size] -> Google's [hidden, hidden].
                values[f"{google}/attention/self/{part}/kernel"] = w.get(
                    f"{attention}/{part}_dense", 0, (hidden, heads, head_size), part
                ).reshape(hidden, hidden)
                values[f"{google}/attention/self/{part}/bias"] = w.get(
                    f"{attention}/{part}_dense", 1, (heads, head_size), part).reshape(hidden)
            # Output projection [heads, head_size, hidden] -> [hidden, hidden].
            values[f"{google}/attention/output/dense/kernel"] = w.get(
                f"{attention}/output_dense", 0, (heads, head_size, hidden), "attention_output"
            ).reshape(hidden, hidden)
            values[f"{google}/attention/output/dense/bias"] = w.get(
                f"{attention}/output_dense", 1, (hidden,), "attention_output")
            values.update(_layer_norm(w, f"{block}/_self_attention_layer_norm",
                                      f"{google}/attention/output/LayerNorm", hidden,
                                      "self_attention_layer_norm"))
            values.update(_dense(w, f"{block}/_feedforward_intermediate_dense",
                                 f"{google}/intermediate/dense", hidden, inner,
                                 "feedforward_intermediate_dense"))
            values.update(_dense(w, f"{block}/_feedforward_output_dense",
                                 f"{google}/output/dense", inner, hidden,
                                 "feedforward_output_dense"))
            values.update(_layer_norm(w, f"{block}/_feedforward_layer_norm",
                                      f"{google}/output/LayerNorm", hidden,
                                      "feedforward_layer_norm"))
        extra = "layers/transformer_encoder" + f"_{config.num_hidden_layers}"
        if extra in h5:
            raise ValueError(f"{path} has {extra} but {CONFIG_NAME} says num_layers="
                             f"{config.num_hidden_layers}")
    return values


def _dense(w: _Weights, layer: str, google: str, fan_in: int, fan_out: int, name: str
           ) -> dict[str, np.ndarray]:
    return {f"{google}/kernel": w.get(layer, 0, (fan_in, fan_out), name),
            f"{google}/bias": w.get(layer, 1, (fan_out,), name)}


def _layer_norm(w: _Weights, layer: str, google: str, width: int, name: str
                ) -> dict[str, np.ndarray]:
    return {f"{google}/gamma": w.get(layer, 0, (width,), name),
            f"{google}/beta": w.get(layer, 1, (width,), name)}


def _read_classifier_head(path: str, task: dict[str, Any], task_path: str, hidden: int
                          ) -> dict[str, Any]:
    """BertTextClassifier's Dense ``logits`` from task.weights.h5, in run_classifier.py's layout."""
    backbone_class = task.get("backbone", {}).get("class_name")
    if backbone_class != BACKBONE_CLASS:
        raise ValueError(f"{task_path}: config.backbone.class_name is {backbone_class!r}, not "
                         f"{BACKBONE_CLASS!r}")
    num_classes = task.get("num_classes")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes <= 0:
        raise ValueError(f"{task_path}: config.num_classes must be a positive integer, got "
                         f"{num_classes!r}")
    activation = task.get("activation")
    if not (activation is None or isinstance(activation, str)):
        raise ValueError(f"{task_path}: config.activation is {activation!r}; keras-bert reads a "
                         "named Keras activation (None, 'linear', 'softmax', ...)")
    with _open_h5(path) as f, h5py.File(f, "r") as h5:
        w = _Weights(h5, path)
        kernel = w.get("layers/dense", 0, (hidden, num_classes), "logits")
        bias = w.get("layers/dense", 1, (num_classes,), "logits")
    return {"task": "classification", "output_weights": np.ascontiguousarray(kernel.T),
            "output_bias": bias, "num_classes": num_classes,
            "activation": None if activation in (None, "linear") else activation,
            "dropout": float(task.get("dropout", 0.1))}
