"""Training: distribution strategy, optimizers and schedules, and the pretraining run."""

from keras_bert.training.distribute import STRATEGIES, get_strategy, use_logical_cpu_devices
from keras_bert.training.optimization import (DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, BertAdamW,
                                              BertLamb, create_optimizer)
from keras_bert.training.schedules import WarmupPolynomialDecay

__all__ = ["DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY", "STRATEGIES", "BertAdamW", "BertLamb",
           "WarmupPolynomialDecay", "create_optimizer", "get_strategy", "use_logical_cpu_devices"]
