"""Hugging Face BERT folders: config.json + weights (model.safetensors, sharded safetensors, or
pytorch_model.bin read without torch, ``hf_weights``; or the tf_model.h5, whole or sharded, that
transformers 4.x's TensorFlow classes saved, read without TensorFlow under the same keys,
``tf_h5``) + the tokenizer (vocab.txt, or the tokenizer.json that transformers 5 saves instead),
with a task head when config.json names one (``heads.hf_head``) and, for sentence-transformers
folders, modules.json and the pooling config.

Written folders load with transformers' auto classes (AutoModel, AutoModelForSequenceClassification
and the other task classes, AutoTokenizer) with no missing or unexpected keys, and those of a
``BertEmbedder`` with sentence-transformers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
from safetensors.numpy import save as save_safetensors

from keras_bert import fileio
from keras_bert.checkpoints.stored_head import (HF_ARCHITECTURES, StoredHead, hf_head,
                                                sentence_transformers_head)
from keras_bert.checkpoints.detection import HF_CONFIG_NAME
from keras_bert.checkpoints.hf_weights import has_hf_weights, read_hf_weights
from keras_bert.checkpoints.tf_h5 import read_tf_weights
from keras_bert.config import BertConfig
from keras_bert.fileio import join
from keras_bert.tokenization.hf_tokenizer_files import write_hf_tokenizer_files
from keras_bert.tokenization.pretrained_vocab import (SENTENCE_CONFIG_NAME,
                                                      has_pretrained_vocabulary,
                                                      read_pretrained_vocabulary)

logger = logging.getLogger(__name__)

SAFETENSORS_NAME = "model.safetensors"
MODULES_NAME = "modules.json"  # sentence-transformers
POOLING_DIR = "1_Pooling"
NORMALIZE_DIR = "2_Normalize"


def read_hf_directory(path: str) -> tuple[BertConfig, dict[str, np.ndarray], StoredHead | None,
                                          list[str] | None, bool | None]:
    """(config, {key: array} as stored, head, vocabulary tokens, lower_case) of a folder; the
    vocabulary and casing are None where it has no tokenizer files."""
    config_path = join(path, HF_CONFIG_NAME)
    with fileio.open_file(config_path) as f:
        try:
            hf_config = json.load(f)
        except ValueError as e:
            raise ValueError(f"{config_path!r} is not valid JSON: {e}") from None
    config = BertConfig.from_hf_dict(hf_config, source=config_path)
    # A folder with PyTorch's weights and TensorFlow's (as the Hub's often are) reads PyTorch's.
    values = read_hf_weights(path) if has_hf_weights(path) else read_tf_weights(path)
    if "cls.predictions.decoder.bias" in values and "cls.predictions.bias" not in values:
        values["cls.predictions.bias"] = values["cls.predictions.decoder.bias"]
    head = _sentence_transformers_head(path) or hf_head(hf_config, values, config_path)
    tokens = lower_case = None
    if has_pretrained_vocabulary(path):
        tokens, lower_case = read_pretrained_vocabulary(path)
    return config, values, head, tokens, lower_case


def _sentence_transformers_head(path: str) -> StoredHead | None:
    modules_path = join(path, MODULES_NAME)
    if not fileio.exists(modules_path):
        return None
    with fileio.open_file(modules_path) as f:
        modules = json.load(f)
    pooling = next((m for m in modules if str(m.get("type", "")).endswith("Pooling")), None)
    pooling_config = None
    if pooling is not None:
        pooling_path = join(path, pooling.get("path") or POOLING_DIR, HF_CONFIG_NAME)
        if fileio.exists(pooling_path):
            with fileio.open_file(pooling_path) as f:
                pooling_config = json.load(f)
    return sentence_transformers_head(modules, pooling_config, modules_path)


def write_hf_directory(directory: str, config: BertConfig, values: Mapping[str, np.ndarray],
                       head: StoredHead | None, tokens: list[str] | None, lower_case: bool | None,
                       seq_length: int | None = None) -> None:
    """Writes config.json (with the head's architecture, ``id2label``/``label2id`` and
    ``problem_type``), model.safetensors, the tokenizer files, and for an embedding head the
    sentence-transformers files (modules.json, 1_Pooling/config.json, 2_Normalize/,
    sentence_bert_config.json with ``seq_length``)."""
    fileio.makedirs(directory)
    hf_config = config.to_hf_dict(architectures=(_architecture(head),))
    hf_config.update(_label_fields(head))
    with fileio.open_file(join(directory, HF_CONFIG_NAME), "w") as f:
        f.write(json.dumps(hf_config, indent=2) + "\n")
    tensors = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in values.items()}
    with fileio.open_file(join(directory, SAFETENSORS_NAME), "wb") as f:
        f.write(save_safetensors(tensors, metadata={"format": "pt"}))
    if tokens is not None:
        write_hf_tokenizer_files(directory, tokens, bool(lower_case),
                                 config.max_position_embeddings)
    if head is not None and head.task == "embedding":
        _write_sentence_transformers_files(directory, config, head, seq_length)


def _architecture(head: StoredHead | None) -> str:
    if head is None or head.task == "embedding":
        return "BertModel"
    return HF_ARCHITECTURES[head.task]


def _label_fields(head: StoredHead | None) -> dict[str, Any]:
    """config.json's label fields for a classifier or tagger (transformers derives num_labels
    from id2label)."""
    if head is None or head.num_labels is None or head.task == "multiple_choice":
        return {}
    names = head.label_names or [f"LABEL_{i}" for i in range(head.num_labels)]
    fields: dict[str, Any] = {"id2label": {str(i): name for i, name in enumerate(names)},
                              "label2id": {name: i for i, name in enumerate(names)}}
    if head.problem_type is not None:
        fields["problem_type"] = head.problem_type
    return fields


def _write_sentence_transformers_files(directory: str, config: BertConfig, head: StoredHead,
                                       seq_length: int | None) -> None:
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": POOLING_DIR,
                "type": "sentence_transformers.models.Pooling"}]
    if head.normalize:
        modules.append({"idx": 2, "name": "2", "path": NORMALIZE_DIR,
                        "type": "sentence_transformers.models.Normalize"})
        fileio.makedirs(join(directory, NORMALIZE_DIR))
    fileio.write_json(join(directory, MODULES_NAME), modules)
    fileio.makedirs(join(directory, POOLING_DIR))
    fileio.write_json(join(directory, POOLING_DIR, HF_CONFIG_NAME), {
        "word_embedding_dimension": config.hidden_size,
        "pooling_mode_cls_token": head.pooling == "cls",
        "pooling_mode_mean_tokens": head.pooling == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False})
    fileio.write_json(join(directory, SENTENCE_CONFIG_NAME), {
        "max_seq_length": seq_length or config.max_position_embeddings, "do_lower_case": False})


__all__ = ["read_hf_directory", "write_hf_directory"]
