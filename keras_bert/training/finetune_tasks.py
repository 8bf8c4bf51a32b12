"""The five fine-tuning tasks of ``keras-bert finetune``: how each reads its files, which labels it
has, which model it builds, and how it is scored on the dev set (its primary metric picks the best
epoch)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from keras_bert.data import conll, glue, jsonl, multiple_choice, squad
from keras_bert.data.squad_answers import nbest_to_json
from keras_bert.data.task_examples import DataError, label_names_of
from keras_bert.training import finetune_metrics as metrics

TASKS = ("classification", "regression", "ner", "squad", "multiple-choice")
PRIMARY_METRIC = {"classification": "accuracy", "regression": "pearson", "ner": "f1",
                  "squad": "f1", "multiple-choice": "accuracy"}
DEFAULT_SEQ_LENGTH = {"squad": 384}


@dataclasses.dataclass
class TaskOptions:
    """Task settings beyond the common ones (see FinetuneConfig)."""
    data_format: str = "auto"
    labels: Sequence[str] | None = None
    seq_length: int | None = None  # None: 384 for SQuAD, else 128
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


def read_examples(task: str, path: str, options: TaskOptions, with_labels: bool = True) -> list:
    """The examples of a train or dev file for ``task``."""
    if task in ("classification", "regression"):
        if path.lower().endswith((".jsonl", ".json")) or options.data_format == "jsonl":
            return jsonl.read_jsonl(path, with_labels=with_labels,
                                    feature_keys=options.feature_columns)
        layout = "generic" if options.data_format in ("auto", "csv", "tsv") else options.data_format
        return glue.read_glue(path, layout, with_labels=with_labels,
                              feature_columns=options.feature_columns)
    if options.feature_columns:
        raise ValueError(f"numeric and categorical features are for the classification and "
                         f"regression tasks, not {task}")
    if task == "ner":
        return conll.read_conll(path, with_labels=with_labels)
    if task == "squad":
        return squad.read_squad(path, with_answers=with_labels)
    if task == "multiple-choice":
        return multiple_choice.read_multiple_choice(path, with_labels=with_labels)
    raise ValueError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")


def label_names(task: str, train_examples: Sequence, options: TaskOptions) -> list[str] | None:
    """The label vocabulary: given, the GLUE layout's, or collected from the training file."""
    if task in ("regression", "squad", "multiple-choice"):
        return None
    if options.labels:
        return list(options.labels)
    if task == "classification" and options.data_format not in ("auto", "jsonl", "csv", "tsv"):
        names = glue.glue_layout(options.data_format).label_names
        if names:
            return list(names)
    if task == "ner":
        tags = label_names_of(train_examples, "tags")
        return ["O"] + [t for t in tags if t != "O"]
    names = label_names_of(train_examples)
    if len(names) < 2:
        raise DataError(f"the training file has {len(names)} distinct label(s) ({names}); "
                        f"classification needs at least two (use --task regression for scores)",
                        getattr(train_examples[0], "path", None))
    return names


def build_model(task: str, init_checkpoint: str, labels, train_examples, options: TaskOptions,
                lower_case: bool | None = None):
    """The task model on ``init_checkpoint``'s encoder, with a preprocessor from its vocab
    (``lower_case`` overrides the checkpoint's casing)."""
    from keras_bert.models import (BertClassifier, BertMultipleChoice, BertQuestionAnswerer,
                                   BertTokenClassifier)
    length = options.seq_length
    if task in ("classification", "regression"):
        num_classes = 1 if task == "regression" else len(labels)
        model = BertClassifier.from_pretrained(
            init_checkpoint, num_classes, length, label_names=labels, lower_case=lower_case,
            numeric_features=list(options.numeric_features) or None,
            categorical_features=list(options.categorical_features) or None)
        if model.num_classes != num_classes:
            raise ValueError(f"{init_checkpoint!r} holds a classifier with {model.num_classes} "
                             f"classes, but the task has {num_classes}")
        if model.feature_names != options.feature_columns:
            raise ValueError(f"{init_checkpoint!r} holds a classifier with the features "
                             f"{model.feature_names}, but the task has {options.feature_columns}")
        model.adapt_features(train_examples)  # statistics and vocabularies from the train set
    elif task == "ner":
        model = BertTokenClassifier.from_pretrained(init_checkpoint, labels, length,
                                                    lower_case=lower_case)
    elif task == "squad":
        model = BertQuestionAnswerer.from_pretrained(
            init_checkpoint, length, doc_stride=options.doc_stride,
            max_query_length=options.max_query_length, lower_case=lower_case)
    else:
        model = BertMultipleChoice.from_pretrained(
            init_checkpoint, len(train_examples[0].choices), length, lower_case=lower_case)
    if model.preprocessor is None:
        raise FileNotFoundError(f"no vocab.txt beside {init_checkpoint!r}; fine-tuning on raw "
                                f"text needs the checkpoint's vocabulary")
    return model


def num_train_rows(task: str, model, examples) -> int:
    """Rows the training set yields (SQuAD and NER: windows, others: examples)."""
    if task == "squad":
        return len(model.make_features(examples))
    if task == "ner":
        return len(model.align(examples))
    return len(examples)


def is_squad_v2(examples_lists: Sequence[Sequence], options: TaskOptions) -> bool:
    if options.version_2_with_negative is not None:
        return options.version_2_with_negative
    return any(e.is_impossible for examples in examples_lists for e in examples)


def evaluate(task: str, model, examples, options: TaskOptions, squad_v2: bool = False,
             batch_size: int = 32):
    """(metrics, artifacts) on labelled dev examples; artifacts are the predictions to write."""
    if task == "squad":
        answers, nbest, null_diffs = model.predict_answers(
            examples, options.n_best_size, options.max_answer_length, squad_v2,
            options.null_score_diff_threshold, batch_size)
        gold = {e.qas_id: [a.text for a in e.answers] for e in examples}
        artifacts = {"predictions.json": answers, "nbest_predictions.json": nbest_to_json(nbest)}
        if squad_v2:
            artifacts["null_odds.json"] = null_diffs
        return metrics.squad_scores(gold, answers, squad_v2), artifacts
    if task == "ner":
        predicted = model.predict_tags(examples, batch_size=batch_size)
        return (metrics.entity_scores([e.tags for e in examples], predicted),
                {"dev_predictions.conll": (examples, predicted)})
    y = model._to_arrays(examples)[1]
    outputs = model.predict(examples, batch_size=batch_size, verbose=0)
    if task == "regression":
        return metrics.regression_scores(y.reshape(-1), outputs.reshape(-1)), {}
    predictions = np.argmax(outputs, axis=-1)
    if task == "multiple-choice":
        return {"accuracy": float(np.mean(predictions == y))}, {}
    return metrics.classification_scores(y, predictions), {}
