"""Readers for GLUE-style TSV/CSV files: the CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE and WNLI
layouts as the GLUE download ships them, plus a generic layout (a header with text, text_pair and
label, or the columns the caller names) for any other task.

Columns are found by header name where the file has a header, so train, dev and test files (which
drop the label column) read alike. TSV files are read without quoting, as google-research/bert's
``run_classifier.py`` reads them; ``.csv`` files use standard CSV quoting.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Sequence

from keras_bert.errors import DataError
from keras_bert.fileio import read_text_lines
from keras_bert.tasks.input_examples import TextExample, check_distinct_columns, require_text


@dataclasses.dataclass(frozen=True)
class GlueLayout:
    """Where a GLUE file keeps its fields.

    Args:
        text: the column of the first segment (a header name, or an index for headerless files).
        text_pair: the second segment's column, or None for single-sentence tasks.
        label: the label column.
        label_names: the class names in label-index order; None for regression (STS-B).
        header: whether train/dev files start with a header row.
    """
    text: str | int
    text_pair: str | int | None
    label: str | int
    label_names: tuple[str, ...] | None
    header: bool = True


BINARY = ("0", "1")
ENTAILMENT = ("entailment", "not_entailment")

GLUE_LAYOUTS = {
    "cola": GlueLayout(3, None, 1, BINARY, header=False),
    "sst-2": GlueLayout("sentence", None, "label", BINARY),
    "mrpc": GlueLayout("#1 String", "#2 String", "Quality", BINARY),
    "sts-b": GlueLayout("sentence1", "sentence2", "score", None),
    "qqp": GlueLayout("question1", "question2", "is_duplicate", BINARY),
    "mnli": GlueLayout("sentence1", "sentence2", "gold_label",
                       ("contradiction", "entailment", "neutral")),
    "qnli": GlueLayout("question", "sentence", "label", ENTAILMENT),
    "rte": GlueLayout("sentence1", "sentence2", "label", ENTAILMENT),
    "wnli": GlueLayout("sentence1", "sentence2", "label", BINARY),
    "generic": GlueLayout("text", "text_pair", "label", None),
}
_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "sts": "sts-b", "mnli-mm": "mnli", "csv": "generic",
            "tsv": "generic"}


def glue_layout(task: str) -> GlueLayout:
    """The layout of a GLUE task name (case-insensitive; ``sst2``/``stsb`` also work)."""
    key = _ALIASES.get(task.lower(), task.lower())
    if key not in GLUE_LAYOUTS:
        raise ValueError(f"unknown GLUE task {task!r}; expected one of "
                         f"{', '.join(sorted(GLUE_LAYOUTS))}")
    return GLUE_LAYOUTS[key]


DIALECTS = ("csv", "tsv")


def _dialect(path: str, dialect: str | None) -> str:
    """"csv" or "tsv": ``dialect`` as given, else by the file's extension (``.csv``: CSV)."""
    if dialect is None:
        return "csv" if path.lower().endswith(".csv") else "tsv"
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; expected 'csv' or 'tsv'")
    return dialect


def _rows(path: str, dialect: str):
    """(first line number, fields) for each record of a TSV (no quoting) or CSV file."""
    lines = [line + "\n" for line in read_text_lines(path)]  # csv keeps newlines in quotes
    if dialect == "csv":
        reader = csv.reader(lines)
    else:
        reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    start = 1
    for fields in reader:
        yield start, fields
        start = reader.line_num + 1


def _column(header: list[str] | None, column: str | int | None, path: str, what: str,
            required: bool) -> int | None:
    """The index of ``column``; DataError when a required named column is not in the header."""
    if column is None or isinstance(column, int):
        return column
    if header is None:
        raise DataError(f"the file has no header, so the {what} column {column!r} cannot be "
                        f"found by name", path)
    if column in header:
        return header.index(column)
    if required:
        raise DataError(f"missing {what} column {column!r}; the header has "
                        f"{', '.join(map(repr, header))}", path, 1)
    return None


