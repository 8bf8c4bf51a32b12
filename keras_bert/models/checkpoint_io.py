"""Our models and the checkpoint formats: load a BertEncoder, a BertPretrainer or whatever a
checkpoint holds (Google TF1, Hugging Face, or our own ``model.keras`` directory), save them in
any format, save a preset, convert between formats.

Loading checks every name and shape before any weight is assigned, so a failed load changes
nothing; saving writes into a scratch directory that is renamed into place only on success.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile

import keras
import numpy as np

from keras_bert.checkpoints import google, huggingface
from keras_bert.checkpoints.loader import (FORMATS, KERAS_MODEL_NAME, assign_weights,
                                           detect_format, find_vocab, has_heads, infer_lower_case,
                                           read_checkpoint)
from keras_bert.checkpoints.names import encoder_weight_names, pretraining_head_weight_names
from keras_bert.config import BertConfig
from keras_bert import fileio
from keras_bert.fileio import atomic_output_dir, join, local_copy
from keras_bert.layers.int8 import is_int8
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer

logger = logging.getLogger(__name__)


def _load_keras(path: str, **kwargs):
    file_path = path if path.endswith(".keras") else join(path, KERAS_MODEL_NAME)
    with tempfile.TemporaryDirectory() as scratch:
        model = keras.saving.load_model(local_copy(file_path, scratch))
    if kwargs.get("dtype") is not None:
        logger.warning("dtype=%r is ignored for a saved keras model; it keeps its own policy",
                       kwargs["dtype"])
    return model


def load_encoder(path: fileio.PathLike, fmt: str | None = None, **kwargs) -> BertEncoder:
    """A BertEncoder with the weights at ``path`` (any format; heads are ignored)."""
    path = os.fspath(path)
    fmt = fmt or detect_format(path)
    if fmt == "keras":
        model = _load_keras(path, **kwargs)
        if isinstance(model, BertEncoder):
            return model
        if isinstance(getattr(model, "encoder", None), BertEncoder):
            return model.encoder
        raise ValueError(f"{path!r} holds a {type(model).__name__}, which has no BertEncoder")
    config, values, _, fmt = read_checkpoint(path, fmt)
    encoder = BertEncoder.from_bert_config(config, **kwargs)
    assign_weights(encoder, values, fmt, repr(path), with_heads=False)
    return encoder


def load_pretrainer(path: fileio.PathLike, fmt: str | None = None, **kwargs) -> BertPretrainer:
    """A BertPretrainer with encoder and (when present) MLM/NSP head weights from ``path``."""
    path = os.fspath(path)
    fmt = fmt or detect_format(path)
    if fmt == "keras":
        model = _load_keras(path, **kwargs)
        if isinstance(model, BertPretrainer):
            return model
        encoder = model if isinstance(model, BertEncoder) else getattr(model, "encoder", None)
        if not isinstance(encoder, BertEncoder):
            raise ValueError(f"{path!r} holds a {type(model).__name__}, which has no BertEncoder")
        logger.warning("%s has no pretraining heads; they keep their fresh initialisation", path)
        return BertPretrainer(encoder)
    config, values, _, fmt = read_checkpoint(path, fmt)
    pretrainer = BertPretrainer(BertEncoder.from_bert_config(config, **kwargs))
    assign_weights(pretrainer, values, fmt, repr(path), with_heads=True)
    return pretrainer


def load_model(path: fileio.PathLike, fmt: str | None = None, **kwargs):
    """The model a checkpoint holds: a BertPretrainer when it has heads, else a BertEncoder."""
    path = os.fspath(path)
    fmt = fmt or detect_format(path)
    if fmt == "keras":
        return _load_keras(path, **kwargs)
    config, values, _, fmt = read_checkpoint(path, fmt)
    if has_heads(values, fmt):
        model = BertPretrainer(BertEncoder.from_bert_config(config, **kwargs))
        assign_weights(model, values, fmt, repr(path), with_heads=True)
    else:
        model = BertEncoder.from_bert_config(config, **kwargs)
        assign_weights(model, values, fmt, repr(path), with_heads=False)
    return model


# ---------------------------------------------------------------------------------- saving
def model_values(model, fmt: str) -> dict[str, np.ndarray]:
    """{name: float32 array} of a BertEncoder or BertPretrainer in 'google' or 'hf' naming.

    Raises:
        ValueError: the model is quantized to int8 (those formats hold float32 weights only).
    """
    encoder = model.encoder if isinstance(model, BertPretrainer) else model
    if not isinstance(encoder, BertEncoder):
        raise TypeError(f"expected a BertEncoder or BertPretrainer, got {type(model).__name__}")
    if is_int8(model):
        raise ValueError(
            f"{type(model).__name__} is quantized to int8, and {fmt!r} checkpoints hold float32 "
            "weights: its int8 kernels would be written as if they were float32. Save it as a "
            "'keras' checkpoint or a preset (save_to_preset), which keep int8, or save the "
            "float32 model before quantize(\"int8\").")
    weights = encoder_weight_names(encoder)
    heads = pretraining_head_weight_names(model) if isinstance(model, BertPretrainer) else []
    if fmt == "google":
        return {w.google: np.asarray(w.variable.numpy()) for w in weights + heads}
    prefix = "bert." if heads else ""
    values = {}
    for w in weights:
        value = np.asarray(w.variable.numpy())
        values[prefix + w.hf] = value.T if w.hf_transposed else value
    for w in heads:
        value = np.asarray(w.variable.numpy())
        values[w.hf] = value.T if w.hf_transposed else value
    return values


def save_checkpoint(model, dst: str, fmt: str, vocab_file: str | None = None,
                    do_lower_case: bool | None = None, overwrite: bool = False) -> None:
    """Saves a BertEncoder or BertPretrainer to ``dst`` in ``fmt`` ('google', 'hf', 'keras').

    The directory appears only when everything was written (see fileio.atomic_output_dir).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown checkpoint format {fmt!r}; expected one of {', '.join(FORMATS)}")
    encoder = model.encoder if isinstance(model, BertPretrainer) else model
    if not isinstance(encoder, BertEncoder):
        raise TypeError(f"expected a BertEncoder or BertPretrainer, got {type(model).__name__}")
    config: BertConfig = encoder.bert_config
    if vocab_file and do_lower_case is None:
        do_lower_case = infer_lower_case(vocab_file)
    values = model_values(model, fmt) if fmt != "keras" else None
    with atomic_output_dir(dst, overwrite=overwrite) as scratch:
        if fmt == "google":
            google.write_google_checkpoint(scratch, config, values, vocab_file)
        elif fmt == "hf":
            architecture = "BertForPreTraining" if isinstance(model, BertPretrainer) else "BertModel"
            huggingface.write_hf_directory(scratch, config, values, architecture, vocab_file,
                                           do_lower_case)
        else:
            model.save(os.path.join(scratch, KERAS_MODEL_NAME))
            config.to_json_file(os.path.join(scratch, google.CONFIG_NAME))
            if vocab_file:
                fileio.copy(vocab_file, os.path.join(scratch, "vocab.txt"))
    logger.info("saved %s as %s checkpoint %s", type(model).__name__, fmt, dst)


