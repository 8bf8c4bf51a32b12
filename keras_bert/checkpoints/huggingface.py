"""Hugging Face BERT directories: config.json + model.safetensors (or pytorch_model.bin) + vocab.txt.

Safetensors are read and written with NumPy; torch is needed only for a legacy pytorch_model.bin.
Written directories load with ``transformers.BertModel.from_pretrained`` (or BertForPreTraining when
the heads are included).
"""

from __future__ import annotations

import json
import logging

import numpy as np
from safetensors.numpy import load as load_safetensors
from safetensors.numpy import save as save_safetensors

from keras_bert.config import BertConfig
from keras_bert import fileio
from keras_bert.fileio import join

logger = logging.getLogger(__name__)

CONFIG_NAME = "config.json"
SAFETENSORS_NAME = "model.safetensors"
PYTORCH_NAME = "pytorch_model.bin"
VOCAB_NAME = "vocab.txt"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"


def is_hf_directory(path: str) -> bool:
    return fileio.exists(join(path, CONFIG_NAME)) and (
        fileio.exists(join(path, SAFETENSORS_NAME))
        or fileio.exists(join(path, PYTORCH_NAME)))


def read_hf_directory(path: str) -> tuple[BertConfig, dict[str, np.ndarray], str | None]:
    """Reads (config, {key: array}, vocab path or None). Keys are as stored (prefix kept)."""
    config = BertConfig.from_hf_json_file(join(path, CONFIG_NAME))
    safetensors_path = join(path, SAFETENSORS_NAME)
    if fileio.exists(safetensors_path):
        with fileio.open_file(safetensors_path, "rb") as f:
            try:
                values = load_safetensors(f.read())
            except Exception as e:  # safetensors raises its own error types
                raise ValueError(f"{safetensors_path!r} is not a readable safetensors file: {e}")
    else:
        values = _read_pytorch_bin(join(path, PYTORCH_NAME))
    vocab_path = join(path, VOCAB_NAME)
    return config, values, vocab_path if fileio.exists(vocab_path) else None


def _read_pytorch_bin(path: str) -> dict[str, np.ndarray]:
    try:
        import torch
    except ImportError:
        raise ValueError(f"{path!r} is a PyTorch pickle; install torch to read it, or convert the "
                         "directory to model.safetensors") from None
    with fileio.open_file(path, "rb") as f:
        import io
        state = torch.load(io.BytesIO(f.read()), map_location="cpu", weights_only=True)
    return {k: v.float().numpy() if v.is_floating_point() else v.numpy() for k, v in state.items()}


def read_do_lower_case(path: str) -> bool | None:
    """The casing a HF directory's tokenizer_config.json states, or None."""
    tokenizer_config = join(path, TOKENIZER_CONFIG_NAME)
    if not fileio.exists(tokenizer_config):
        return None
    with fileio.open_file(tokenizer_config) as f:
        value = json.load(f).get("do_lower_case")
    return bool(value) if value is not None else None


def write_hf_directory(directory: str, config: BertConfig, values: dict[str, np.ndarray],
                       architecture: str = "BertModel", vocab_file: str | None = None,
                       do_lower_case: bool | None = None) -> None:
    """Writes config.json, model.safetensors, and vocab.txt/tokenizer_config.json when given."""
    fileio.makedirs(directory)
    config.to_hf_json_file(join(directory, CONFIG_NAME), architectures=(architecture,))
    tensors = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in values.items()}
    with fileio.open_file(join(directory, SAFETENSORS_NAME), "wb") as f:
        f.write(save_safetensors(tensors, metadata={"format": "pt"}))
    if vocab_file:
        fileio.copy(vocab_file, join(directory, VOCAB_NAME), overwrite=True)
        tokenizer_config = {"tokenizer_class": "BertTokenizer",
                            "model_max_length": config.max_position_embeddings}
        if do_lower_case is not None:
            tokenizer_config["do_lower_case"] = do_lower_case
        with fileio.open_file(join(directory, TOKENIZER_CONFIG_NAME), "w") as f:
            f.write(json.dumps(tokenizer_config, indent=2) + "\n")
