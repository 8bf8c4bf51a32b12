"""``save_checkpoint``: the one way to save a model in a checkpoint format, with its head.

It takes any keras-bert model by what it has, not by class (this package sits below the models):
an encoder (``bert_config``), or a model with an ``encoder`` and ``checkpoint_head()`` (the
pretraining heads, or a task head's Dense layer and labels), and a ``preprocessor`` whose
vocabulary and casing go with it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os

import numpy as np
import tensorflow as tf

from keras_bert import fileio
from keras_bert.checkpoints import google, huggingface
from keras_bert.checkpoints.stored_head import StoredHead
from keras_bert.checkpoints.names import (POOLERLESS_TASKS, WeightName, encoder_of,
                                          encoder_weight_names, is_pooler, masked_lm_weight_names,
                                          pretraining_head_weight_names, task_head_weight_names)
from keras_bert.checkpoints import FORMATS
from keras_bert.checkpoints.formats import (CALIBRATION_TEXTS_NAME, GOOGLE_CONFIG_NAME,
                                            KERAS_MODEL_NAME)
from keras_bert.errors import SaveError, one_line_reason
from keras_bert.fileio import atomic_output_dir
from keras_bert.layers.int8 import is_int8
from keras_bert.tokenization import vocab as vocab_lib
from keras_bert.tokenization.hf_tokenizer_files import TOKENIZER_CONFIG_NAME
from keras_bert.tokenization.pretrained_vocab import read_pretrained_vocabulary

logger = logging.getLogger(__name__)


def save_checkpoint(model, path: fileio.PathLike, format: str = "keras", *,
                    vocabulary: fileio.PathLike | list[str] | None = None,
                    lower_case: bool | None = None, overwrite: bool = False) -> str:
    """Saves ``model`` (a BertEncoder, BertPretrainer or task model) to the directory ``path``.

    Formats:
        ``"keras"``: ours, a preset: ``model.keras`` (the whole model, int8 included,
            saved as an uncompiled model: no optimizer, no compile settings), bert_config.json,
            vocab.txt and tokenizer_config.json (its casing); every ``from_pretrained``,
            ``keras-bert export`` and ``--init_checkpoint`` read it; with
            calibration_texts.txt, a sample of the texts a task model was trained on
            (``calibration_texts``), one per line, which int8 calibrates on.
        ``"hf"``: a Hugging Face folder that transformers' auto class of the head loads
            (BertModel, BertForPreTraining, BertForSequenceClassification,
            BertForTokenClassification, BertForQuestionAnswering, BertForMultipleChoice; label
            names as ``id2label``), with tokenizer files AutoTokenizer reads; a ``BertEmbedder``
            as a sentence-transformers folder.
        ``"google"``: a TF1 checkpoint with Google's names: the encoder, the pretraining heads,
            run_classifier.py's classifier and run_squad.py's span head.

    A checkpoint in any format holds the model, not its training: a compiled model's optimizer
    state (two Adam moments per weight, twice the weights' size) is left out of ``"keras"`` too,
    as the other formats leave it out, and the model loads uncompiled. This is the one place
    that decides it. Where training must go on from its state, that state is saved apart:
    ``keras-bert finetune`` resumes from ``checkpoints/`` (``EpochCheckpoint``), and Keras'
    own ``model.save("x.keras")`` keeps the optimizer.

    The directory appears only when everything was written (``fileio.atomic_output_dir``); a
    head a format has no name for (Google's has none for tagging, multiple choice or sentence
    embeddings) and a quantized model in a float32 format are refused before anything is
    written.

    Args:
        model: the model.
        path: the directory to write (local or gs://).
        format: "keras", "hf" or "google".
        vocabulary: for a model without a preprocessor (an encoder or pretrainer): a vocab
            file or folder, or a token list, written beside the weights.
        lower_case: the vocabulary's casing (None: the preprocessor's, or read beside
            ``vocabulary``).
        overwrite: replace an existing ``path``.

    Returns:
        ``path``.

    Raises:
        ValueError: an unknown format, a head the format cannot hold, an int8 model in a
            float32 format.
        OutputExistsError: ``path`` exists and ``overwrite`` is False.
        SaveError: the write failed (a full disk...), naming what, where and why; an earlier
            ``path`` is left as it was.
    """
    if format not in FORMATS:
        raise ValueError(f"unknown checkpoint format {format!r}; expected one of "
                         f"{', '.join(FORMATS)}")
    path = os.fspath(path)
    encoder = encoder_of(model)
    if encoder is None:
        raise TypeError(f"expected a keras-bert model (BertEncoder, BertPretrainer or a task "
                        f"model), got {type(model).__name__}")
    head = model.checkpoint_head() if hasattr(model, "checkpoint_head") else None
    tokens, lower_case = _vocabulary(model, vocabulary, lower_case)
    name = type(model).__name__
    values = None
    if format != "keras":
        if is_int8(model):
            raise ValueError(
                f"{name} is quantized to int8, and {format!r} checkpoints hold float32 weights: "
                f"its int8 kernels would be written as if they were float32. Save it as a "
                f"'keras' checkpoint, which keeps int8, or save the float32 model before "
                f"quantize(\"int8\").")
        if encoder.static_int8_ranges:
            raise ValueError(
                f"{name} was calibrated for int8 (static input ranges: its kernels hold W / c), "
                f"and {format!r} checkpoints hold the float32 function's weights. Save it as a "
                f"'keras' checkpoint, or save the float32 model before calibrating it.")
        values = _values(model, encoder, head, format)
    fileio.check_writable_location(path)
    try:
        with atomic_output_dir(path, overwrite=overwrite) as scratch:
            if format == "keras":
                _write_keras(model, encoder, scratch, tokens, lower_case)
            elif format == "google":
                google.write_google_checkpoint(scratch, encoder.bert_config, values, tokens)
            else:
                seq_length = getattr(getattr(model, "preprocessor", None), "seq_length", None)
                huggingface.write_hf_directory(scratch, encoder.bert_config, values, head,
                                               tokens, lower_case, seq_length)
    except fileio.OutputExistsError:
        raise
    except (OSError, RuntimeError, tf.errors.OpError) as e:  # a full disk, a lost connection
        raise SaveError(f"could not save the {name} as a {format!r} checkpoint to {path!r}: "
                        f"{one_line_reason(e)}; {path!r} was left as it was") from e
    logger.info("saved %s as %s checkpoint %s", name, format, path)
    return path


@contextlib.contextmanager
def _uncompiled(model):
    """Within it, ``model`` saves as Keras saves a model never compiled: without its optimizer
    (whose variables Keras writes wherever ``model.optimizer`` is one) and without a compile
    configuration (``compiled`` False). Both are back afterwards, so training goes on."""
    if not getattr(model, "compiled", False):
        yield
        return
    optimizer = model.optimizer
    model.optimizer, model.compiled = None, False
    try:
        yield
    finally:
        model.optimizer, model.compiled = optimizer, True


def _vocabulary(model, vocabulary, lower_case):
    """(tokens or None, lower_case) from the model's preprocessor or ``vocabulary``."""
    preprocessor = getattr(model, "preprocessor", None)
    if vocabulary is None and preprocessor is not None:
        return list(preprocessor.vocabulary), (
            preprocessor.lower_case if lower_case is None else lower_case)
    if vocabulary is None:
        return None, lower_case
    if isinstance(vocabulary, (list, tuple)):
        return list(vocabulary), lower_case
    tokens, found = read_pretrained_vocabulary(vocabulary)
    return tokens, found if lower_case is None else lower_case


def _values(model, encoder, head: StoredHead | None, format: str) -> dict[str, np.ndarray]:
    """{name: float32 array} of the model in ``format``'s naming ('google' or 'hf')."""
    weights = encoder_weight_names(encoder)
    head_weights: list[WeightName] = []
    if head is not None and head.unportable:
        raise ValueError(f"{head.unportable}: save it as 'keras'; nothing was written")
    if head is not None and head.task == "pretraining":
        head_weights = pretraining_head_weight_names(model)
    elif head is not None and head.task == "masked_lm":
        head_weights = masked_lm_weight_names(model)
    elif head is not None and head.task == "embedding":
        if format == "google":  # the weights are the encoder's; the pooling is a setting
            logger.warning(
                "Google's format has no place for a sentence embedding's pooling: the "
                "checkpoint holds the %s's encoder; load it with BertEmbedder.from_pretrained("
                "path, pooling=%r, normalize=%s)", type(model).__name__, head.pooling,
                head.normalize)
    elif head is not None:
        head_weights = task_head_weight_names(head.task, head.layer)
        if format == "google" and head_weights[0].google is None:
            raise ValueError(
                f"Google's format has no names for a {type(model).__name__}'s "
                f"{head.task.replace('_', ' ')} head (run_classifier.py and run_squad.py name "
                f"only the classifier and span heads): save it as 'hf' or 'keras'; nothing "
                f"was written")
    if head is not None and head.task in POOLERLESS_TASKS and format == "hf":
        weights = [w for w in weights if not is_pooler(w)]  # as transformers saves them
    if format == "google":
        return {w.google: _array(w, w.google_transposed) for w in weights + head_weights}
    prefix = "bert." if head is not None and head.task != "embedding" else ""
    values = {prefix + w.hf: _array(w, w.hf_transposed) for w in weights}
    values.update({w.hf: _array(w, w.hf_transposed) for w in head_weights})
    return values


def _array(weight: WeightName, transposed: bool) -> np.ndarray:
    value = np.asarray(weight.variable.numpy(), dtype=np.float32)
    return value.T if transposed else value


def _write_keras(model, encoder, directory: str, tokens, lower_case) -> None:
    with _uncompiled(model):
        model.save(os.path.join(directory, KERAS_MODEL_NAME))
    encoder.bert_config.to_json_file(os.path.join(directory, GOOGLE_CONFIG_NAME))
    if tokens is not None:
        vocab_lib.save_vocab(tokens, os.path.join(directory, vocab_lib.VOCAB_FILENAME))
    if lower_case is not None:
        with open(os.path.join(directory, TOKENIZER_CONFIG_NAME), "w") as f:
            json.dump({"do_lower_case": bool(lower_case)}, f)
    texts = getattr(model, "calibration_texts", None)
    if texts:
        with open(os.path.join(directory, CALIBRATION_TEXTS_NAME), "w", encoding="utf-8") as f:
            f.writelines(" ".join(text.split()) + "\n" for text in texts)

