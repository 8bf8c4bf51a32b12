"""keras-bert: BERT (Devlin et al., 2018) for TensorFlow and Keras 3.

The public API: configuration, the encoder and task models, tokenization, checkpoint interop
(``from_pretrained`` on each model class, or ``read_checkpoint`` once then ``from_checkpoint``
on each; ``save_checkpoint`` for every format).

Importing the package is cheap. The public names below load their module (and TensorFlow) on
first use, so the pure-Python tools (the pretraining-data writer, BertTokenizer) never import
TensorFlow or Keras. Each task folder's public names (the ``__all__`` of
``keras_bert/tasks/<task>/__init__.py``) are public names here too.

Saved models load with plain Keras after ``import keras_bert``, in any import order and through
any import form (``keras.saving.load_model``, ``from keras.models import load_model``...). Keras
finds a class by its registered name ("keras_bert>BertClassifier") in its custom objects. Once
Keras' ``__init__`` has run (a post-import hook from wrapt; at once if Keras is already loaded),
``register_with_keras`` puts there a ``_LoadOnFirstUse`` stand-in for each of our classes; its
``from_config`` imports the class's module and hands over to the real class, and importing that
module replaces the stand-in with the class itself (the
``@keras.saving.register_keras_serializable`` decorator). The classes are found by reading our
source for that decorator, which imports nothing.
"""

from __future__ import annotations

import ast
import functools
import importlib
import pathlib

import wrapt

__version__ = "0.1.0"

_PACKAGE_DIR = pathlib.Path(__file__).parent


def _task_exports() -> dict[str, str]:
    """Each task folder's public names (its ``__init__``'s ``__all__``) -> the task package,
    read from the source so that TensorFlow stays unloaded."""
    exports = {}
    for init in sorted(_PACKAGE_DIR.glob("tasks/*/__init__.py")):
        for node in ast.parse(init.read_text(encoding="utf-8"), str(init)).body:
            if isinstance(node, ast.Assign) and any(isinstance(target, ast.Name)
                                                    and target.id == "__all__"
                                                    for target in node.targets):
                for name in ast.literal_eval(node.value):
                    if name in exports:
                        raise ValueError(f"{init}: {name!r} is already public in {exports[name]}")
                    exports[name] = f"keras_bert.tasks.{init.parent.name}"
    return exports


# public name -> the module that defines it (or, for a task's names, its task package).
_EXPORTS = {
    "BertConfig": "keras_bert.config",
    "export_model": "keras_bert.export",
    "export_tf_hub": "keras_bert.export",
    "BertEncoder": "keras_bert.models.encoder",
    "BertPretrainer": "keras_bert.models.pretrainer",
    "BertPreprocessor": "keras_bert.tokenization.preprocessor",
    "BertTokenizer": "keras_bert.tokenization.tokenizer",
    "PretrainingSettings": "keras_bert.pretraining.settings",
    "run_pretraining": "keras_bert.pretraining.run",
    "create_optimizer": "keras_bert.optimization.optimizers",
    "get_strategy": "keras_bert.distribute",
    "FinetuneRun": "keras_bert.finetuning.finetune",
    "run_finetune": "keras_bert.finetuning.finetune",
    "distill": "keras_bert.finetuning.distillation.run",
    "DistillationSettings": "keras_bert.config",
    "FinetuneSettings": "keras_bert.config",
    "save_checkpoint": "keras_bert.checkpoints.saving",
    "read_checkpoint": "keras_bert.checkpoints.reading",
    "start_tensorflow_quietly": "keras_bert.tf_startup",
    **_task_exports(),
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'keras_bert' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


def _registers_with_keras(decorator: ast.expr) -> bool:
    """Whether ``decorator`` is
    ``keras.saving.register_keras_serializable(package="keras_bert")``."""
    return (isinstance(decorator, ast.Call)
            and ast.unparse(decorator.func).endswith("register_keras_serializable")
            and any(keyword.arg == "package" and isinstance(keyword.value, ast.Constant)
                    and keyword.value.value == "keras_bert" for keyword in decorator.keywords))


@functools.cache
def keras_classes() -> dict[str, str]:
    """Every class we register with Keras (as "keras_bert>Name") -> the module that defines it.

    They are the classes under ``keras_bert/`` decorated with
    ``@keras.saving.register_keras_serializable(package="keras_bert")``, found by reading the
    source (once, when Keras loads), so that a new class needs no other entry.
    """
    classes = {}
    for path in sorted(_PACKAGE_DIR.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if "register_keras_serializable" not in source:
            continue
        parts = path.relative_to(_PACKAGE_DIR).with_suffix("").parts
        module = ".".join(("keras_bert", *(parts[:-1] if parts[-1] == "__init__" else parts)))
        for node in ast.parse(source, str(path)).body:
            if isinstance(node, ast.ClassDef) and any(map(_registers_with_keras,
                                                          node.decorator_list)):
                classes[node.name] = module
    return classes


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
    for name, module in keras_classes().items():
        custom_objects.setdefault(f"keras_bert>{name}", _LoadOnFirstUse(module, name))


# Runs register_with_keras once Keras' own __init__ has run, whoever imports it and however; at
# once if Keras is already loaded. Without Keras installed, it never runs.
wrapt.register_post_import_hook(register_with_keras, "keras")
