"""BERT's optimizers (AdamW and LAMB with weight-decay exclusions and global-norm clipping) and
its learning-rate schedule. The names below load Keras on first use (except OPTIMIZERS)."""

from keras_bert.lazy import lazy_attributes

OPTIMIZERS = ("adamw", "lamb")  # what create_optimizer builds, by name

__all__ = ["BertAdamW", "BertLamb", "DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY", "OPTIMIZERS",
           "WarmupPolynomialDecay", "create_optimizer"]
__getattr__, __dir__ = lazy_attributes(__name__, {
    "BertAdamW": "keras_bert.optimization.optimizers",
    "BertLamb": "keras_bert.optimization.optimizers",
    "DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY": "keras_bert.optimization.optimizers",
    "create_optimizer": "keras_bert.optimization.optimizers",
    "WarmupPolynomialDecay": "keras_bert.optimization.schedules",
})
