"""keras-bert: BERT (Devlin et al., 2018) for TensorFlow and Keras 3.

The public API: configuration, the encoder and task models, tokenization, checkpoint interop.

Importing the package is cheap: the names below load their modules (and TensorFlow) on first
use, so that the pure-Python tools (the pretraining-data writer, the tokenizer) start in a
fraction of a second. The Keras classes still register for `keras.saving.load_model` as soon as
Keras is loaded, however it is: by `import keras`, `import tensorflow`, or one of our modules.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys

__version__ = "0.1.0"

# public name -> the module that defines it.
_EXPORTS = {
    "BertConfig": "keras_bert.config",
    "export_model": "keras_bert.export",
    "export_tf_hub": "keras_bert.export",
    "BertClassifier": "keras_bert.models",
    "BertEmbedder": "keras_bert.models",
    "BertEncoder": "keras_bert.models",
    "BertMultipleChoice": "keras_bert.models",
    "BertPretrainer": "keras_bert.models",
    "BertQuestionAnswerer": "keras_bert.models",
    "BertTokenClassifier": "keras_bert.models",
    "BertPreprocessor": "keras_bert.tokenization.preprocessor",
    "BertTokenizer": "keras_bert.tokenization.tokenizer",
    "PretrainingConfig": "keras_bert.training",
    "create_optimizer": "keras_bert.training",
    "get_strategy": "keras_bert.training",
    "run_pretraining": "keras_bert.training",
    "FinetuneConfig": "keras_bert.training.finetune",
    "run_finetune": "keras_bert.training.finetune",
}
__all__ = sorted(_EXPORTS)

# The modules whose import registers every Keras-serializable class of the package (layers,
# models, the preprocessor, optimizers, schedules), so that `.keras` files deserialize.
_SERIALIZABLE_MODULES = ("keras_bert.layers", "keras_bert.models",
                         "keras_bert.tokenization.preprocessor", "keras_bert.training.optimization",
                         "keras_bert.training.schedules")


_registration = {"done": False, "running": False}


def register_keras_serializables() -> None:
    """Imports the modules that register keras-bert's classes with Keras' serialization."""
    if _registration["done"] or _registration["running"]:
        return
    _registration["running"] = True
    try:
        for name in _SERIALIZABLE_MODULES:
            importlib.import_module(name)
        _registration["done"] = True
    finally:
        _registration["running"] = False


def register_when_idle(caller: str | None = None) -> None:
    """Registers the Keras classes, once Keras is loaded, unless one of our modules (other than
    `caller`, which is finishing) is still being executed: importing the rest now could need a
    half-made module. `_RegistrationHook` calls it when Keras or one of our modules finishes
    loading, so the last of those registers everything."""
    if (not _registration["done"] and "keras" in sys.modules
            and not _keras_bert_import_in_progress(caller)):
        register_keras_serializables()


def __getattr__(name: str):
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'keras_bert' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    register_keras_serializables()
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


def _keras_bert_import_in_progress(caller: str | None = None) -> bool:
    """Whether one of our modules other than `caller` is being executed."""
    return any(getattr(getattr(module, "__spec__", None), "_initializing", False)
               for name, module in list(sys.modules.items())
               if name.startswith("keras_bert.") and name != caller and module is not None)


class _RegistrationHook(importlib.abc.MetaPathFinder):
    """Calls `register_when_idle` each time `keras` or one of our modules finishes loading,
    until the classes are registered (then it removes itself).

    It finds nothing itself: it asks the other finders and wraps the loader's `exec_module`.
    Keras may load in the middle of one of our imports (`import tensorflow` loads it too); the
    registration then waits for the end of the outermost of our modules being imported.
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "keras" and not fullname.startswith("keras_bert."):
            return None
        if _registration["done"]:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module
        caller = None if fullname == "keras" else fullname

        def exec_then_register(module):
            exec_module(module)
            register_when_idle(caller)

        loader.exec_module = exec_then_register
        return spec


register_when_idle()  # Keras may be loaded already
if not _registration["done"] and not any(isinstance(finder, _RegistrationHook)
                                         for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegistrationHook())