def save_preset(model, directory: str, vocab_file: str | None = None,
                overwrite: bool = False) -> str:
    """Saves any keras-bert model (encoder, pretrainer or task model) as a preset directory:
    ``model.keras``, ``bert_config.json``, ``vocab.txt`` (``vocab_file``, else the model's
    preprocessor's vocabulary) and ``tokenizer_config.json`` (its casing). ``from_pretrained``,
    ``from_preset``, ``keras-bert export`` and ``load_model`` read it back whole. An encoder
    or task model after ``quantize("int8")`` round-trips quantized: ``model.keras`` holds
    Keras' int8 weights and the policies that rebuild them, so the loaded model runs the int8
    path and exports as int8 (``bert_config.json`` describes the architecture, as for any
    preset).

    Returns ``directory``, which appears only when complete.
    """
    from keras_bert.tokenization import vocab as vocab_lib

    encoder = model if isinstance(model, BertEncoder) else getattr(model, "encoder", None)
    if not isinstance(encoder, BertEncoder):
        raise TypeError(f"expected a keras-bert model, got {type(model).__name__}")
    preprocessor = getattr(model, "preprocessor", None)
    lower_case = None
    with atomic_output_dir(directory, overwrite=overwrite) as scratch:
        model.save(os.path.join(scratch, KERAS_MODEL_NAME))
        encoder.bert_config.to_json_file(os.path.join(scratch, google.CONFIG_NAME))
        vocab_path = os.path.join(scratch, vocab_lib.VOCAB_FILENAME)
        if vocab_file:
            fileio.copy(vocab_file, vocab_path)
            lower_case = infer_lower_case(vocab_file)
        elif preprocessor is not None:
            vocab_lib.save_vocab(list(preprocessor.vocabulary), vocab_path)
        if preprocessor is not None:
            lower_case = preprocessor.lower_case
        if lower_case is not None:
            with open(os.path.join(scratch, "tokenizer_config.json"), "w") as f:
                json.dump({"do_lower_case": bool(lower_case)}, f)
    logger.info("saved %s as the preset %s", type(model).__name__, directory)
    return directory


def convert(src: str, dst: str, to_format: str, from_format: str | None = None,
            overwrite: bool = False) -> None:
    """Converts a checkpoint between formats; heads are kept when the source has them."""
    if to_format not in FORMATS:
        raise ValueError(f"unknown target format {to_format!r}; expected one of {', '.join(FORMATS)}")
    detected = detect_format(src)
    if from_format and from_format != detected:
        raise ValueError(f"{src!r} looks like a {detected!r} checkpoint, not {from_format!r}")
    do_lower_case = huggingface.read_do_lower_case(src) if detected == "hf" else None
    model = load_model(src, detected)
    save_checkpoint(model, dst, to_format, vocab_file=find_vocab(src),
                    do_lower_case=do_lower_case, overwrite=overwrite)
