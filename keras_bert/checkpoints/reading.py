"""Reading a checkpoint of any format into one format-neutral ``Checkpoint``, and assigning its
values to a model's weights by the names table (``names``), checking everything first.

Formats (``formats.detect_format``): ``keras`` (ours: a directory with model.keras,
bert_config.json and the vocabulary, or a bare ``.keras`` file), ``hf`` (a Hugging Face folder,
sentence-transformers folders and the tf_model.h5 folders of transformers 4.x's TensorFlow
classes included),
``google`` (a TF1 checkpoint directory or prefix, run_classifier.py's and run_squad.py's
fine-tuned ones included) and ``keras-hub`` (a keras-hub preset of a BertBackbone or
BertTextClassifier). This package sits below the models and imports none of them: the model
classes read a ``Checkpoint`` in their ``from_pretrained`` and assign its values here.

Loading checks every name and shape before any weight is assigned, so a failed load changes
nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence

import keras
import numpy as np

from keras_bert import fileio
from keras_bert.checkpoints import google, huggingface, keras_hub
from keras_bert.checkpoints.formats import CALIBRATION_TEXTS_NAME, KERAS_MODEL_NAME, detect_format
from keras_bert.checkpoints.stored_head import StoredHead, google_head
from keras_bert.checkpoints.names import (WeightName, encoder_of, is_ignored_google_name,
                                          is_ignored_hf_key, normalize_hf_key)
from keras_bert.config import BertConfig
from keras_bert.fileio import join
from keras_bert.tokenization.pretrained_vocab import (has_pretrained_vocabulary,
                                                      pretrained_seq_length,
                                                      read_pretrained_vocabulary)

logger = logging.getLogger(__name__)

MAX_LISTED = 40  # missing names a mismatch error lists


class CheckpointMismatchError(ValueError):
    """A checkpoint does not fit the model: one line naming every shape mismatch (with both
    shapes) and the missing variables."""


@dataclasses.dataclass
class Checkpoint:
    """What a checkpoint holds, whatever its format.

    Attributes:
        path: where it was read.
        format: one of READ_FORMATS.
        config: the encoder's architecture.
        values: the weights: Google TF1 names (``naming == "google"``: Google's and keras-hub's
            checkpoints) or Hugging Face keys with the ``bert.`` prefix removed.
        naming: "google" or "hf".
        head: the task head it holds (``stored_head.StoredHead``), or None.
        vocabulary: its tokens, id 0 first, or None when it has none.
        lower_case: the vocabulary's casing, or None when unknown.
        model: for the ``keras`` format, the saved Keras model itself.
        seq_length: the packed length the checkpoint's author meant it to be read at (a
            sentence-transformers folder's ``max_seq_length``), or None.
    """
    path: str
    format: str
    config: BertConfig
    values: Mapping[str, np.ndarray]
    naming: str
    head: StoredHead | None = None
    vocabulary: list[str] | None = None
    lower_case: bool | None = None
    model: keras.Model | None = None
    seq_length: int | None = None

    def key(self, weight: WeightName) -> str | None:
        """The name of ``weight`` in this checkpoint's naming."""
        return weight.hf if self.naming == "hf" else weight.google


def read_checkpoint(path: fileio.PathLike, fmt: str | None = None) -> Checkpoint:
    """Reads the checkpoint at ``path`` (format detected unless ``fmt`` is given).

    Raises:
        FileNotFoundError, ValueError: nothing there, not a checkpoint, or an unreadable file
            (naming the file and what is wrong).
    """
    path = os.fspath(path)
    detected = detect_format(path)
    if fmt is not None and fmt != detected:
        raise ValueError(f"{path!r} looks like a {detected!r} checkpoint, not {fmt!r}")
    if detected == "keras":
        return _read_keras(path)
    checkpoint = _read_weights_checkpoint(path, detected)
    check_config_against_weights(checkpoint)
    return checkpoint


