"""``keras-bert finetune --task multiple-choice``: SWAG CSV or JSON Lines, a BertMultipleChoice
scoring each (context, choice) pair, scored by accuracy."""

from __future__ import annotations

from keras_bert.tasks.base import CommonOptions, Task, argmax_accuracy, require_vocabulary
from keras_bert.tasks.multiple_choice.reader import read_multiple_choice


class MultipleChoiceTask(Task):
    name = "multiple-choice"
    primary_metric = "accuracy"
    help = "pick the right continuation among N (SWAG CSV, JSONL)"

    def read_examples(self, path: str, options: CommonOptions, with_labels: bool = True) -> list:
        return read_multiple_choice(path, with_labels=with_labels)

    def build_model(self, init_checkpoint: str, labels, train_examples, options: CommonOptions,
                    lower_case: bool | None = None):
        from keras_bert.tasks.multiple_choice.model import BertMultipleChoice
        return require_vocabulary(BertMultipleChoice.from_pretrained(
            init_checkpoint, len(train_examples[0].choices), options.seq_length,
            lower_case=lower_case), init_checkpoint)

    def evaluate(self, model, examples, options: CommonOptions, batch_size: int):
        y = model.to_arrays(examples)[1]
        outputs = model.predict(examples, batch_size=batch_size, verbose=0)
        return {"accuracy": argmax_accuracy(y, outputs)}, {}


TASKS = [MultipleChoiceTask()]
