"""The teacher: which task models can teach (a float32 task model with soft targets and a
preprocessor), and ``load_teacher``, the one a checkpoint holds."""

from __future__ import annotations

from keras_bert import fileio
from keras_bert.models.task import BertTask


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


def load_teacher(path: fileio.PathLike) -> BertTask:
    """The task model a checkpoint holds, for ``keras-bert distill --teacher``."""
    from keras_bert.tasks.checkpoint_models import model_of_checkpoint
    model = model_of_checkpoint(path)
    _check_teacher(model)
    return model
