"""Training: distribution strategy, optimizers and schedules, and the pretraining run."""

from keras_bert.training.distribute import STRATEGIES, get_strategy, use_logical_cpu_devices
from keras_bert.training.optimization import (DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, BertAdamW,
                                              BertLamb, create_optimizer)
from keras_bert.training.pretrain import PretrainingResult, evaluate_pretraining, run_pretraining
from keras_bert.training.pretraining_config import PretrainingConfig
from keras_bert.training.pretraining_input import pretraining_dataset
from keras_bert.training.schedules import WarmupPolynomialDecay

__all__ = ["DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY", "STRATEGIES", "BertAdamW", "BertLamb",
           "PretrainingConfig", "PretrainingResult", "WarmupPolynomialDecay", "create_optimizer",
           "evaluate_pretraining", "get_strategy", "pretraining_dataset", "run_pretraining",
           "use_logical_cpu_devices"]