# Where the architecture shows in the weights, per naming: the word and position embeddings
# ([rows, hidden]), a block's variables (the block number in group 1), and the first block's
# intermediate kernel, with the axis of its intermediate size.
_ARCHITECTURE_KEYS = {
    "hf": ("embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
           re.compile(r"encoder\.layer\.(\d+)\."), "encoder.layer.0.intermediate.dense.weight",
           0),
    "google": ("bert/embeddings/word_embeddings", "bert/embeddings/position_embeddings",
               re.compile(r"bert/encoder/layer_(\d+)/"),
               "bert/encoder/layer_0/intermediate/dense/kernel", 1),
}


def check_config_against_weights(checkpoint: Checkpoint) -> None:
    """CheckpointMismatchError (a ValueError), in one line naming the checkpoint, when its config disagrees with its
    weights' names and shapes (the number of blocks, the hidden, intermediate, vocabulary and
    position sizes) or its vocabulary has more tokens than the embeddings have rows: checked
    before any model is built, so an impossible config fails at once instead of building."""
    config, values = checkpoint.config, checkpoint.values
    words, positions, block, intermediate, axis = _ARCHITECTURE_KEYS[checkpoint.naming]

    def shape(key: str) -> tuple[int, ...] | None:
        if key not in values:
            return None
        return tuple(values.shape(key)) if hasattr(values, "shape") else np.shape(values[key])

    problems = []
    blocks = {int(match.group(1)) for key in values if (match := block.match(key))}
    if blocks and len(blocks) != config.num_hidden_layers:
        problems.append(f"num_hidden_layers is {config.num_hidden_layers} but the weights hold "
                        f"{len(blocks)} blocks")
    for key, size, name in ((words, config.vocab_size, "vocab_size"),
                            (positions, config.max_position_embeddings,
                             "max_position_embeddings")):
        found = shape(key)
        if found is not None and found != (size, config.hidden_size):
            problems.append(f"{name} x hidden_size is {size} x {config.hidden_size} but "
                            f"{key} is {found[0]} x {found[-1]}")
    found = shape(intermediate)
    if found is not None and found[axis] != config.intermediate_size:
        problems.append(f"intermediate_size is {config.intermediate_size} but {intermediate} "
                        f"has {found[axis]}")
    if checkpoint.vocabulary is not None and len(checkpoint.vocabulary) > config.vocab_size:
        problems.append(f"the vocabulary has {len(checkpoint.vocabulary)} tokens but vocab_size "
                        f"is {config.vocab_size}")
    if problems:
        raise CheckpointMismatchError(f"{checkpoint.path!r}: its config does not fit its "
                                      f"weights: {'; '.join(problems)}")


def _read_weights_checkpoint(path: str, detected: str) -> Checkpoint:
    """A checkpoint of weights by name (every format but ours)."""
    if detected == "google":
        config, values, _ = google.read_google_checkpoint(path)
        directory = path if fileio.isdir(path) else os.path.dirname(path)
        tokens, lower_case = _vocabulary(directory)
        return Checkpoint(path, "google", config, values, "google", google_head(values, path),
                          tokens, lower_case)
    if detected == "keras-hub":
        preset = keras_hub.read_keras_hub_preset(path)
        values = dict(preset.values)
        head = None
        if preset.head is not None:
            values["output_weights"] = preset.head["output_weights"]
            values["output_bias"] = preset.head["output_bias"]
            head = StoredHead("classification", f"the {preset.task_class} in {path!r}",
                              num_labels=int(preset.head["num_classes"]),
                              problem_type="single_label_classification")
        return Checkpoint(path, "keras-hub", preset.config, values, "google", head,
                          preset.vocabulary, preset.lower_case)
    config, values, head, tokens, lower_case = huggingface.read_hf_directory(path)
    values = {normalize_hf_key(key): value for key, value in values.items()}
    return Checkpoint(path, "hf", config, values, "hf", head, tokens, lower_case,
                      seq_length=pretrained_seq_length(path))


def _vocabulary(directory: str) -> tuple[list[str] | None, bool | None]:
    return read_pretrained_vocabulary(directory) if has_pretrained_vocabulary(directory) \
        else (None, None)


