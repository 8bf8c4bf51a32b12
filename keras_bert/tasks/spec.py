"""What a fine-tuning task is: the ``TaskSpec`` interface that ``keras-bert finetune`` runs (its
options and flags, read the files, name the labels, build the model on a pretrained encoder, score
the dev set) and ``CommonOptions``, the settings every task has. Each task implements it in its
own folder (``tasks/<name>/task.py``), or in another package (see ``keras_bert.tasks``)."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from keras_bert.errors import DataError
from keras_bert.fileio import atomic_write
from keras_bert.tasks.input_examples import label_names_of


@dataclasses.dataclass
class CommonOptions:
    """The settings every task has (``keras-bert finetune``'s ``--labels`` and
    ``--max_seq_length``). A task with more settings extends it with its own dataclass, one
    field per flag it adds (see ``Task.options_class``).

    Args:
        labels: label names in output order (None: the task's own, such as the training file's,
            sorted); tasks without labels ignore them.
        seq_length: the packed length (None: the task's ``default_seq_length``; a fine-tuning
            run takes the length a sentence-transformers checkpoint states first).
    """
    labels: Sequence[str] | None = None
    seq_length: int | None = None


def option_defaults(options_class: type) -> dict[str, Any]:
    """{field: default} of an options dataclass (a field made by a factory: a fresh value)."""
    return {field.name: field.default if field.default is not dataclasses.MISSING
            else field.default_factory() for field in dataclasses.fields(options_class)}


class TaskSpec:
    """A fine-tuning task. Subclasses set ``name`` and ``primary_metric`` (it picks the best
    epoch) and implement ``read_examples``, ``build_model`` and ``evaluate``. A task with
    settings of its own sets ``options_class`` to a dataclass that extends CommonOptions and
    adds one flag per new field in ``add_arguments``.

    Artifacts returned by ``evaluate`` are written beside the results: a value is written as
    JSON, a callable is called with the path.
    """
    name: str = ""
    primary_metric: str = ""
    default_seq_length: int = 128
    help: str = ""
    options_class: type[CommonOptions] = CommonOptions

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Adds the task's own flags to ``keras-bert finetune``, in an argument group of its
        own: one per field that ``options_class`` adds to CommonOptions, named as the field
        (``--doc_stride`` sets ``doc_stride``) and defaulting to the field's default."""

    def make_options(self, settings: Mapping[str, Any]) -> CommonOptions:
        """The task's options from settings named as their fields (the others keep their
        defaults); ValueError naming any setting the task does not take."""
        fields = list(option_defaults(self.options_class))
        foreign = [name for name in settings if name not in fields]
        if foreign:
            raise ValueError(f"the {self.name} task takes no {', '.join(foreign)} (its options: "
                             f"{', '.join(fields)})")
        return self.options_class(**settings)

    def read_examples(self, path: str, options: CommonOptions, with_labels: bool = True) -> list:
        raise NotImplementedError

    def read_run_files(self, options: CommonOptions, train_file: str, dev_file: str | None
                       ) -> tuple[list, list | None]:
        """A fine-tuning run's training and dev examples; DataError naming a file that holds
        none (a header alone, or nothing), before anything is trained or written."""
        train = self.read_examples(train_file, options)
        dev = self.read_examples(dev_file, options) if dev_file else None
        for path, examples in ((train_file, train), (dev_file, dev)):
            if examples is not None and not examples:
                raise DataError(f"holds no examples (a header alone, or nothing); the "
                                f"{self.name} task needs at least one", path)
        return train, dev

    def resolve_options(self, options: CommonOptions, example_lists: Sequence[Sequence]
                        ) -> CommonOptions:
        """The options with the task's defaults filled in, once the data is read."""
        if options.seq_length is None:
            options = dataclasses.replace(options, seq_length=self.default_seq_length)
        return options

    def label_names(self, train_examples: Sequence, options: CommonOptions) -> list[str] | None:
        """The label vocabulary, or None when the task has none."""
        return None

    def check_labels(self, examples: Sequence, label_names: list[str] | None) -> None:
        """DataError naming the file and line of the first example whose label is not among
        ``label_names`` (what ``label_names`` returned), before any model is built; the task's
        model refuses it later otherwise. Tasks without label names check nothing."""

    def build_model(self, checkpoint, labels, train_examples, options: CommonOptions,
                    lower_case: bool | None = None):
        """The task model (a ``keras_bert.models.task.BertTask``) on the encoder of
        ``checkpoint`` (a ``checkpoints.reading.Checkpoint``, read once by the run), with a
        preprocessor from its vocab (``lower_case`` overrides the checkpoint's casing)."""
        raise NotImplementedError

    def evaluate(self, model, examples, options: CommonOptions, batch_size: int
                 ) -> tuple[dict[str, float], dict[str, Any]]:
        """(metrics, artifacts) on labelled dev examples; the artifacts hold the per-example
        predictions (``DEV_PREDICTIONS`` or the task's own files)."""
        raise NotImplementedError

    def takes(self, model) -> bool:
        """Whether ``model`` (a task model, e.g. one ``from_pretrained`` loaded) is this task's,
        so that `keras-bert evaluate` and `predict` score and run it with this task's files:
        the task the model declares (``BertTask.finetune_task``) is this one."""
        return getattr(model, "finetune_task", None) == self.name

    def options_for(self, model, options: CommonOptions) -> CommonOptions:
        """``options`` with what ``model`` fixes (its labels, packed length...), for scoring and
        running a trained model on this task's files."""
        return dataclasses.replace(options, labels=getattr(model, "label_names", None),
                                   seq_length=packed_length(model))

    def examples_of_texts(self, texts: Sequence[str]) -> list:
        """Examples of raw texts given on the command line (`keras-bert predict TEXT...`);
        ValueError for a task whose examples are more than a text."""
        raise ValueError(f"the {self.name} task reads its examples from a file: give "
                         f"--input_file")

    def predict(self, model, examples, options: CommonOptions, batch_size: int) -> list[dict]:
        """One JSON-ready record per example: what the example holds, the model's prediction,
        and the true answer where the example has one."""
        raise NotImplementedError

    def result_fields(self, options: CommonOptions) -> dict[str, Any]:
        """Extra fields of the run's eval_results.json."""
        return {}


