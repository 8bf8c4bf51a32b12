"""Task-specific knowledge distillation (Hinton et al., 2015; DistilBERT, Sanh et al., 2019): a
fine-tuned teacher's outputs become the soft targets of a smaller student of the same task
class, trained by the one fine-tuning recipe (``keras_bert.recipe.fit``'s ``plan_for`` /
``fit_plan``: length grouping, AdamW on its schedule, BackupAndRestore with a seed).

Keras' own ``keras.distillation.Distiller`` is not used: it calls the teacher in every training
step (here the teacher runs once per text, before training, so a step costs what a student's
fine-tuning step costs), it wraps the student in a new model (so the student would not train
through its own ``fit`` recipe, nor save and export as itself), and its loss cannot weigh
labelled and unlabelled rows differently in one batch.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from keras_bert import fileio
from keras_bert.config import DistillationSettings, FinetuneSettings
from keras_bert.models.task import BertTask
from keras_bert.recipe.batches import PackedRows
from keras_bert.recipe.fit import fit_plan, plan_for

logger = logging.getLogger(__name__)

DEFAULTS = DistillationSettings()
RECIPE = FinetuneSettings()  # epochs and batch size: the fine-tuning recipe's
_EPSILON = 1e-7  # probabilities are clipped to [eps, 1 - eps] before their logarithm (as Keras)
# augmented_texts' rules (Tang et al., 2019, "Distilling task-specific knowledge from BERT into
# simple neural networks", section 3.3, without the part-of-speech swaps): each word dropped
# with this probability, then with the other only a random n-gram of 1 to 5 words kept.
AUGMENT_DROP = 0.1
AUGMENT_NGRAM = 0.25
AUGMENT_MAX_NGRAM = 5


def kept_layers(teacher_layers: int, num_layers: int) -> list[int]:
    """The teacher's layers (0-based) a ``num_layers`` student starts from: spread evenly, the
    top one always kept (it feeds the head): 12 -> 4 keeps 2, 5, 8, 11; 6 -> 3 keeps 1, 3, 5;
    6 -> 2 keeps 2, 5. DistilBERT's initialisation takes one layer in two the same way."""
    if isinstance(num_layers, bool) or not isinstance(num_layers, int) or not (
            0 < num_layers < teacher_layers):
        raise ValueError(f"num_layers must be between 1 and {teacher_layers - 1} (the teacher "
                         f"has {teacher_layers} layers), got {num_layers!r}")
    return [round((index + 1) * teacher_layers / num_layers) - 1 for index in range(num_layers)]


