"""BERT's optimizers (AdamW and LAMB with weight-decay exclusions and global-norm clipping) and
its learning-rate schedule."""

from keras_bert.optimization.optimizers import (DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, OPTIMIZERS,
                                                BertAdamW, BertLamb, create_optimizer)
from keras_bert.optimization.schedules import WarmupPolynomialDecay

__all__ = ["BertAdamW", "BertLamb", "DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY", "OPTIMIZERS",
           "WarmupPolynomialDecay", "create_optimizer"]
