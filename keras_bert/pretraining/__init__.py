"""Pretraining in TensorFlow: the TFRecord schema and input pipeline (with optional dynamic
masking), the masked-LM + next-sentence loss, the distributed step, and the run with its
checkpoints, evaluation and export. The names below load TensorFlow on first use (except
PretrainingSettings)."""

from keras_bert.lazy import lazy_attributes

__all__ = ["PretrainingSettings", "PretrainingResult", "evaluate_pretraining",
           "pretraining_dataset", "run_pretraining"]
__getattr__, __dir__ = lazy_attributes(__name__, {
    "PretrainingSettings": "keras_bert.pretraining.settings",
    "pretraining_dataset": "keras_bert.pretraining.input",
    "PretrainingResult": "keras_bert.pretraining.run",
    "evaluate_pretraining": "keras_bert.pretraining.run",
    "run_pretraining": "keras_bert.pretraining.run",
})
