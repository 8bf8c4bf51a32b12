"""Checkpoint formats: detect one, read its values, and assign them to a model's weights by the
names table (names.py), checking everything first.

Formats: ``google`` (TF1 directory), ``hf`` (Hugging Face directory) and ``keras`` (our own: a
directory with model.keras, bert_config.json and vocab.txt, or a bare ``.keras`` file).
Loading checks every name and shape before any weight is assigned, so a failed load changes
nothing; saving writes into a scratch directory that is renamed into place only on success.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Mapping

import keras
import numpy as np

from keras_bert.checkpoints import google, huggingface
from keras_bert.checkpoints.names import (WeightName, encoder_weight_names,
                                          is_ignored_google_name, is_ignored_hf_key,
                                          normalize_hf_key, pretraining_head_weight_names)
from keras_bert import fileio
from keras_bert.fileio import join

logger = logging.getLogger(__name__)

FORMATS = ("google", "hf", "keras")
KERAS_MODEL_NAME = "model.keras"


class CheckpointMismatchError(ValueError):
    """A checkpoint does not fit the model: lists missing variables and shape mismatches."""


def detect_format(path: fileio.PathLike) -> str:
    """'google', 'hf' or 'keras' for a checkpoint directory, prefix or .keras file."""
    path = os.fspath(path)
    if path.endswith(".keras") and fileio.exists(path):
        return "keras"
    if fileio.isdir(path):
        if fileio.exists(join(path, KERAS_MODEL_NAME)):
            return "keras"
        if huggingface.is_hf_directory(path):
            return "hf"
        if fileio.exists(join(path, google.CONFIG_NAME)) and (
                fileio.glob(join(path, "*.index"))):
            return "google"
        raise ValueError(
            f"{path!r} is not a checkpoint directory: expected bert_config.json + *.ckpt.index "
            "(Google TF1), config.json + model.safetensors or pytorch_model.bin (Hugging Face), "
            f"or {KERAS_MODEL_NAME} (keras-bert)")
    if fileio.exists(path + ".index"):
        return "google"
    raise FileNotFoundError(f"checkpoint {path!r} does not exist")


# ---------------------------------------------------------------------------------- assignment
def _check_and_collect(weights: list[WeightName], values: Mapping[str, np.ndarray],
                       key_of: Callable[[WeightName], str], transpose: bool, where: str,
                       ) -> tuple[list[tuple[keras.Variable, np.ndarray]], list[str], list[str]]:
    """(assignments, missing keys, shape mismatch messages) for ``weights`` read from ``values``."""
    assignments, missing, mismatches = [], [], []
    for weight in weights:
        key = key_of(weight)
        if key not in values:
            missing.append(key)
            continue
        value = np.asarray(values[key])
        if transpose and weight.hf_transposed:
            value = value.T
        expected = tuple(weight.variable.shape)
        if value.shape != expected:
            mismatches.append(f"{key}: checkpoint has shape {value.shape}, model expects "
                              f"{expected}" + (" (after transposing)" if transpose and
                                               weight.hf_transposed else ""))
            continue
        assignments.append((weight.variable, value))
    return assignments, missing, mismatches


def assign_weights(model, values: Mapping[str, np.ndarray], fmt: str, where: str,
                   with_heads: bool) -> None:
    """Assigns every weight of ``model`` (a BertEncoder, or with ``with_heads`` a BertPretrainer)
    from ``values`` (keys in ``fmt`` naming), or raises CheckpointMismatchError having assigned
    nothing."""
    encoder = model.encoder if with_heads else model
    if fmt == "hf":
        values = {normalize_hf_key(k): v for k, v in values.items()}
        key_of = lambda w: w.hf  # noqa: E731
        ignored = is_ignored_hf_key
    else:
        key_of = lambda w: w.google  # noqa: E731
        ignored = is_ignored_google_name
    transpose = fmt == "hf"
    encoder_weights = encoder_weight_names(encoder)
    assignments, missing, mismatches = _check_and_collect(
        encoder_weights, values, key_of, transpose, where)
    used = {key_of(w) for w in encoder_weights}
    if with_heads:
        head_weights = pretraining_head_weight_names(model)
        used |= {key_of(w) for w in head_weights}
        head_assignments, head_missing, head_mismatches = _check_and_collect(
            head_weights, values, key_of, transpose, where)
        mismatches += head_mismatches
        if len(head_missing) == len(head_weights):
            logger.warning("%s has no pretraining heads (%s ...); they keep their fresh "
                           "initialisation", where, head_missing[0])
        else:
            missing += head_missing
            assignments += head_assignments
    if missing or mismatches:
        lines = [f"checkpoint {where} does not fit the model "
                 f"(L={encoder.bert_config.num_hidden_layers}, H={encoder.bert_config.hidden_size}, "
                 f"vocab={encoder.bert_config.vocab_size}); nothing was loaded:"]
        lines += [f"  shape mismatch: {m}" for m in mismatches]
        lines += [f"  missing: {m}" for m in missing]
        raise CheckpointMismatchError("\n".join(lines))
    unexpected = sorted(k for k in values if k not in used and not ignored(k))
    if unexpected:
        logger.warning("%s: %d variables not used by %s: %s", where, len(unexpected),
                       type(model).__name__, ", ".join(unexpected[:20]) +
                       (" ..." if len(unexpected) > 20 else ""))
    for variable, value in assignments:
        variable.assign(value)


def has_heads(values: Mapping[str, np.ndarray], fmt: str) -> bool:
    if fmt == "hf":
        return "cls.predictions.bias" in values or "cls.predictions.decoder.bias" in values
    return "cls/predictions/output_bias" in values


def read_checkpoint(path: fileio.PathLike, fmt: str | None = None):
    """(config, values, vocab path, fmt) for a google or hf checkpoint."""
    path = os.fspath(path)
    fmt = fmt or detect_format(path)
    if fmt == "google":
        config, values, vocab = google.read_google_checkpoint(path)
    elif fmt == "hf":
        config, values, vocab = huggingface.read_hf_directory(path)
        if "cls.predictions.decoder.bias" in values and "cls.predictions.bias" not in values:
            values["cls.predictions.bias"] = values["cls.predictions.decoder.bias"]
    else:
        raise ValueError(f"read_checkpoint reads 'google' or 'hf', not {fmt!r}")
    return config, values, vocab, fmt


def find_vocab(path: str) -> str | None:
    """The vocab.txt beside a checkpoint, if any."""
    directory = path if fileio.isdir(path) else os.path.dirname(path)
    candidate = join(directory, "vocab.txt")
    return candidate if fileio.exists(candidate) else None


def infer_lower_case(vocab_file: str) -> bool:
    """True when a vocab looks uncased: almost no non-special entry has an upper-case letter."""
    with fileio.open_file(vocab_file) as f:
        tokens = [line.rstrip("\n") for line in f]
    words = [t for t in tokens if not (t.startswith("[") and t.endswith("]"))]
    upper = sum(1 for t in words if any(c.isupper() for c in t))
    return upper <= 0.01 * max(len(words), 1)
