"""Which checkpoint format a path holds, told from its file names alone, in pure Python (no
TensorFlow or Keras): ``read_checkpoint`` dispatches on it, and a command can look at a path
before TensorFlow loads (`keras-bert serve` refuses a checkpoint folder given where a SavedModel
base path belongs, ``describe_checkpoint``)."""

from __future__ import annotations

import os

from keras_bert import fileio
from keras_bert.checkpoints import hf_weights, keras_hub, tf_h5
from keras_bert.fileio import join

KERAS_MODEL_NAME = "model.keras"  # ours, beside bert_config.json and the vocabulary
GOOGLE_CONFIG_NAME = "bert_config.json"
HF_CONFIG_NAME = "config.json"
# Every weight file a Hugging Face folder may hold, in order of preference: PyTorch's, then
# TensorFlow's.
HF_WEIGHT_FILES: tuple[str, ...] = (*hf_weights.WEIGHT_FILES, *tf_h5.TF_WEIGHT_FILES)
FORMAT_TITLES = {"keras": "a keras-bert checkpoint", "hf": "a Hugging Face checkpoint",
                 "google": "a Google TF1 checkpoint", "keras-hub": "a keras-hub preset"}


def is_hf_directory(path: fileio.PathLike) -> bool:
    """Whether ``path`` holds config.json and one of HF_WEIGHT_FILES."""
    return fileio.exists(join(path, HF_CONFIG_NAME)) and (hf_weights.has_hf_weights(path)
                                                         or tf_h5.has_tf_weights(path))


def detect_format(path: fileio.PathLike) -> str:
    """'keras', 'hf', 'google' or 'keras-hub' for a checkpoint directory, prefix or .keras
    file.

    Raises:
        ValueError: a directory that holds none of them (naming the files each needs).
        FileNotFoundError: nothing at ``path``.
    """
    path = os.fspath(path)
    if path.endswith(".keras") and fileio.exists(path):
        return "keras"
    if fileio.isdir(path):
        if fileio.exists(join(path, KERAS_MODEL_NAME)):
            return "keras"
        if keras_hub.is_keras_hub_preset(path):
            return "keras-hub"
        if fileio.exists(join(path, HF_CONFIG_NAME)):
            if is_hf_directory(path):
                return "hf"
            raise ValueError(
                f"{path!r} has config.json but no weights: expected one of "
                f"{', '.join(HF_WEIGHT_FILES)} (a Hugging Face folder)")
        if fileio.exists(join(path, GOOGLE_CONFIG_NAME)) and fileio.glob(join(path, "*.index")):
            return "google"
        raise ValueError(
            f"{path!r} is not a checkpoint directory: expected bert_config.json + *.ckpt.index "
            "(Google TF1), config.json + model.safetensors, pytorch_model.bin or tf_model.h5 "
            "(Hugging Face), "
            f"config.json + model.weights.h5 (a keras-hub preset), or {KERAS_MODEL_NAME} "
            "(keras-bert)")
    if fileio.exists(path + ".index"):
        return "google"
    raise FileNotFoundError(f"checkpoint {path!r} does not exist")


def describe_checkpoint(path: fileio.PathLike) -> str | None:
    """What checkpoint ``path`` holds, with the files that tell, e.g. "a keras-bert checkpoint
    (model.keras)" or "a Hugging Face checkpoint (config.json + model.safetensors)"; None where
    it holds none (or nothing is there)."""
    path = os.fspath(path)
    try:
        fmt = detect_format(path)
    except (ValueError, FileNotFoundError):
        return None
    if not fileio.isdir(path):
        return f"{FORMAT_TITLES[fmt]} ({os.path.basename(path.rstrip('/'))})"
    if fmt == "keras":
        files = [KERAS_MODEL_NAME]
    elif fmt == "keras-hub":
        files = [keras_hub.CONFIG_NAME, keras_hub.WEIGHTS_NAME]
    elif fmt == "hf":
        files = [HF_CONFIG_NAME, next(name for name in HF_WEIGHT_FILES
                                      if fileio.exists(join(path, name)))]
    else:
        index = sorted(fileio.glob(join(path, "*.index")))[0]
        files = [GOOGLE_CONFIG_NAME, os.path.basename(index.rstrip("/"))]
    return f"{FORMAT_TITLES[fmt]} ({' + '.join(files)})"
