"""The student a distillation starts from (``student_of``): some of the teacher's layers
(``kept_layers``) or another checkpoint, with the teacher's preprocessor and, where the widths
match, its head."""

from __future__ import annotations

import logging

import keras

from keras_bert.config import kept_layers
from keras_bert.models.task import BertTask

logger = logging.getLogger(__name__)


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
