"""Which checkpoint format a path holds, and the encoder architecture its config file states, told
from its files in pure Python (no TensorFlow, no weights read): ``detect_format``, where
``reading.read_checkpoint`` starts; ``describe_checkpoint``, what a path holds in words
(`keras-bert serve` refuses a checkpoint folder given where a SavedModel base path belongs);
and ``stored_config``, which the command line's checks read before TensorFlow loads."""

from __future__ import annotations

import json
import os
import zipfile

from keras_bert import fileio
from keras_bert.checkpoints import huggingface, keras_hub
from keras_bert.config import BertConfig
from keras_bert.fileio import join

KERAS_MODEL_NAME = "model.keras"  # ours: the saved model, beside bert_config.json
GOOGLE_CONFIG_NAME = "bert_config.json"  # Google's TF1 checkpoints, and ours
# ours: a sample of the texts a task model was trained on, one per line (calibration_texts)
CALIBRATION_TEXTS_NAME = "calibration_texts.txt"
FORMAT_TITLES = {"keras": "a keras-bert checkpoint", "hf": "a Hugging Face checkpoint",
                 "google": "a Google TF1 checkpoint", "keras-hub": "a keras-hub preset"}


def detect_format(path: fileio.PathLike) -> str:
    """'keras', 'hf', 'google' or 'keras-hub' for a checkpoint directory, prefix or .keras
    file; ValueError saying what a directory lacks, FileNotFoundError where nothing is."""
    path = os.fspath(path)
    if path.endswith(".keras") and fileio.exists(path):
        return "keras"
    if fileio.isdir(path):
        if fileio.exists(join(path, KERAS_MODEL_NAME)):
            return "keras"
        if keras_hub.is_keras_hub_preset(path):
            return "keras-hub"
        if fileio.exists(join(path, huggingface.CONFIG_NAME)):
            if huggingface.is_hf_directory(path):
                return "hf"
            raise ValueError(
                f"{path!r} has config.json but no weights: expected one of "
                f"{', '.join(huggingface.WEIGHT_FILES)} (a Hugging Face folder)")
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
        files = [huggingface.CONFIG_NAME, next(name for name in huggingface.WEIGHT_FILES
                                               if fileio.exists(join(path, name)))]
    else:
        index = sorted(fileio.glob(join(path, "*.index")))[0]
        files = [GOOGLE_CONFIG_NAME, os.path.basename(index.rstrip("/"))]
    return f"{FORMAT_TITLES[fmt]} ({' + '.join(files)})"


def stored_config(path: fileio.PathLike) -> BertConfig | None:
    """The encoder architecture the checkpoint at ``path`` states in its config file, read
    with ``json`` alone: config.json for a Hugging Face folder (ValueError naming the file for
    a model_type other than 'bert'), bert_config.json for ours and Google's; None where only
    the weights' file states it (a bare ``.keras`` file, a Google prefix, a keras-hub preset).
    ``detect_format``'s errors first, for a path that holds no checkpoint."""
    fmt = detect_format(path)
    path = os.fspath(path)
    if not fileio.isdir(path) or fmt == "keras-hub":
        return None
    if fmt == "hf":
        return BertConfig.from_hf_json_file(join(path, huggingface.CONFIG_NAME))
    config_path = join(path, GOOGLE_CONFIG_NAME)
    return BertConfig.from_json_file(config_path) if fileio.exists(config_path) else None


def stored_label_names(path: fileio.PathLike) -> list[str] | None:
    """The label names of the classifier checkpoint at ``path``, read with ``json`` (and
    ``zipfile`` for ``model.keras``) alone, before TensorFlow loads: a keras-bert
    BertClassifier's ``label_names``, a Hugging Face folder's ``id2label`` (not transformers'
    LABEL_0, LABEL_1... placeholders, nor a regression head's). None where the files name none
    (a model without label names, another head, another format, a remote path)."""
    from keras_bert.checkpoints.stored_head import is_placeholder_labels, label_names_from_id2label
    path = os.fspath(path)
    if fileio.is_remote(path) or not os.path.isdir(path):
        return None
    fmt = detect_format(path)
    if fmt == "keras":
        with zipfile.ZipFile(join(path, KERAS_MODEL_NAME)) as saved:
            config = json.loads(saved.read("config.json"))
        names = config.get("config", {}).get("label_names")
        return list(names) if names else None
    if fmt == "hf":
        with open(join(path, huggingface.CONFIG_NAME), encoding="utf-8") as f:
            config = json.load(f)
        if config.get("problem_type") == "regression" or not config.get("id2label"):
            return None
        names = label_names_from_id2label(config["id2label"], join(path, huggingface.CONFIG_NAME))
        return None if is_placeholder_labels(names) else names
    return None