@keras.saving.register_keras_serializable(package="keras_bert")
class SoftTargetLoss(keras.losses.Loss):
    """The distillation loss of one row: ``(1 - w) * soft + w * hard`` with ``w`` =
    ``label_weight`` where there is a label and 0 elsewhere.

    ``y_true`` is float32 [rows, ..., 2K + 2]: the teacher's output (K), the label as the
    model's output would show it (one-hot, 0/1 set or score; K), then 1 where there is a label
    and 1 where the position is scored (a tagger's first pieces; 1 for row-level heads).
    ``y_pred`` is the student's output [rows, ..., k], k <= K: a span head's positions, cut to
    the batch's length (the teacher's and the label's first k values are read). A per-position
    head's loss is the mean over its scored positions, per row.

    Per kind (``BertTask.soft_targets``): "softmax"/"logits": soft = T^2 KL(teacher_T ||
    student_T) over the last axis, hard = cross-entropy; "sigmoid": the same per class
    (Bernoulli), averaged over K; "score": soft and hard are squared errors.
    """

    def __init__(self, kind: str, temperature: float = DEFAULTS.temperature,
                 label_weight: float = DEFAULTS.label_weight, name: str = "soft_target_loss",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        self.kind, self.temperature, self.label_weight = kind, temperature, label_weight

    def call(self, y_true, y_pred):
        y_pred = tf.cast(y_pred, tf.float32)
        teacher, label, labelled, scored = _target_parts(y_true, y_pred)
        weight = self.label_weight * labelled
        t = self.temperature
        if self.kind == "score":
            soft = tf.reduce_mean(tf.square(y_pred - teacher), axis=-1)
            hard = tf.reduce_mean(tf.square(y_pred - label), axis=-1)
        elif self.kind == "sigmoid":
            teacher_logits, student_logits = _sigmoid_logits(teacher), _sigmoid_logits(y_pred)
            p_teacher = tf.sigmoid(teacher_logits / t)
            kl = (p_teacher * (tf.math.log_sigmoid(teacher_logits / t)
                               - tf.math.log_sigmoid(student_logits / t))
                  + (1 - p_teacher) * (tf.math.log_sigmoid(-teacher_logits / t)
                                       - tf.math.log_sigmoid(-student_logits / t)))
            soft = t * t * tf.reduce_mean(kl, axis=-1)
            hard = tf.reduce_mean(label * -tf.math.log_sigmoid(student_logits)
                                  + (1 - label) * -tf.math.log_sigmoid(-student_logits), axis=-1)
        else:
            as_logits = _softmax_logits if self.kind == "softmax" else tf.identity
            teacher_logits, student_logits = as_logits(teacher), as_logits(y_pred)
            log_teacher = tf.nn.log_softmax(teacher_logits / t)
            kl = tf.exp(log_teacher) * (log_teacher - tf.nn.log_softmax(student_logits / t))
            soft = t * t * tf.reduce_sum(kl, axis=-1)
            hard = -tf.reduce_sum(label * tf.nn.log_softmax(student_logits), axis=-1)
        loss = scored * ((1.0 - weight) * soft + weight * hard)
        if loss.shape.rank > 1:  # per position: the mean over each row's scored positions
            loss = tf.reduce_sum(loss, axis=-1) / tf.maximum(tf.reduce_sum(scored, axis=-1), 1.0)
        return loss

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "kind": self.kind, "temperature": self.temperature,
                "label_weight": self.label_weight}


def _target_parts(y_true, y_pred):
    """(teacher [..., k], label [..., k], labelled [...], scored [...]) of ``SoftTargetLoss``'s
    targets, for a student output with k values on its last axis."""
    y_true = tf.cast(y_true, tf.float32)
    width = tf.shape(y_true)[-1]
    offset = (width - 2) // 2
    k = tf.shape(y_pred)[-1]
    return (y_true[..., :k], y_true[..., offset:offset + k], y_true[..., -2],
            y_true[..., -1])


def _softmax_logits(probabilities):
    return tf.math.log(tf.clip_by_value(probabilities, _EPSILON, 1.0))


def _sigmoid_logits(probabilities):
    p = tf.clip_by_value(probabilities, _EPSILON, 1.0 - _EPSILON)
    return tf.math.log(p) - tf.math.log1p(-p)


@keras.saving.register_keras_serializable(package="keras_bert")
class TeacherAgreement(keras.metrics.Metric):
    """The share of scored rows (or positions) whose top class (argmax of the last axis) is the
    teacher's; for sigmoid outputs, the share of class decisions (p >= 0.5) the teacher makes
    too."""

    def __init__(self, kind: str, name: str = "agreement", **kwargs):
        super().__init__(name=name, **kwargs)
        self.kind = kind
        self.agreed = self.add_variable(shape=(), initializer="zeros", name="agreed")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = tf.cast(y_pred, tf.float32)
        teacher, _, _, scored = _target_parts(y_true, y_pred)
        if self.kind == "sigmoid":
            same = tf.reduce_mean(tf.cast(tf.equal(teacher >= 0.5, y_pred >= 0.5), tf.float32),
                                  axis=-1)
        else:
            same = tf.cast(tf.equal(tf.argmax(teacher, -1), tf.argmax(y_pred, -1)), tf.float32)
        self.agreed.assign_add(tf.reduce_sum(same * scored))
        self.count.assign_add(tf.reduce_sum(scored))

    def result(self):
        return tf.math.divide_no_nan(self.agreed, self.count)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "kind": self.kind}


