"""What a fine-tuning task is: the ``Task`` interface that ``keras-bert finetune`` runs (read the
files, name the labels, build the model on a pretrained encoder, score the dev set) and the
options the tasks share. Each task implements it in its own folder (``tasks/<name>/task.py``)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from keras_bert.errors import DataError
from keras_bert.tasks.examples import label_names_of


@dataclasses.dataclass
class TaskOptions:
    """Task settings beyond the common ones (see FinetuneConfig)."""
    data_format: str = "auto"
    labels: Sequence[str] | None = None
    seq_length: int | None = None  # None: the task's default_seq_length
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool | None = None
    null_score_diff_threshold: float = 0.0
    numeric_features: Sequence[str] = ()  # classification/regression: columns beside the text
    categorical_features: Sequence[str] = ()

    @property
    def feature_columns(self) -> list[str]:
        return [*self.numeric_features, *self.categorical_features]


class Task:
    """A fine-tuning task. Subclasses set ``name`` and ``primary_metric`` (it picks the best
    epoch) and implement ``read_examples``, ``build_model`` and ``evaluate``.

    Artifacts returned by ``evaluate`` are written beside the results: a value is written as
    JSON, a callable is called with the path.
    """
    name: str = ""
    primary_metric: str = ""
    default_seq_length: int = 128
    help: str = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Adds the task's own flags to ``keras-bert finetune`` (their dest names are
        TaskOptions fields)."""

    def read_examples(self, path: str, options: TaskOptions, with_labels: bool = True) -> list:
        raise NotImplementedError

    def check_options(self, options: TaskOptions) -> None:
        """Raises ValueError for options that do not apply to the task."""
        if options.feature_columns:
            raise ValueError(f"numeric and categorical features are for the classification and "
                             f"regression tasks, not {self.name}")

    def resolve_options(self, options: TaskOptions, example_lists: Sequence[Sequence]
                        ) -> TaskOptions:
        """The options with the task's defaults filled in, once the data is read."""
        if options.seq_length is None:
            options = dataclasses.replace(options, seq_length=self.default_seq_length)
        return options

    def label_names(self, train_examples: Sequence, options: TaskOptions) -> list[str] | None:
        """The label vocabulary, or None when the task has none."""
        return None

    def build_model(self, init_checkpoint: str, labels, train_examples, options: TaskOptions,
                    lower_case: bool | None = None):
        """The task model on ``init_checkpoint``'s encoder, with a preprocessor from its vocab
        (``lower_case`` overrides the checkpoint's casing)."""
        raise NotImplementedError

    def num_train_rows(self, model, examples) -> int:
        """Rows the training set yields (examples; windows for SQuAD and NER)."""
        return len(examples)

    def evaluate(self, model, examples, options: TaskOptions, batch_size: int = 32
                 ) -> tuple[dict[str, float], dict[str, Any]]:
        """(metrics, artifacts) on labelled dev examples."""
        raise NotImplementedError

    def result_fields(self, options: TaskOptions) -> dict[str, Any]:
        """Extra fields of the run's eval_results.json."""
        return {}


def require_vocabulary(model, init_checkpoint: str):
    """The model, or FileNotFoundError when it has no preprocessor to read raw text with."""
    if model.preprocessor is None:
        raise FileNotFoundError(f"no vocab.txt beside {init_checkpoint!r}; fine-tuning on raw "
                                f"text needs the checkpoint's vocabulary")
    return model


def collected_label_names(train_examples: Sequence, options: TaskOptions,
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
