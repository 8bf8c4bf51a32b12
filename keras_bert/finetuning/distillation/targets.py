"""The examples a student trains on: its input rows and, as ``SoftTargetLoss`` reads them, the
teacher's outputs (computed once, before training) beside the labels (``distillation_data``).
Where the teacher reads a long text as windows (a classifier), the rows are those windows: the
student learns the teacher's output on each window, as both read a text."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np
import tensorflow as tf

from keras_bert.config import FinetuneSettings
from keras_bert.models.task import BertTask
from keras_bert.recipe.batches import pack_examples
from keras_bert.recipe.inputs import EXAMPLE_INDEX, windowed_examples, windows_line

logger = logging.getLogger(__name__)

RECIPE = FinetuneSettings()  # epochs and batch size: the fine-tuning recipe's


@dataclasses.dataclass
class DistillationData:
    """Examples as the student trains on them: its input rows and the targets of
    ``SoftTargetLoss`` (the teacher's outputs, computed once, beside the labels), an array, or
    a dict of them for a model with several outputs."""
    x: Any
    targets: Any
    rows: int
    labelled: int


def _inputs(texts, text_pairs):
    if text_pairs is None:
        return texts
    texts, text_pairs = list(texts), list(text_pairs)
    if len(texts) != len(text_pairs):
        raise ValueError(f"got {len(texts)} texts but {len(text_pairs)} text_pairs")
    return list(zip(texts, text_pairs))


def _targets(kind: str, output: np.ndarray, y, labelled: np.ndarray, scored) -> np.ndarray:
    """float32 [..., 2K + 2] of one output [..., K]: teacher, label, labelled, scored."""
    output = np.asarray(output, np.float32)
    if y is None:
        label = np.zeros_like(output)
    elif kind in ("score", "sigmoid"):
        label = np.asarray(y, np.float32).reshape(output.shape)
    else:  # class or position indices; a negative one (no label there) is all zeros
        label = (np.asarray(y)[..., None] == np.arange(output.shape[-1])).astype(np.float32)
    shape = output.shape[:-1]
    labelled = np.broadcast_to(np.asarray(labelled, np.float32).reshape(
        labelled.shape + (1,) * (len(shape) - labelled.ndim)), shape)
    scored = np.ones(shape, np.float32) if scored is None else np.asarray(scored, np.float32)
    return np.concatenate([output, label, labelled[..., None], scored[..., None]], axis=-1)


def distillation_data(teacher: BertTask, texts, labels=None, text_pairs=None,
                      batch_size: int = RECIPE.batch_size) -> DistillationData:
    """The teacher's outputs on ``texts`` (one ``predict``: once per text, not per epoch)
    beside the labels where given (None, or None for an unlabelled text), as ``SoftTargetLoss``
    reads them (``BertTask.distillation_rows`` says which rows and positions). Where the
    teacher reads texts longer than seq_length as windows, each window is a row (packed ids,
    with its text's label) and its target the teacher's output on that window."""
    inputs = _inputs(texts, text_pairs)
    if not len(inputs):
        raise ValueError("distill got no texts")
    rows, y, labelled, scored = teacher.distillation_rows(inputs, labels)
    if not len(tf.nest.flatten(rows)[0]):
        raise ValueError("distill got no texts")
    rows, y, labelled, scored = _as_windows(teacher, rows, y, labelled, scored)
    count = len(tf.nest.flatten(rows)[0])
    outputs = teacher.predict(rows, batch_size=batch_size, verbose=0)
    kind = teacher.soft_targets()
    if isinstance(outputs, dict):
        targets = {name: _targets(kind, output, None if y is None else y[name], labelled,
                                  scored) for name, output in outputs.items()}
    else:
        targets = _targets(kind, outputs, y, labelled, scored)
    labelled_rows = int(np.sum(labelled.reshape(count, -1).any(axis=-1)))
    logger.info("distillation data: %d rows, %d with labels; the teacher's outputs are "
                "computed once", count, labelled_rows)
    return DistillationData(rows, targets, count, labelled_rows)


def _as_windows(teacher: BertTask, rows, y, labelled: np.ndarray, scored):
    """``distillation_rows``' output with each text the teacher reads as several windows
    (``pack_batch``'s ``EXAMPLE_INDEX``) as the rows of its windows, packed, each with its
    text's label; the output as it was where every text is one window."""
    packed = pack_examples(rows, teacher.traced_pack_batch)
    example_index = packed.pop(EXAMPLE_INDEX, None)
    if not windowed_examples(example_index):
        return rows, y, labelled, scored
    logger.info("distillation data: %s; the student learns the teacher's output on each",
                windows_line(example_index))

    def by_window(array):  # [texts, ...] -> [windows, ...]
        return np.asarray(array)[example_index]

    return (packed, None if y is None else tf.nest.map_structure(by_window, y),
            by_window(labelled), None if scored is None else by_window(scored))