@keras.saving.register_keras_serializable(package="keras_bert")
class LabelAccuracy(keras.metrics.Metric):
    """Accuracy against the labels where there are labels (argmax of the last axis)."""

    def __init__(self, name: str = "accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        _, label, labelled, scored = _target_parts(y_true, y_pred)
        right = tf.cast(tf.equal(tf.argmax(label, -1), tf.argmax(y_pred, -1)), tf.float32)
        self.correct.assign_add(tf.reduce_sum(right * labelled * scored))
        self.count.assign_add(tf.reduce_sum(labelled * scored))

    def result(self):
        return tf.math.divide_no_nan(self.correct, self.count)


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
    reads them (``BertTask.distillation_rows`` says which rows and positions)."""
    inputs = _inputs(texts, text_pairs)
    if not len(inputs):
        raise ValueError("distill got no texts")
    rows, y, labelled, scored = teacher.distillation_rows(inputs, labels)
    count = len(tf.nest.flatten(rows)[0])
    if count == 0:
        raise ValueError("distill got no texts")
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


def augmented_texts(texts: Sequence[str], copies: int, seed: int | None = None,
                    text_pairs: Sequence[str] | None = None) -> tuple[list, list | None]:
    """``copies`` changed copies of each text, for the teacher to label: more texts near the
    training texts, the lever that unlabelled texts are when a task has none (Tang et al., 2019,
    section 3.3; TinyBERT augments its data in the same spirit).

    Each copy drops each whitespace-separated word with probability ``AUGMENT_DROP`` (keeping
    at least one), then with probability ``AUGMENT_NGRAM`` keeps only a random n-gram of 1 to
    ``AUGMENT_MAX_NGRAM`` of its words. The same ``seed`` (None: 0) gives the same copies, so a
    resumed run trains on the texts it started with. A pair's two texts change independently.

    Returns:
        (texts, text_pairs): the copies, copy by copy in the order of ``texts``; text_pairs
        None when ``text_pairs`` is.

    Example:
    >>> copies, _ = augmented_texts(["what is the capital of peru ?"], 2, seed=0)
    >>> len(copies), all(set(c.split()) <= set("what is the capital of peru ?".split())
    ...                  for c in copies)
    (2, True)
    """
    _check_copies(copies)
    rng = random.Random(0 if seed is None else int(seed))  # a NumPy integer too
    changed, changed_pairs = [], None if text_pairs is None else []
    for _ in range(copies):
        for row, text in enumerate(texts):
            changed.append(_augmented(text, rng))
            if text_pairs is not None:
                changed_pairs.append(_augmented(text_pairs[row], rng))
    return changed, changed_pairs


def _check_copies(copies) -> None:
    if isinstance(copies, bool) or not isinstance(copies, (int, np.integer)) or copies < 0:
        raise ValueError(f"augment must be a whole number of copies, 0 or more; got {copies!r}")


def _augmented(text: str, rng: random.Random) -> str:
    words = text.split()
    kept = [word for word in words if rng.random() >= AUGMENT_DROP] or words
    if rng.random() < AUGMENT_NGRAM and len(kept) > 1:
        n = rng.randint(1, min(AUGMENT_MAX_NGRAM, len(kept)))
        start = rng.randint(0, len(kept) - n)
        kept = kept[start:start + n]
    return " ".join(kept)


def _with_augmented(teacher, texts, labels, text_pairs, copies: int, seed) -> tuple:
    """``(texts, labels, text_pairs)`` followed by ``augmented_texts``' copies, unlabelled."""
    texts = list(texts)
    text_pairs = None if text_pairs is None else list(text_pairs)
    _check_augmentable(teacher, texts, text_pairs)
    _inputs(texts, text_pairs)  # the same number of each
    if labels is not None and len(labels) != len(texts):
        raise ValueError(f"got {len(texts)} texts but {len(labels)} labels")
    extra, extra_pairs = augmented_texts(texts, copies, seed, text_pairs)
    logger.info("augment=%d: %d changed copies of the texts join them, labelled by the teacher",
                copies, len(extra))
    unchanged = sum(copy == texts[row % len(texts)] for row, copy in enumerate(extra))
    if unchanged > len(extra) // 2:
        logger.warning("augment=%d: %d of the %d copies equal their text (a copy drops and keeps "
                       "whitespace-separated words: texts of one or two words, or without spaces "
                       "between words as in Chinese or Japanese, barely change); they cost "
                       "training time and teach little", copies, unchanged, len(extra))
    labels = ([None] * len(texts) if labels is None else list(labels)) + [None] * len(extra)
    return (texts + extra, labels,
            None if text_pairs is None else text_pairs + extra_pairs)


def _check_augmentable(teacher, texts, text_pairs) -> None:
    """``augment`` changes raw texts: a classifier's (and a pair's). Another task's labels
    (tags per word, answer spans, choices) would no longer line up with the changed words."""
    from keras_bert.tasks.classification.model import BertClassifier
    if not isinstance(teacher, BertClassifier) or getattr(teacher, "feature_names", None):
        raise ValueError(f"augment= changes raw texts, for text classifiers; a "
                         f"{type(teacher).__name__}'s labels would no longer match its "
                         f"changed inputs: give it more texts instead")
    for name, values in (("texts", texts), ("text_pairs", text_pairs)):
        if values is None:
            continue
        bad = next((i for i, v in enumerate(values) if not isinstance(v, str)), None)
        if bad is not None:
            raise ValueError(f"augment= changes raw texts; {name}[{bad}] is a "
                             f"{type(values[bad]).__name__}")


def _check_teacher(teacher) -> str:
    if not isinstance(teacher, BertTask):
        raise ValueError(f"distill takes a fine-tuned task model as the teacher; got "
                         f"{type(teacher).__name__}, which has no head to distil")
    kind = teacher.soft_targets()
    if kind is None:
        raise ValueError(f"distill cannot distil a {type(teacher).__name__}: it takes a "
                         f"BertClassifier, BertTokenClassifier, BertQuestionAnswerer or "
                         f"BertMultipleChoice")
    if teacher.preprocessor is None:
        raise ValueError(f"the teacher {type(teacher).__name__} has no preprocessor, so it "
                         f"takes no raw text; build it with from_pretrained")
    if any(layer.quantization_mode is not None for layer in teacher.encoder.int8_layers()):
        raise ValueError("the teacher is quantized (int8); distil from its float32 model and "
                         "quantize the student")
    return kind


def _copy_of(layer):
    return keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))


