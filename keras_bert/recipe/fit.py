"""A fine-tuning run of the recipe on a task model: ``fit(model, x, y, ...)``, which
``BertTask.fit`` hands the model to, and its parts that ``keras-bert finetune`` and
``keras_bert.distill`` run themselves: ``plan_for`` (the run's ``FinetuningPlan`` from
``compile``'s settings), ``use_recipe_optimizer`` (the model compiled with the plan's optimizer)
and ``fit_plan`` (Keras' ``fit`` on the plan's data, optimizer and callbacks).

Every run has a schedule of its own, as every ``fit`` of a Keras model trains: the first run
after ``compile`` makes the optimizer; a later one goes on with it (Adam's moments, its step
count) on the new run's warmup and decay. An optimizer the user compiled with is used as it is.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from keras_bert.config import FinetuneSettings
from keras_bert.recipe.plan import FinetuningPlan

RECIPE = FinetuneSettings()  # BERT's fine-tuning defaults, as compile and fit take them


class RecipeState:
    """A task model's state under the recipe: ``settings``, ``compile``'s optimizer settings
    (learning rate, weight decay, warmup fraction; None for an optimizer the user gave),
    ``compile_arguments`` (loss, metrics and Keras' other ``compile`` arguments) and
    ``optimizer``, the one the recipe made for an earlier run (None before the first). A plain
    object, so that neither Keras nor tf.train.Checkpoint tracks them as parts of the model."""

    def __init__(self, settings: dict | None = None, compile_arguments: dict | None = None):
        self.settings = settings
        self.compile_arguments = dict(compile_arguments or {})
        self.optimizer = None


def fit(model, x=None, y=None, *, batch_size: int | None, epochs: int, verbose, callbacks,
        validation_split: float, validation_data, shuffle: bool, class_weight,
        sample_weight, initial_epoch: int, steps_per_epoch: int | None,
        validation_steps: int | None, validation_batch_size: int | None, validation_freq: int,
        bucket_lengths, seed: int | None):
    """``BertTask.fit``'s run (its docstring says what each argument does): the validation
    split, ``model.adapt`` on the training examples, the plan, then ``fit_plan``."""
    if validation_split:
        (x, y, sample_weight), validation_data = split_validation(
            model, x, y, sample_weight, validation_split, validation_data)
    model.adapt(x)
    plan = plan_for(model, x, y, sample_weight, batch_size=batch_size, epochs=epochs,
                    bucket_lengths=bucket_lengths, seed=seed, shuffle=shuffle,
                    steps_per_epoch=steps_per_epoch)
    if validation_data is not None:
        if not isinstance(validation_data, tuple):
            validation_data = (validation_data,)
        validation_data = model.make_dataset(
            *validation_data, batch_size=validation_batch_size or plan.settings.batch_size,
            bucket_lengths="auto")
    return fit_plan(model, plan, verbose=verbose, callbacks=callbacks,
                    validation_data=validation_data, class_weight=class_weight,
                    initial_epoch=initial_epoch, validation_steps=validation_steps,
                    validation_freq=validation_freq)


def plan_for(model, x, y=None, sample_weight=None, *, batch_size: int | None = None,
             epochs: int = RECIPE.epochs,
             bucket_lengths: Sequence[int] | str | None = RECIPE.bucket_lengths,
             seed: int | None = None, shuffle: bool = True, steps_per_epoch: int | None = None,
             arrays: bool = False) -> FinetuningPlan:
    """The recipe's plan for training ``model`` on ``x``, ``y`` with ``compile``'s optimizer
    settings. ``arrays=True``: ``x`` and ``y`` are already ``to_arrays``' output and targets
    the compiled loss reads as they are (the teacher's outputs of ``keras_bert.distill``)."""
    settings = FinetuneSettings(batch_size=batch_size or RECIPE.batch_size, epochs=epochs,
                                bucket_lengths=bucket_lengths,
                                **(model.recipe.settings or {}))
    return FinetuningPlan(model, x, y, sample_weight, settings=settings, seed=seed,
                          shuffle=shuffle, steps_per_epoch=steps_per_epoch, arrays=arrays)


def fit_plan(model, plan: FinetuningPlan, *, verbose: str | int = "auto", callbacks=None,
             validation_data: tf.data.Dataset | None = None, class_weight: dict | None = None,
             initial_epoch: int = 0, validation_steps: int | None = None,
             validation_freq: int = 1):
    """``keras.Model.fit`` on a plan's data, with its optimizer (when compiled with "auto":
    ``use_recipe_optimizer``) and its callbacks before ``callbacks``; ``validation_data`` is a
    batched dataset."""
    if model.recipe.settings is not None:
        use_recipe_optimizer(model, plan, initial_epoch=initial_epoch)
    keep_text_sample(model, plan)
    with warnings.catch_warnings():
        # Span and tagging heads do not use the encoder's pooler; that is expected.
        warnings.filterwarnings("ignore", message=r"Gradients do not exist for variables "
                                                  r"\['pooler/kernel', 'pooler/bias'\]")
        return keras.Model.fit(model, plan.make_dataset(), epochs=plan.settings.epochs,
                               verbose=verbose,
                               callbacks=[*plan.callbacks(), *(callbacks or [])],
                               validation_data=validation_data, shuffle=False,
                               class_weight=class_weight, initial_epoch=initial_epoch,
                               steps_per_epoch=plan.steps_per_epoch_given,
                               validation_steps=validation_steps,
                               validation_freq=validation_freq)


def keep_text_sample(model, plan: FinetuningPlan) -> None:
    """Leaves the plan's sample of the training texts as ``model.calibration_texts``, which
    int8 then calibrates on without asking for texts (a run on a dataset leaves it as it was)."""
    if plan.text_sample:
        model.calibration_texts = plan.text_sample


def use_recipe_optimizer(model, plan: FinetuningPlan, initial_epoch: int = 0) -> None:
    """Compiles ``model`` with the recipe's optimizer for ``plan``
    (``FinetuningPlan.compile_model``), keeping ``compile``'s loss and metrics ("auto": the
    task's): the optimizer an earlier run made goes on on the plan's schedule; the first is
    made for it. The model's recipe settings become the plan's."""
    if not model.compiled:
        with model.distribute_strategy.scope():
            model.compile()
    state = model.recipe
    carried = model.optimizer if model.optimizer is state.optimizer else None
    plan.compile_model(carried, initial_epoch=initial_epoch, **state.compile_arguments)
    settings = plan.settings
    state.settings = dict(learning_rate=settings.learning_rate,
                          weight_decay=settings.weight_decay,
                          warmup_fraction=settings.warmup_fraction)
    state.optimizer = model.optimizer


def split_validation(model, x, y, sample_weight, split: float, validation_data):
    """``fit``'s ``validation_split``: ((x, y, sample_weight) of the first rows,
    (x, y[, sample_weight]) of the last ``split`` of them, after ``model.to_arrays``), as
    Keras splits in-memory data."""
    if validation_data is not None or isinstance(x, tf.data.Dataset):
        raise ValueError("validation_split takes in-memory examples and no validation_data")
    if not 0 < split < 1:
        raise ValueError(f"validation_split must be in (0, 1), got {split}")
    x, y = model.to_arrays(x, y)
    rows = len(tf.nest.flatten(x)[0])
    cut = rows - int(rows * split)
    if cut in (0, rows):
        raise ValueError(f"validation_split={split} of {rows} rows leaves no training or "
                         f"no validation rows")

    def part(value, rows_slice):
        return None if value is None else tf.nest.map_structure(
            lambda array: np.asarray(array)[rows_slice], value)

    head, tail = slice(None, cut), slice(cut, None)
    validation = (part(x, tail), part(y, tail)) + (
        () if sample_weight is None else (part(sample_weight, tail),))
    return (part(x, head), part(y, head), part(sample_weight, head)), validation
