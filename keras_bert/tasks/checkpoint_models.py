"""A checkpoint as the model it holds: the task model of its head (the task folders' public
classes that name it in ``checkpoint_tasks``), a BertPretrainer for pretraining heads, else a
BertEncoder; and ``convert_checkpoint``, what ``keras-bert convert`` runs."""

from __future__ import annotations

import functools
import importlib
import pkgutil

from keras_bert import fileio, tasks
from keras_bert.checkpoints.stored_head import StoredHead
from keras_bert.checkpoints.reading import Checkpoint, read_checkpoint
from keras_bert.checkpoints.saving import save_checkpoint
from keras_bert.models import BertEncoder, BertPretrainer


@functools.cache
def _task_model_classes() -> tuple[type, ...]:
    """The task model classes of the folders (their ``__all__`` names that take checkpoint
    heads)."""
    classes = []
    for folder in pkgutil.iter_modules(tasks.__path__):
        if folder.ispkg:
            package = importlib.import_module(f"{tasks.__name__}.{folder.name}")
            classes += [getattr(package, name) for name in getattr(package, "__all__", ())
                        if getattr(getattr(package, name), "checkpoint_tasks", ())]
    return tuple(classes)


def model_class_for(head: StoredHead | None) -> type | None:
    """The task model class that takes a checkpoint's head (``checkpoint_tasks``), or None for
    a head no task model takes (the pretraining heads, or no head)."""
    if head is None:
        return None
    return next((cls for cls in _task_model_classes() if head.task in cls.checkpoint_tasks),
                None)


def model_of_checkpoint(checkpoint: Checkpoint | fileio.PathLike):
    """The model a checkpoint holds: the saved keras-bert model as it is, the task model of its
    head (``model_class_for``), a BertPretrainer for pretraining heads, else its BertEncoder.

    Args:
        checkpoint: a checkpoint already read (``read_checkpoint``; nothing is read again) or
            its path (read once).
    """
    if not isinstance(checkpoint, Checkpoint):
        checkpoint = read_checkpoint(checkpoint)
    if checkpoint.model is not None:
        return checkpoint.model
    task_class = model_class_for(checkpoint.head)
    if task_class is not None:
        return task_class.from_checkpoint(checkpoint)
    if checkpoint.head is not None and checkpoint.head.task in ("pretraining", "masked_lm"):
        return BertPretrainer.from_checkpoint(checkpoint)
    return BertEncoder.from_checkpoint(checkpoint)


def convert_checkpoint(src: fileio.PathLike, dst: fileio.PathLike, to_format: str,
                       from_format: str | None = None, overwrite: bool = False):
    """Saves the model ``src`` holds (``model_of_checkpoint``) as a ``to_format`` checkpoint at
    ``dst`` with ``src``'s vocabulary (``save_checkpoint``); returns the model. ``src`` is read
    once.

    Raises:
        OutputExistsError: ``dst`` exists and ``overwrite`` is False (before ``src`` is read).
        ValueError: ``src`` is not a ``from_format`` checkpoint, or ``to_format`` has no names
            for its head (nothing is written).
    """
    if fileio.exists(dst) and not overwrite:
        raise fileio.OutputExistsError(fileio.local_path(dst))
    checkpoint = read_checkpoint(src, from_format)
    model = model_of_checkpoint(checkpoint)
    save_checkpoint(model, dst, to_format, vocabulary=checkpoint.vocabulary,
                    lower_case=checkpoint.lower_case, overwrite=overwrite)
    return model
