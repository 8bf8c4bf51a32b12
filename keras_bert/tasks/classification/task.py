"""``keras-bert finetune --task classification`` and ``--task regression``: GLUE-style TSV/CSV or
JSON Lines files, a BertClassifier on the pooled [CLS] vector (optionally with numeric and
categorical features), scored with the GLUE metrics."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from keras_bert.config import CLASSIFIER_POOLINGS, WINDOW_COMBINATIONS, check_window_stride
from keras_bert.errors import DataError
from keras_bert.tasks.spec import (DEV_PREDICTIONS, CommonOptions, TaskSpec, collected_label_names,
                                   packed_length, RecordsFile, require_vocabulary)
from keras_bert.tasks.classification import glue, jsonl
from keras_bert.tasks.classification.metrics import classification_scores, regression_scores
from keras_bert.tasks.input_examples import TextExample


def _name_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


@dataclasses.dataclass
class ClassificationOptions(CommonOptions):
    """The classification and regression settings (``--data_format``, ``--text_column``,
    ``--text_pair_column``, ``--label_column``, ``--numeric_features``,
    ``--categorical_features``, ``--keep_columns``).

    Args:
        data_format: a GLUE layout (cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, wnli),
            "csv" (commas, quoted fields), "tsv" (tabs, no quoting), "jsonl", or "auto" (JSONL
            by extension, else CSV for ``.csv`` files and TSV for others).
        text_column, text_pair_column, label_column: the header names (JSONL keys) of the
            text, the second text and the label, in the training and dev files alike (None:
            text, text_pair, label, or a GLUE layout's). A text_pair column named here must be
            there; the default one may be absent (single texts).
        numeric_features, categorical_features: columns (JSONL keys) read beside the text.
        pooling: the classifier's text vector, one of ``CLASSIFIER_POOLINGS`` (None: a saved
            classifier's own, else "pooled").
        keep_columns: columns (JSONL keys) copied as they are into each example's prediction
            record, before the prediction (an id, say); none may share a name with a record's
            own fields (``RECORD_FIELDS``).
        window_stride, window_combination: how a text longer than seq_length is read
            (``BertClassifier``'s arguments; None: a saved classifier's own, else the
            defaults: half the window, "mean").
    """
    data_format: str = "auto"
    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    numeric_features: Sequence[str] = ()
    categorical_features: Sequence[str] = ()
    pooling: str | None = None
    keep_columns: Sequence[str] = ()
    window_stride: int | None = None
    window_combination: str | None = None

    def __post_init__(self):
        check_window_stride(self.window_stride,
                            None if self.seq_length is None else self.seq_length - 2)

    @property
    def feature_columns(self) -> list[str]:
        return [*self.numeric_features, *self.categorical_features]


class ClassificationSpec(TaskSpec):
    name = "classification"
    primary_metric = "accuracy"
    help = "one label per text or text pair (GLUE layouts, TSV/CSV with a header, JSONL)"
    options_class = ClassificationOptions
    regression = False

    # The flags that say how to read a file, which evaluate and predict take too.
    COLUMN_FLAGS = ("data_format", "text_column", "text_pair_column", "label_column")
    # The flags that say how to read a long text, which evaluate, predict and export take too.
    WINDOW_FLAGS = ("window_stride", "window_combination")
    # The fields of a prediction record (``_records``), which no kept column may be named as.
    RECORD_FIELDS = ("text", "text_pair", "label", "probabilities", "true_label", "score",
                     "true_score")

    def add_arguments(self, parser) -> None:
        group = self.add_column_arguments(parser)
        group.add_argument("--numeric_features", type=_name_list,
                           default=ClassificationOptions.numeric_features,
                           help="comma-separated numeric columns (JSONL keys) joined with the "
                                "text, normalised with the training set's mean and variance; an "
                                "empty field is missing")
        group.add_argument("--categorical_features", type=_name_list,
                           default=ClassificationOptions.categorical_features,
                           help="comma-separated categorical columns, embedded with the training "
                                "set's 100 most frequent values; empty is missing, an unseen "
                                "value unknown (each has a learned embedding)")
        group.add_argument("--pooling", choices=CLASSIFIER_POOLINGS,
                           default=ClassificationOptions.pooling,
                           help="the text vector the classifier reads: 'pooled' (BERT's pooler "
                                "on [CLS]), 'cls' (the raw [CLS] vector) or 'mean' (the mean of "
                                "the token vectors); keep the one your dev set prefers "
                                "(measured effects: docs/next-steps.md) (default: a saved "
                                "classifier's own, else pooled)")
        self.add_keep_columns_argument(group, "the training and dev files",
                                       "dev_predictions.jsonl")
        self.add_window_arguments(group)

    def add_window_arguments(self, group) -> None:
        """Adds ``--window_stride`` and ``--window_combination`` (``WINDOW_FLAGS``): how a text
        longer than seq_length is read (``BertClassifier``'s arguments of these names)."""
        group.add_argument("--window_stride", type=int, metavar="PIECES",
                           default=ClassificationOptions.window_stride,
                           help="a text longer than seq_length is read as overlapping windows "
                                "of seq_length - 2 WordPieces, each starting this many after "
                                "the previous one (1 to seq_length - 3; default: a saved "
                                "classifier's own, else half the window)")
        group.add_argument("--window_combination", choices=WINDOW_COMBINATIONS,
                           default=ClassificationOptions.window_combination,
                           help="how a long text's windows make its prediction: 'mean' (the "
                                "activation of the mean of their logits) or 'first' (the first "
                                "window alone: the text cut at seq_length) (default: a saved "
                                "classifier's own, else mean)")

    def add_keep_columns_argument(self, group, files: str, records: str) -> None:
        """Adds ``--keep_columns``: the columns of ``files`` that the command copies into
        each of its prediction records (``records`` names where they go, in the help)."""
        group.add_argument("--keep_columns", type=_name_list,
                           default=ClassificationOptions.keep_columns, metavar="NAMES",
                           help=f"comma-separated columns (JSONL keys) of {files} copied as "
                                f"they are into each record of {records}, before the "
                                f"prediction (e.g. an id)")

    def add_column_arguments(self, parser, files: str = "the training and dev files"):
        """Adds the flags that say how to read a file (``COLUMN_FLAGS``) in a group of their
        own, and returns the group. ``files`` names, in the help, the files the command reads
        with them."""
        group = parser.add_argument_group("classification and regression")
        group.add_argument("--data_format", default=ClassificationOptions.data_format,
                           help="a GLUE layout (cola, sst-2, mrpc, sts-b, qqp, mnli, qnli, rte, "
                                "wnli), 'csv' (commas, quoted fields), 'tsv' (tabs, no "
                                "quoting), 'jsonl', or 'auto' (JSONL by extension, else CSV "
                                "for .csv files and TSV for others; a header row names the "
                                "columns) (default: %(default)s)")
        for field, role, default in (("text_column", "text", "text"),
                                     ("text_pair_column", "second text of a pair",
                                      "text_pair, where present"),
                                     ("label_column", "label (or score)", "label")):
            group.add_argument(f"--{field}", default=getattr(ClassificationOptions, field),
                               metavar="NAME",
                               help=f"the header name (JSONL key) of the {role} in {files} "
                                    f"(default: {default}, or the GLUE layout's)")
        return group

    def examples_of_texts(self, texts) -> list:
        return [TextExample(text) for text in texts]

    def read_examples(self, path: str, options: ClassificationOptions,
                      with_labels: bool = True) -> list:
        taken = [name for name in options.keep_columns if name in self.RECORD_FIELDS]
        if taken:
            raise ValueError(f"--keep_columns {taken[0]}: a prediction record has a field "
                             f"{taken[0]!r} of its own (its fields: "
                             f"{', '.join(self.RECORD_FIELDS)}); keep the other columns")
        if path.lower().endswith((".jsonl", ".json")) or options.data_format == "jsonl":
            return jsonl.read_jsonl(path, with_labels=with_labels, text_key=options.text_column,
                                    text_pair_key=options.text_pair_column,
                                    label_key=options.label_column,
                                    feature_keys=options.feature_columns,
                                    keep_keys=options.keep_columns)
        generic = options.data_format in ("auto", *glue.DIALECTS)
        return glue.read_glue(
            path, "generic" if generic else options.data_format, with_labels=with_labels,
            feature_columns=options.feature_columns, text_column=options.text_column,
            text_pair_column=options.text_pair_column, label_column=options.label_column,
            dialect=options.data_format if options.data_format in glue.DIALECTS else None,
            keep_columns=options.keep_columns)

    def label_names(self, train_examples, options: ClassificationOptions) -> list[str] | None:
        if self.regression:
            return None
        if not options.labels and options.data_format not in ("auto", "jsonl", "csv", "tsv"):
            names = glue.glue_layout(options.data_format).label_names
            if names:
                return list(names)
        return collected_label_names(train_examples, options)

    def check_labels(self, examples, label_names: list[str] | None) -> None:
        if self.regression or label_names is None:
            return
        known = set(label_names)
        for example in examples:
            if example.label is not None and str(example.label) not in known:
                raise DataError(f"label {example.label!r} is not one of the labels the "
                                f"model learns ({', '.join(map(repr, label_names))}); fix it, "
                                f"or pass every label name with --labels", example.path,
                                example.line)

    def build_model(self, checkpoint, labels, train_examples,
                    options: ClassificationOptions, lower_case: bool | None = None):
        from keras_bert.tasks.classification.model import BertClassifier
        num_classes = 1 if self.regression else len(labels)
        init_checkpoint = checkpoint.path
        model = BertClassifier.from_checkpoint(
            checkpoint, num_classes, options.seq_length, label_names=labels,
            lower_case=lower_case, numeric_features=list(options.numeric_features) or None,
            categorical_features=list(options.categorical_features) or None,
            **({} if options.pooling is None else {"pooling": options.pooling}),
            **{name: getattr(options, name) for name in self.WINDOW_FLAGS
               if getattr(options, name) is not None})
        if model.num_classes != num_classes:
            raise ValueError(f"{init_checkpoint!r} holds a classifier with {model.num_classes} "
                             f"classes, but the task has {num_classes}")
        if model.feature_names != options.feature_columns:
            raise ValueError(f"{init_checkpoint!r} holds a classifier with the features "
                             f"{model.feature_names}, but the task has {options.feature_columns}")
        model.adapt(train_examples)  # statistics and vocabularies from the train set
        return require_vocabulary(model, checkpoint)

    def options_for(self, model, options: ClassificationOptions) -> ClassificationOptions:
        features = (model.features.get_config() if model.features is not None
                    else {"numeric_features": {}, "categorical_features": {}})
        model.set_windows(options.window_combination, options.window_stride)  # flags given
        return dataclasses.replace(
            options, labels=model.label_names, seq_length=packed_length(model),
            numeric_features=list(features["numeric_features"]),
            categorical_features=list(features["categorical_features"]), pooling=model.pooling,
            window_stride=model.window_stride, window_combination=model.window_combination)

    def evaluate(self, model, examples, options: ClassificationOptions, batch_size: int):
        y = model.to_arrays(examples)[1]
        outputs = model.predict(examples, batch_size=batch_size, verbose=0)
        if self.regression:
            scores = regression_scores(y.reshape(-1), outputs.reshape(-1))
        else:
            scores = classification_scores(y, np.argmax(outputs, axis=-1), model.label_names)
        records = self._records(model, examples, outputs)
        return scores, {DEV_PREDICTIONS: RecordsFile(records)}

    def predict(self, model, examples, options: ClassificationOptions, batch_size: int
                ) -> list[dict]:
        outputs = model.predict(examples, batch_size=batch_size, verbose=0)
        return self._records(model, examples, outputs)

    def _records(self, model, examples, outputs: np.ndarray) -> list[dict]:
        """Per example: its kept columns, its text (and text_pair), the prediction
        (``label`` and ``probabilities``; regression: ``score``) and, where it has one,
        ``true_label`` (``true_score``)."""
        records = []
        names = model.label_names or [str(i) for i in range(outputs.shape[-1])]
        for example, row in zip(examples, outputs):
            record = {**(example.kept or {}), "text": example.text}
            if example.text_pair is not None:
                record["text_pair"] = example.text_pair
            if self.regression:
                record["score"] = float(row[0])
                if example.label is not None:
                    record["true_score"] = float(example.label)
            else:
                record["label"] = names[int(np.argmax(row))]
                record["probabilities"] = {name: round(float(p), 6)
                                           for name, p in zip(names, row)}
                if example.label is not None:
                    record["true_label"] = str(example.label)
            records.append(record)
        return records


class RegressionSpec(ClassificationSpec):
    name = "regression"
    primary_metric = "pearson"
    help = "one score per text or text pair (STS-B layout, TSV/CSV, JSONL)"
    regression = True

    def add_arguments(self, parser) -> None:
        pass  # the classification task's flags serve both


TASKS = [ClassificationSpec(), RegressionSpec()]