def _read_keras(path: str) -> Checkpoint:
    file_path = path if path.endswith(".keras") else join(path, KERAS_MODEL_NAME)
    with tempfile.TemporaryDirectory() as scratch:
        model = keras.saving.load_model(fileio.local_copy(file_path, scratch))
    encoder = encoder_of(model)
    if encoder is None:
        raise ValueError(f"{file_path!r} holds a {type(model).__name__}, which has no BertEncoder")
    preprocessor = getattr(model, "preprocessor", None)
    folder = fileio.isdir(path)
    if preprocessor is not None:
        tokens, lower_case = list(preprocessor.vocabulary), preprocessor.lower_case
    else:
        tokens, lower_case = _vocabulary(path if folder else os.path.dirname(path))
    texts_path = join(path, CALIBRATION_TEXTS_NAME)
    if folder and hasattr(model, "calibration_texts") and fileio.exists(texts_path):
        model.calibration_texts = [line.strip() for line in fileio.read_text_lines(texts_path)
                                   if line.strip()] or None
    head_of = getattr(model, "checkpoint_head", None)
    return Checkpoint(path, "keras", encoder.bert_config, {}, "google",
                      head_of() if head_of is not None else None, tokens, lower_case, model)


# ---------------------------------------------------------------------------------- assignment
def assign_weights(weights: Sequence[WeightName], checkpoint: Checkpoint, owner: str,
                   optional: Callable[[WeightName], bool] = lambda weight: False) -> None:
    """Assigns every weight in ``weights`` from ``checkpoint.values``, or raises
    CheckpointMismatchError having assigned nothing.

    Args:
        weights: the model's weights under each format's names (``names``).
        checkpoint: a checkpoint of the google or hf naming.
        owner: the model's class name, for messages.
        optional: weights the checkpoint may lack (e.g. the pooler, which transformers does
            not save for token, span and masked-LM models): they keep their initial values,
            and a log line names them.
    """
    values = checkpoint.values
    transposing = {"hf": lambda w: w.hf_transposed, "google": lambda w: w.google_transposed}[
        checkpoint.naming]
    assignments, missing, mismatches, skipped = [], [], [], []
    for weight in weights:
        key = checkpoint.key(weight)
        if key is None or key not in values:
            (skipped if optional(weight) else missing).append(
                key or f"{weight.hf} (Google's format has no name for it)")
            continue
        value = np.asarray(values[key])
        if transposing(weight):
            value = value.T
        expected = tuple(weight.variable.shape)
        if value.shape != expected:
            mismatches.append(f"{key}: checkpoint has shape {value.shape}, model expects "
                              f"{expected}" + (" (after transposing)" if transposing(weight)
                                               else ""))
            continue
        assignments.append((weight.variable, value))
    if missing or mismatches:
        config = checkpoint.config
        problems = [f"shape mismatch: {m}" for m in mismatches]
        if missing:
            problems.append("missing: " + ", ".join(missing[:MAX_LISTED]) + (
                f" (and {len(missing) - MAX_LISTED} more)" if len(missing) > MAX_LISTED else ""))
        raise CheckpointMismatchError(
            f"checkpoint {checkpoint.path!r} does not fit the {owner} "
            f"(L={config.num_hidden_layers}, H={config.hidden_size}, "
            f"vocab={config.vocab_size}); nothing was loaded: {'; '.join(problems)}")
    if skipped:
        logger.info("%s has no %s; the %s keeps them as initialised", checkpoint.path,
                    ", ".join(skipped), owner)
    for variable, value in assignments:
        variable.assign(value)


def unused_keys(checkpoint: Checkpoint, used: Sequence[WeightName]) -> list[str]:
    """The checkpoint's weights that ``used`` does not read (optimizer slots, step counters and
    buffers left out)."""
    ignored = is_ignored_hf_key if checkpoint.naming == "hf" else is_ignored_google_name
    read = {checkpoint.key(weight) for weight in used}
    return sorted(key for key in checkpoint.values if key not in read and not ignored(key))