def _assign_head(student: BertTask, teacher: BertTask) -> None:
    """The teacher's weights for the student's layers outside the encoder (head, features),
    by layer name."""
    for layer in student.layers:
        if layer is student.encoder or not layer.weights:
            continue
        layer.set_weights(teacher.get_layer(layer.name).get_weights())


def student_of(teacher: BertTask, num_layers: int | None = None, student=None) -> BertTask:
    """The student ``distill`` starts from: ``num_layers`` of the teacher's layers
    (``kept_layers``) on its embeddings and pooler, with its head; or ``student`` (a path
    ``from_pretrained`` reads, or a task model of the teacher's class) with the teacher's
    preprocessor and head settings (a new head where the widths differ). It is built under the
    teacher's tf.distribute strategy, so it trains where the teacher did."""
    with teacher.distribute_strategy.scope():
        return _student_of(teacher, num_layers, student)


def _student_of(teacher: BertTask, num_layers: int | None, student) -> BertTask:
    cls = type(teacher)
    config = teacher.get_config()
    config.pop("distillation", None)
    config["name"] = f"{teacher.name}_student"
    if (num_layers is None) == (student is None):
        raise ValueError("distill takes num_layers= (a student from the teacher's layers) or "
                         "student= (a checkpoint or model), one of them")
    teacher_layers = teacher.encoder.bert_config.num_hidden_layers
    if num_layers is not None:
        kept = kept_layers(teacher_layers, num_layers)
        config["encoder"]["config"]["num_hidden_layers"] = num_layers
        model = cls.from_config(config)
        model.encoder.embeddings.set_weights(teacher.encoder.embeddings.get_weights())
        model.encoder.pooler.set_weights(teacher.encoder.pooler.get_weights())
        for block, index in zip(model.encoder.transformer_layers, kept):
            block.set_weights(teacher.encoder.transformer_layers[index].get_weights())
        _assign_head(model, teacher)
        logger.info("student: the teacher's embeddings, pooler and head, and %d of its %d "
                    "layers: %s (0-based)", num_layers, teacher_layers,
                    ", ".join(map(str, kept)))
        model.distillation = {"teacher": teacher.name, "teacher_layers": teacher_layers,
                              "kept_layers": kept}
        return model
    source = student
    if not isinstance(student, keras.Model):
        student = cls.from_pretrained(student)
    if not isinstance(student, BertTask):
        raise ValueError(f"student= must be a checkpoint or a task model; got "
                         f"{type(student).__name__}")
    if student.preprocessor is not None and (
            student.tokenizer.vocab != teacher.tokenizer.vocab):
        raise ValueError(f"the student {source!r} has another vocabulary than the teacher "
                         f"({len(student.tokenizer.vocab)} vs {len(teacher.tokenizer.vocab)} "
                         f"tokens); a student must tokenize as its teacher does")
    encoder = student.encoder
    if encoder.bert_config.vocab_size != teacher.encoder.bert_config.vocab_size:
        raise ValueError(f"the student {source!r} has vocab_size "
                         f"{encoder.bert_config.vocab_size}, the teacher "
                         f"{teacher.encoder.bert_config.vocab_size}; a student must tokenize "
                         f"as its teacher does")
    config.pop("encoder")
    config.pop("preprocessor")
    config.pop("name", None)
    model = cls(encoder=encoder, preprocessor=_copy_of(teacher.preprocessor), **config)
    same_width = encoder.bert_config.hidden_size == teacher.encoder.bert_config.hidden_size
    if same_width:
        _assign_head(model, teacher)
    logger.info("student: %s (%d layers, hidden %d), with %s", source,
                encoder.bert_config.num_hidden_layers, encoder.bert_config.hidden_size,
                "the teacher's head" if same_width else
                "a new head (its width differs from the teacher's)")
    model.distillation = {"teacher": teacher.name, "teacher_layers": teacher_layers,
                          "student": str(source)}
    return model


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

    The teacher runs once per text, before training; the student then trains by the one
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
        num_layers: a student of this many of the teacher's layers (``kept_layers``: spread
            evenly, the top one kept), with its embeddings, pooler and head.
        student: instead, a checkpoint ``from_pretrained`` reads or a task model of the
            teacher's class, with the teacher's vocabulary.
        epochs, batch_size, learning_rate: the recipe's settings (3, 32, 5e-5).
        temperature: T (2.0).
        label_weight: the labels' share of a labelled text's loss (0.5; 0: the teacher alone).
        augment: for a text classifier, this many changed copies of each text (words dropped,
            n-grams kept: ``augmented_texts``, with ``seed``) join the texts, labelled by the
            teacher alone (0). Where there are few or no unlabelled texts, copies lift the
            students' accuracy (benchmarks/README.md, augmented copies); each copy costs a
            text's training.
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
    >>> from keras_bert.finetuning.distillation import kept_layers
    >>> kept_layers(12, 4)
    [2, 5, 8, 11]
    """
    kind = _check_teacher(teacher)
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if not 0 <= label_weight <= 1:
        raise ValueError(f"label_weight must be in [0, 1], got {label_weight}")
    _check_copies(augment)
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
        validation = PackedRows((dev.x, dev.targets), model.pack_batch, batch_size,
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
    logger.info("distilled %d texts for %d epochs in %.0f s", data.rows, epochs,
                time.perf_counter() - start)
    # A fresh copy, compiled with the task's own loss and metrics (evaluate(texts, labels) as
    # for any model): a recompiled model would keep the distillation metrics beside them.
    with trained_strategy(model):
        trained, model = model, type(model).from_config(model.get_config())
        model.set_weights(trained.get_weights())
        model.compile()
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


def compare(teacher: BertTask, student: BertTask, texts, labels=None, text_pairs=None,
            batch_size: int = RECIPE.batch_size) -> dict[str, dict[str, float]]:
    """Teacher and student on the same labelled examples, side by side: {"teacher": scores,
    "student": scores, "majority": scores}. Scores: accuracy where there are labels (of the
    top class, of each class decision for multi-label, of each first piece's tag for a
    tagger, of the start and end positions for a span head), or mean squared error for
    regression; the student's agreement with the teacher; examples per second of ``predict``
    (after a first call); and the majority label's rate, the score of always guessing it."""
    inputs = _inputs(texts, text_pairs)
    rows, y, labelled, scored = teacher.distillation_rows(inputs, labels)
    if y is None:
        raise ValueError("compare needs labelled examples")
    kind = teacher.soft_targets()
    outputs, results = {}, {}
    for name, model in (("teacher", teacher), ("student", student)):
        model.predict(rows, batch_size=batch_size, verbose=0)  # traced before it is timed
        start = time.perf_counter()
        outputs[name] = model.predict(rows, batch_size=batch_size, verbose=0)
        results[name] = {"texts_per_s": len(inputs) / max(time.perf_counter() - start, 1e-9)}
    mask = labelled if scored is None else labelled & scored
    names = list(y) if isinstance(y, dict) else [None]
    for name in ("teacher", "student"):
        values = []
        for output_name in names:
            output = np.asarray(outputs[name] if output_name is None
                                else outputs[name][output_name])
            truth = np.asarray(y if output_name is None else y[output_name])
            if kind == "score":
                errors = (output.reshape(len(truth), -1) - truth.reshape(len(truth), -1)) ** 2
                values.append(float(np.mean(errors[mask])))
            elif kind == "sigmoid":
                values.append(float(np.mean(((output >= 0.5) == (truth >= 0.5))[mask])))
            else:
                values.append(float(np.mean((np.argmax(output, -1) == truth)[mask])))
        results[name]["mse" if kind == "score" else "accuracy"] = float(np.mean(values))
    if kind != "score":
        agreements = []
        for output_name in names:
            ours, theirs = ((outputs[n] if output_name is None else outputs[n][output_name])
                            for n in ("student", "teacher"))
            same = ((np.asarray(ours) >= 0.5) == (np.asarray(theirs) >= 0.5)).all(-1) \
                if kind == "sigmoid" else np.argmax(ours, -1) == np.argmax(theirs, -1)
            agreements.append(float(np.mean(same if scored is None else same[scored])))
        results["student"]["agreement"] = float(np.mean(agreements))
    if kind in ("softmax", "logits"):
        majority = []
        for output_name in names:
            truth = np.asarray(y if output_name is None else y[output_name])[mask]
            majority.append(float(np.bincount(truth.reshape(-1)).max() / truth.size))
        results["majority"] = {"accuracy": float(np.mean(majority))}
    return results


def load_teacher(path: fileio.PathLike) -> BertTask:
    """The task model a checkpoint holds, for ``keras-bert distill --teacher``."""
    from keras_bert.tasks.checkpoint_models import model_of_checkpoint
    model = model_of_checkpoint(path)
    _check_teacher(model)
    return model
