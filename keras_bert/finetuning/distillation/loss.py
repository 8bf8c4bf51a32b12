"""The distillation loss, ``SoftTargetLoss`` (the teacher's soft targets at a temperature, mixed
with the labels where there are some), and the metrics that read the same targets:
``TeacherAgreement`` and ``LabelAccuracy``."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from keras_bert.config import DistillationSettings

DEFAULTS = DistillationSettings()
_EPSILON = 1e-7  # probabilities are clipped to [eps, 1 - eps] before their logarithm (as Keras)


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