def packed_length(model) -> int | None:
    """The length ``model``'s preprocessor packs raw text to (None: it takes packed ids)."""
    return None if model.preprocessor is None else model.preprocessor.seq_length


DEV_PREDICTIONS = "dev_predictions.jsonl"  # a fine-tuning run's dev predictions, one per line


def write_records(path: str, records: Sequence[dict]) -> None:
    """Writes one record per line, atomically: JSON Lines, or CSV when ``path`` ends in
    ``.csv`` (a dict value becomes one column per key, named ``<field>_<key>``, e.g.
    ``probabilities_great``; a list value is written as JSON).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "predictions.csv")
    >>> write_records(path, [{"text": "Fine.", "label": "great",
    ...                       "probabilities": {"great": 0.9, "other": 0.1}}])
    >>> open(path).read().splitlines()
    ['text,label,probabilities_great,probabilities_other', 'Fine.,great,0.9,0.1']
    """
    with atomic_write(path) as f:
        if not str(path).lower().endswith(".csv"):
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
            return
        rows = []
        for record in records:
            row = {}
            for field, value in record.items():
                if isinstance(value, dict):
                    row.update({f"{field}_{key}": item for key, item in value.items()})
                else:
                    row[field] = json.dumps(value, ensure_ascii=False) \
                        if isinstance(value, list) else value
            rows.append(row)
        columns = list(dict.fromkeys(column for row in rows for column in row))
        writer = csv.DictWriter(f, columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


class RecordsFile:
    """An ``evaluate`` artifact: the per-example records, written by ``write_records`` when
    called with a path (a fine-tuning run's ``DEV_PREDICTIONS``), kept as ``records``."""

    def __init__(self, records: Sequence[dict]):
        self.records = list(records)

    def __call__(self, path: str) -> None:
        write_records(path, self.records)


def require_vocabulary(model, checkpoint):
    """The model, or FileNotFoundError when it has no preprocessor to read raw text with."""
    if model.preprocessor is None:
        raise FileNotFoundError(f"no vocab.txt beside {checkpoint.path!r}; fine-tuning on raw "
                                f"text needs the checkpoint's vocabulary")
    return model


def collected_label_names(train_examples: Sequence, options: CommonOptions,
                          attribute: str = "label") -> list[str]:
    """The given labels, or those of the training file, sorted."""
    if options.labels:
        return list(options.labels)
    names = label_names_of(train_examples, attribute)
    if attribute == "label" and len(names) < 2:
        raise DataError(f"the training file has {len(names)} distinct label(s) ({names}); "
                        f"classification needs at least two (use --task regression for scores)",
                        getattr(train_examples[0], "path", None))
    return names


def argmax_accuracy(labels: np.ndarray, outputs: np.ndarray) -> float:
    return float(np.mean(np.argmax(outputs, axis=-1) == labels))