def read_glue(path: str, task: str = "generic", with_labels: bool = True,
              feature_columns: Sequence[str] = (), text_column: str | None = None,
              text_pair_column: str | None = None, label_column: str | None = None,
              dialect: str | None = None, keep_columns: Sequence[str] = ()
              ) -> list[TextExample]:
    """Reads a GLUE-style TSV/CSV file into TextExamples.

    Args:
        path: the file (local or gs://).
        task: a GLUE task name (``cola``, ``sst-2``, ``mrpc``, ``sts-b``, ``qqp``, ``mnli``,
            ``qnli``, ``rte``, ``wnli``) or ``generic`` (a header naming ``text``, optionally
            ``text_pair``, and ``label``, or the columns below).
        with_labels: whether the label column is required. False reads test files, whose
            labels are absent (examples get ``label=None``).
        feature_columns: more columns to read, by header name, into each example's
            ``features`` as strings ("" when the field is empty: a missing value), for a
            classifier with numeric or categorical features.
        text_column, text_pair_column, label_column: header names that replace the layout's
            (None: the layout's; ``generic``: text, text_pair, label). A text_pair column named
            here must be in the header; the generic layout's ``text_pair`` may be absent.
        dialect: "csv" (commas, standard CSV quoting: fields may hold commas, quotes and
            newlines) or "tsv" (tabs, no quoting: GLUE's files contain stray quote
            characters); None: "csv" for ``.csv`` files, else "tsv".
        keep_columns: more columns to read, by header name, into each example's ``kept`` as
            they are (strings), to be copied into its prediction record (an id, say).

    Returns:
        One TextExample per row; labels are class names (str), floats for STS-B. ``generic``
        labels stay strings (``float(label)`` them for regression).

    Raises:
        DataError: a missing text, text_pair, label, feature or kept column (the message
            lists the header's), a row with too few fields, an empty text, an unknown label or
            a non-numeric STS-B score; the message names the file and line.
        ValueError: two of the columns (text, text_pair, label, features) are the same.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.tsv")
    >>> _ = open(path, "w").write("sentence\\tlabel\\nit is great .\\t1\\n")
    >>> read_glue(path, "sst-2")[0].label
    '1'
    >>> path = os.path.join(tempfile.mkdtemp(), "reviews.csv")
    >>> _ = open(path, "w").write('product,review,score\\nB001,"Crisp, fresh.",5\\n')
    >>> example = read_glue(path, text_column="review", label_column="score")[0]
    >>> example.text, example.label
    ('Crisp, fresh.', '5')
    """
    layout = glue_layout(task)
    generic = layout is GLUE_LAYOUTS["generic"]
    text_column = layout.text if text_column is None else text_column
    pair_required = not generic or text_pair_column is not None
    text_pair_column = layout.text_pair if text_pair_column is None else text_pair_column
    label_column = layout.label if label_column is None else label_column
    check_distinct_columns({"text_column": text_column, "text_pair_column": text_pair_column,
                            "label_column": label_column,
                            **{f"feature column {name!r}": name for name in feature_columns}})
    dialect = _dialect(path, dialect)
    rows = iter(_rows(path, dialect))
    header = None
    first = next(rows, None)
    if first is None:
        raise DataError("the file is empty", path)
    headerless_test = (not layout.header and first[1][:2] == ["index", "sentence"])
    if layout.header or headerless_test:
        header = first[1]
        pending = []
    else:
        pending = [first]
    if headerless_test:
        text_index, pair_index, label_index = header.index("sentence"), None, None
        with_labels = False
    else:
        text_index = _column(header, text_column, path, "text", True)
        pair_index = _column(header, text_pair_column, path, "text_pair", pair_required)
        label_index = _column(header, label_column, path, "label", with_labels)
    feature_indexes = {name: _column(header, name, path, "feature", True)
                       for name in feature_columns}
    kept_indexes = {name: _column(header, name, path, "kept", True) for name in keep_columns}
    examples = []
    for line, fields in [*pending, *rows]:
        if not fields or fields == [""]:
            continue
        needed = max(i for i in (text_index, pair_index, label_index if with_labels else None,
                                 *feature_indexes.values(), *kept_indexes.values())
                     if i is not None)
        if len(fields) <= needed:
            raise DataError(f"expected at least {needed + 1} fields, found {len(fields)}; "
                            f"check the separator ({'comma' if dialect == 'csv' else 'tab'})"
                            f" and the {task} layout", path, line)
        text = require_text(fields[text_index], _field_name(text_column, "text"), path, line)
        pair = None if pair_index is None else require_text(
            fields[pair_index], _field_name(text_pair_column, "text_pair"), path, line)
        label = None
        if with_labels and label_index is not None:
            label = _parse_label(fields[label_index].strip(), layout, path, line)
        features = ({name: fields[index].strip() for name, index in feature_indexes.items()}
                    if feature_columns else None)
        kept = ({name: fields[index] for name, index in kept_indexes.items()}
                if keep_columns else None)
        examples.append(TextExample(text, pair, label, path, line, features, kept))
    return examples


def _field_name(column: str | int, role: str) -> str:
    """How errors name a field: its header name, or its role in a headerless layout."""
    return column if isinstance(column, str) else role


def _parse_label(value: str, layout: GlueLayout, path: str, line: int):
    if layout is GLUE_LAYOUTS["sts-b"]:
        try:
            return float(value)
        except ValueError:
            raise DataError(f"the score {value!r} is not a number; STS-B scores are floats in "
                            f"[0, 5]", path, line) from None
    if not value:
        raise DataError("the label is empty; every training or evaluation row needs one",
                        path, line)
    if layout.label_names is not None and value not in layout.label_names:
        raise DataError(f"unknown label {value!r}; this layout's labels are "
                        f"{', '.join(map(repr, layout.label_names))}", path, line)
    return value
