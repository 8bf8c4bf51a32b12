"""Pretraining in TensorFlow: the TFRecord schema and input pipeline (with optional dynamic
masking), the masked-LM + next-sentence loss, the distributed step, and the run with its
checkpoints, evaluation and export."""

from keras_bert.pretraining.config import PretrainingConfig
from keras_bert.pretraining.input import pretraining_dataset
from keras_bert.pretraining.run import PretrainingResult, evaluate_pretraining, run_pretraining

__all__ = ["PretrainingConfig", "PretrainingResult", "evaluate_pretraining", "pretraining_dataset",
           "run_pretraining"]
