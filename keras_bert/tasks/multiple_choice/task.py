"""``keras-bert finetune --task multiple-choice``: SWAG CSV or JSON Lines, a BertMultipleChoice
scoring each (context, choice) pair, scored by accuracy."""

from __future__ import annotations

import numpy as np

from keras_bert.tasks.spec import (DEV_PREDICTIONS, CommonOptions, TaskSpec, argmax_accuracy,
                                   RecordsFile, require_vocabulary)
from keras_bert.tasks.multiple_choice.reader import read_multiple_choice


class MultipleChoiceSpec(TaskSpec):
    name = "multiple-choice"
    primary_metric = "accuracy"
    help = "pick the right continuation among N (SWAG CSV, JSONL)"

    def read_examples(self, path: str, options: CommonOptions, with_labels: bool = True) -> list:
        return read_multiple_choice(path, with_labels=with_labels)

    def build_model(self, checkpoint, labels, train_examples, options: CommonOptions,
                    lower_case: bool | None = None):
        from keras_bert.tasks.multiple_choice.model import BertMultipleChoice
        return require_vocabulary(BertMultipleChoice.from_checkpoint(
            checkpoint, len(train_examples[0].choices), options.seq_length,
            lower_case=lower_case), checkpoint)

    def evaluate(self, model, examples, options: CommonOptions, batch_size: int):
        y = model.to_arrays(examples)[1]
        outputs = model.predict(examples, batch_size=batch_size, verbose=0)
        records = _records(examples, outputs)
        # the baseline: always the most frequent right choice
        majority = float(np.bincount(y).max() / len(y)) if len(y) else 0.0
        return ({"accuracy": argmax_accuracy(y, outputs), "majority_rate": majority},
                {DEV_PREDICTIONS: RecordsFile(records)})

    def predict(self, model, examples, options: CommonOptions, batch_size: int) -> list[dict]:
        """Per example: its context and choices, the predicted ``choice`` (an index) and the
        ``probabilities`` of each, and ``true_choice`` where it has one."""
        return _records(examples, model.predict(examples, batch_size=batch_size, verbose=0))


def _records(examples, outputs: np.ndarray) -> list[dict]:
    records = []
    for example, row in zip(examples, outputs):
        record = {"context": example.context, "choices": example.choices,
                  "choice": int(np.argmax(row)),
                  "probabilities": [round(float(p), 6) for p in row]}
        if example.label is not None:
            record["true_choice"] = int(example.label)
        records.append(record)
    return records


TASKS = [MultipleChoiceSpec()]
