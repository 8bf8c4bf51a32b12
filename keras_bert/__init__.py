"""keras-bert: BERT (Devlin et al., 2018) for TensorFlow and Keras 3.

The public API: configuration, the encoder and task models, tokenization, checkpoint interop.

Importing the package is cheap. The public names below load their module (and TensorFlow) on
first use, so the pure-Python tools (the pretraining-data writer, BertTokenizer) never import
TensorFlow or Keras.

Saved models still load with plain ``keras.saving.load_model`` after ``import keras_bert``,
whichever of the two is imported first. Keras looks classes up by their registered name
("keras_bert>BertClassifier") in its custom objects. We put there, for each of our classes, a
``_LoadOnFirstUse`` stand-in whose ``from_config`` imports the class's module and hands over to
the real class; importing that module replaces the stand-in with the class itself (the
``@keras.saving.register_keras_serializable`` decorator). The stand-ins go in now if Keras is
loaded. If it is installed but not loaded, ``sys.modules["keras"]`` becomes a module that has
not run yet (``_KerasOnFirstUse``): Keras runs, and the stand-ins go in, on its first use.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types

__version__ = "0.1.0"

# public name -> the module that defines it.
_EXPORTS = {
    "BertConfig": "keras_bert.config",
    "export_model": "keras_bert.export",
    "export_tf_hub": "keras_bert.export",
    "BertEncoder": "keras_bert.models.encoder",
    "BertPretrainer": "keras_bert.models.pretrainer",
    "BertClassifier": "keras_bert.tasks.classification.model",
    "BertEmbedder": "keras_bert.tasks.embedding.model",
    "BertMultipleChoice": "keras_bert.tasks.multiple_choice.model",
    "BertQuestionAnswerer": "keras_bert.tasks.squad.model",
    "BertTokenClassifier": "keras_bert.tasks.ner.model",
    "BertPreprocessor": "keras_bert.tokenization.preprocessor",
    "BertTokenizer": "keras_bert.tokenization.tokenizer",
    "PretrainingConfig": "keras_bert.pretraining.config",
    "run_pretraining": "keras_bert.pretraining.run",
    "create_optimizer": "keras_bert.optimization.optimizers",
    "get_strategy": "keras_bert.training.distribute",
    "FinetuneConfig": "keras_bert.training.finetune",
    "run_finetune": "keras_bert.training.finetune",
}
__all__ = sorted(_EXPORTS)

# Every class we register with Keras (as "keras_bert>Name") -> the module that defines it.
# tests/test_lazy_imports.py checks that this table lists exactly the registered classes.
KERAS_CLASSES = {
    "BertDropout": "keras_bert.layers.dropout",
    "BertEmbeddings": "keras_bert.layers.embeddings",
    "TabularFeatures": "keras_bert.layers.features",
    "MaskedLMHead": "keras_bert.layers.heads",
    "NextSentenceHead": "keras_bert.layers.heads",
    "BertLayerNormalization": "keras_bert.layers.layer_normalization",
    "SentencePooling": "keras_bert.layers.pooling",
    "ClassificationHead": "keras_bert.layers.task_heads",
    "SpanHead": "keras_bert.layers.task_heads",
    "TokenClassificationHead": "keras_bert.layers.task_heads",
    "BertSelfAttention": "keras_bert.layers.transformer",
    "TransformerBlock": "keras_bert.layers.transformer",
    "BertEncoder": "keras_bert.models.encoder",
    "BertPretrainer": "keras_bert.models.pretrainer",
    "BertAdamW": "keras_bert.optimization.optimizers",
    "BertLamb": "keras_bert.optimization.optimizers",
    "WarmupPolynomialDecay": "keras_bert.optimization.schedules",
    "BertClassifier": "keras_bert.tasks.classification.model",
    "BertEmbedder": "keras_bert.tasks.embedding.model",
    "BertMultipleChoice": "keras_bert.tasks.multiple_choice.model",
    "BertTokenClassifier": "keras_bert.tasks.ner.model",
    "FirstPieceAccuracy": "keras_bert.tasks.ner.model",
    "BertQuestionAnswerer": "keras_bert.tasks.squad.model",
    "BertPreprocessor": "keras_bert.tokenization.preprocessor",
}


def __getattr__(name: str):
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'keras_bert' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


class _LoadOnFirstUse:
    """Stands in for one of our classes in Keras' custom objects until a saved model needs it."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def load(self) -> type:
        return getattr(importlib.import_module(self.module), self.name)

    def from_config(self, config):
        return self.load().from_config(config)

    def __repr__(self) -> str:
        return f"<{self.module}.{self.name}, imported on first use>"


def register_with_keras(keras) -> None:
    """Puts a stand-in for each of our classes in Keras' custom objects (a class already
    registered stays)."""
    custom_objects = keras.saving.get_custom_objects()
    for name, module in KERAS_CLASSES.items():
        custom_objects.setdefault(f"keras_bert>{name}", _LoadOnFirstUse(module, name))


class _KerasOnFirstUse(types.ModuleType):
    """``keras`` before Keras has run: a module with Keras' spec and path, so that finding it
    and importing its submodules (TensorFlow's start-up does both) work without running Keras'
    ``__init__``. The first use of anything else (``keras.saving``, ``keras.layers``...) runs
    Keras' ``__init__`` in this module and registers our classes; from then on it is the
    ordinary ``keras`` module."""

    def __getattr__(self, name: str):
        submodule = sys.modules.get(f"{self.__name__}.{name}")
        if submodule is not None:  # a submodule being imported: its attribute is set last
            return submodule
        with _KERAS_LOCK:
            if type(self) is _KerasOnFirstUse:
                self.__class__ = types.ModuleType  # Keras' own start-up sees a plain module
                try:
                    self.__spec__.loader.exec_module(self)
                except BaseException:
                    sys.modules.pop(self.__name__, None)  # as a failed import: the next retries
                    raise
                register_with_keras(self)
        return getattr(self, name)


_KERAS_LOCK = threading.RLock()


def _register_now_or_when_keras_loads() -> None:
    if "keras" in sys.modules:
        register_with_keras(sys.modules["keras"])
        return
    spec = importlib.util.find_spec("keras")
    if spec is None or spec.loader is None:
        return  # no Keras: nothing to register with
    keras = importlib.util.module_from_spec(spec)
    keras.__class__ = _KerasOnFirstUse
    sys.modules["keras"] = keras


_register_now_or_when_keras_loads()
