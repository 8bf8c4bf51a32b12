"""The tasks, one folder each: its reader, features and post-processing, its model, its metric,
its export signatures and its ``keras-bert finetune`` wiring (``task.py``).

The registry is the folders themselves: a folder with a ``task.py`` that lists ``TASKS`` (TaskSpec
objects, see ``spec.py``) is a task of ``keras-bert finetune``. Reading the tasks loads no
TensorFlow (``keras-bert finetune --help`` lists every task's flags): a task folder's
``__init__`` loads its public names on first use (``keras_bert.lazy``) and calls
``export_with_model``, so that its ``export.py``, which registers the model's export signatures,
loads with its ``model.py``; ``task.py`` imports the model where it builds one. The names in a
folder's ``__all__`` are also public names of the package (``keras_bert.BertClassifier``), and
its classes decorated with ``@keras.saving.register_keras_serializable(package="keras_bert")``
load with plain Keras after ``import keras_bert``: ``keras_bert/__init__.py`` reads both from
the source.

``tasks.checkpoint_models`` loads a checkpoint as the model it holds (the task model whose
``checkpoint_tasks`` name its head), as ``keras-bert convert``, ``info`` and ``export`` do.

Another installed package adds its tasks with an entry point in the ``keras_bert.tasks`` group
that names its list of TaskSpec objects; in its pyproject.toml:

    [project.entry-points."keras_bert.tasks"]
    my_tasks = "my_package.task:TASKS"
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import pkgutil

import wrapt

ENTRY_POINT_GROUP = "keras_bert.tasks"


def export_with_model(folder: str) -> None:
    """For a task folder's ``__init__`` (``folder`` is its ``__name__``): its ``export.py``,
    which registers the model's export signatures, loads as soon as its ``model.py`` does,
    whoever imports it (wrapt's post-import hook; at once if it is loaded already)."""
    wrapt.register_post_import_hook(lambda _: importlib.import_module(f"{folder}.export"),
                                    f"{folder}.model")


@functools.cache
def _registry() -> dict:
    tasks = {}
    for folder in pkgutil.iter_modules(__path__):
        folder_path = os.path.join(folder.module_finder.path, folder.name)
        if not folder.ispkg or not any(m.name == "task"
                                       for m in pkgutil.iter_modules([folder_path])):
            continue
        for task in importlib.import_module(f"{__name__}.{folder.name}.task").TASKS:
            if task.name in tasks:
                raise ValueError(f"two tasks are named {task.name!r}")
            tasks[task.name] = task
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        for task in entry_point.load():
            if task.name in tasks:
                raise ValueError(f"two tasks are named {task.name!r}: entry point "
                                 f"{entry_point.name} = {entry_point.value!r} adds another")
            tasks[task.name] = task
    return tasks


def task_names() -> list[str]:
    """The names ``keras-bert finetune --task`` takes."""
    return list(_registry())


def get_task(name: str):
    """The Task named ``name``; ValueError naming the others when there is none."""
    tasks = _registry()
    if name not in tasks:
        raise ValueError(f"unknown task {name!r}; expected one of {', '.join(tasks)}")
    return tasks[name]

