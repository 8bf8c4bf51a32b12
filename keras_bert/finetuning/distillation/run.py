"""A distillation run, ``distill`` (``keras_bert.distill``): the teacher checked, its texts
augmented, the student built, the teacher's outputs computed once, the student trained by the
fine-tuning recipe on ``SoftTargetLoss``, then compiled as its task's model and compared with the
teacher on the dev texts."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from keras_bert.config import DistillationSettings, FinetuneSettings
from keras_bert.finetuning.distillation.augmentation import (_check_copies, _with_augmented,
                                                             can_augment)
from keras_bert.finetuning.distillation.comparison import compare, size_note, sizes
from keras_bert.finetuning.distillation.loss import LabelAccuracy, SoftTargetLoss, TeacherAgreement
from keras_bert.finetuning.distillation.student import student_of
from keras_bert.finetuning.distillation.targets import distillation_data
from keras_bert.finetuning.distillation.teacher import _check_teacher
from keras_bert.models.task import BertTask
from keras_bert.recipe.batches import PackedRows
from keras_bert.recipe.fit import fit_plan, plan_for

logger = logging.getLogger(__name__)

DEFAULTS = DistillationSettings()
RECIPE = FinetuneSettings()  # epochs and batch size: the fine-tuning recipe's


def distill(teacher: BertTask, texts, labels: Sequence | None = None, *,
            text_pairs: Sequence[str] | None = None, num_layers: int | None = None,
            student=None, epochs: int = RECIPE.epochs, batch_size: int = RECIPE.batch_size,
            learning_rate: float = DEFAULTS.learning_rate,
            temperature: float = DEFAULTS.temperature,
            label_weight: float = DEFAULTS.label_weight,
            augment: int = DEFAULTS.augment,
            bucket_lengths: Sequence[int] | str | None = "auto", seed: int | None = None,
            validation_data=None, callbacks=None, verbose: str | int = "auto") -> BertTask:
    """A smaller model of the teacher's task, trained on the fine-tuned teacher's outputs.

    The student is a task model of the teacher's class with its preprocessor (vocabulary and
    casing), label names and head settings: it predicts, evaluates, saves
    (``save_checkpoint``), quantizes and exports (``export_model(..., quantize="int8")``) like
    any model. Its config's ``distillation`` records the teacher's layers it kept.

    The teacher runs once per text, before training (a classifier that reads a text or pair
    longer than seq_length as windows: once per window, each window's output that window's
    target; the student, which keeps the teacher's window settings, trains on the same
    windows and combines them as the teacher does); the student then trains by the one
    fine-tuning recipe (batches of similar length, AdamW with warmup and linear decay), on
    ``SoftTargetLoss``: for each text, ``T^2`` times the KL divergence between the teacher's and
    the student's outputs at temperature ``T``, mixed with the cross-entropy against its label
    (weight ``label_weight``) where it has one. Texts need no labels, since the teacher labels
    them: a service's unlabelled traffic is the usual source, and more texts help the student
    more than more epochs.

    Args:
        teacher: a fine-tuned ``BertClassifier`` (single-label, multi-label or regression; soft
            targets: its probabilities or score), ``BertTokenClassifier`` (each word's first
            piece's tag probabilities, aligned as its ``fit`` aligns tags),
            ``BertQuestionAnswerer`` (the start and end distributions of every window) or
            ``BertMultipleChoice`` (the choices' probabilities).
        texts: what the teacher's ``fit`` takes: texts; sentences (word lists, raw texts or
            TaggedSentences) for a tagger; SquadExamples or (question, context) pairs for a
            span head; examples or (context, choices) pairs for multiple choice.
        labels: one label per text (names or indices as ``fit`` takes them; a tag list per
            sentence), None for a text without one; or None (the teacher's outputs alone, or
            a tagger's TaggedSentences' tags). A span head's labels are its SquadExamples'
            answers (an example without one is unlabelled), so it takes None.
        text_pairs: the second text of each pair, for pair classifiers.
        num_layers: a student of this many of the teacher's layers (``config.kept_layers``:
            spread evenly, the top one kept), with its embeddings, pooler and head.
        student: instead, a checkpoint ``from_pretrained`` reads or a task model of the
            teacher's class, with the teacher's vocabulary.
        epochs, batch_size, learning_rate: the recipe's settings (3, 32, 5e-5).
        temperature: T (2.0).
        label_weight: the labels' share of a labelled text's loss (0.5; 0: the teacher alone).
        augment: for a text classifier, this many changed copies of each text (words dropped,
            n-grams kept: ``augmented_texts``, with ``seed``) join the texts, labelled by the
            teacher alone (0). Where there are few or no unlabelled texts, copies lift the
            students' accuracy (benchmarks/README.md, augmented copies); each copy costs a
            text's training. Without copies, texts without labels fewer than the labelled ones
            (``DistillationSettings.few_unlabeled_per_labeled``) log a warning that says so.
        bucket_lengths: as ``fit``'s.
        seed: the shuffling seed; with ``keras.callbacks.BackupAndRestore`` in ``callbacks``,
            a run killed mid-way resumes where it was, as ``fit`` does.
        validation_data: ``(texts, labels)`` (or ``(texts, text_pairs, labels)``), scored
            after every epoch (``val_accuracy``, ``val_agreement`` with the teacher), and teacher
            and student side by side at the end (logged).
        callbacks: Keras callbacks.
        verbose: Keras' progress bar setting.

    Returns:
        The student, compiled with its task's own loss and metrics; its ``dev_scores`` hold
        ``compare``'s scores on ``validation_data`` (None without it).

    Example:
    >>> import keras_bert
    >>> from keras_bert.config import kept_layers
    >>> kept_layers(12, 4)
    [2, 5, 8, 11]
    """
    kind = _check_teacher(teacher)
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if not 0 <= label_weight <= 1:
        raise ValueError(f"label_weight must be in [0, 1], got {label_weight}")
    _check_copies(augment)
    if labels is not None and can_augment(teacher):
        labelled = sum(label is not None for label in labels)
        warning = DEFAULTS.few_texts_warning(labelled, len(labels) - labelled, augment)
        if warning:
            logger.warning(warning)
    if augment:
        texts, labels, text_pairs = _with_augmented(teacher, texts, labels, text_pairs, augment,
                                                    seed)
    model = student_of(teacher, num_layers, student)
    model.distillation = {**model.distillation, "temperature": temperature,
                          "label_weight": label_weight, "augment": int(augment)}
    data = distillation_data(teacher, texts, labels, text_pairs, batch_size)
    validation = None
    if validation_data is not None:
        dev = distillation_data(teacher, *_validation_parts(validation_data),
                                batch_size=batch_size)
        validation = PackedRows((dev.x, dev.targets), model.traced_pack_batch, batch_size,
                                bucket_lengths="auto",
                                token_level_labels=model.token_level_labels).dataset(0)
    loss = SoftTargetLoss(kind, temperature, label_weight)
    metrics = [TeacherAgreement(kind)] + ([LabelAccuracy()] if kind in ("softmax", "logits")
                                          else [])
    if isinstance(data.targets, dict):  # one loss per output (a span head's start and end)
        loss = {name: SoftTargetLoss(kind, temperature, label_weight) for name in data.targets}
        metrics = {name: [TeacherAgreement(kind), LabelAccuracy()] for name in data.targets}
    model.compile(loss=loss, metrics=metrics, learning_rate=learning_rate)
    plan = plan_for(model, data.x, data.targets, batch_size=batch_size, epochs=epochs,
                    bucket_lengths=bucket_lengths, seed=seed, arrays=True)
    start = time.perf_counter()
    fit_plan(model, plan, verbose=verbose, callbacks=callbacks, validation_data=validation)
    logger.info("distilled %d rows for %d epochs in %.0f s", data.rows, epochs,
                time.perf_counter() - start)
    # A fresh copy, compiled with the task's own loss and metrics (evaluate(texts, labels) as
    # for any model): a recompiled model would keep the distillation metrics beside them.
    with trained_strategy(model):
        trained, model = model, type(model).from_config(model.get_config())
        model.set_weights(trained.get_weights())
        model.compile()
    model.calibration_texts = trained.calibration_texts  # int8 calibrates on them
    logger.info("%s", size_note(sizes(teacher, model)))
    model.dev_scores = None
    if validation_data is not None:
        model.dev_scores = compare(teacher, model, *_validation_parts(validation_data),
                                   batch_size=batch_size)
        for name, scores in model.dev_scores.items():
            logger.info("dev %s: %s", name, ", ".join(f"{k} {v:.4f}" for k, v in
                                                      scores.items()))
    return model


def trained_strategy(model):
    """The scope of the strategy ``model`` was built under."""
    return model.distribute_strategy.scope()


def _validation_parts(validation_data) -> tuple:
    """(texts, labels, text_pairs) of ``distill``'s validation_data."""
    if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
        raise ValueError("validation_data must be (texts, labels) or (texts, text_pairs, "
                         "labels)")
    if len(validation_data) == 3:
        texts, pairs, labels = validation_data
        return texts, labels, pairs
    texts, labels = validation_data
    return texts, labels, None
