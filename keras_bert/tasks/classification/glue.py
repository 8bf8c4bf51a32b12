"""Readers for GLUE-style TSV/CSV files: the CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE and WNLI
layouts as the GLUE download ships them, plus a generic layout (a header with text, text_pair and
label) for any other task.

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
from keras_bert.tasks.examples import TextExample, require_text


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


def _rows(path: str):
    """(first line number, fields) for each record of a TSV (no quoting) or CSV file."""
    lines = [line + "\n" for line in read_text_lines(path)]  # csv keeps newlines in quotes
    if path.lower().endswith(".csv"):
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
    if column in header:
        return header.index(column)
    if required:
        raise DataError(f"missing {what} column {column!r}; the header has "
                        f"{', '.join(map(repr, header))}", path, 1)
    return None


def read_glue(path: str, task: str = "generic", with_labels: bool = True,
              feature_columns: Sequence[str] = ()) -> list[TextExample]:
    """Reads a GLUE-style TSV/CSV file into TextExamples.

    Args:
        path: the file (local or gs://). ``.csv`` files use CSV quoting; anything else is
            read as TSV without quoting (GLUE's files contain stray quote characters).
        task: a GLUE task name (``cola``, ``sst-2``, ``mrpc``, ``sts-b``, ``qqp``, ``mnli``,
            ``qnli``, ``rte``, ``wnli``) or ``generic`` (a header naming ``text``, optionally
            ``text_pair``, and ``label``).
        with_labels: whether the label column is required. False reads test files, whose
            labels are absent (examples get ``label=None``).
        feature_columns: more columns to read, by header name, into each example's
            ``features`` as strings ("" when the field is empty: a missing value), for a
            classifier with numeric or categorical features.

    Returns:
        One TextExample per row; labels are class names (str), floats for STS-B. ``generic``
        labels stay strings (``float(label)`` them for regression).

    Raises:
        DataError: a missing label or feature column, a row with too few fields, an empty text,
            an unknown label or a non-numeric STS-B score; the message names the file and line.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.tsv")
    >>> _ = open(path, "w").write("sentence\\tlabel\\nit is great .\\t1\\n")
    >>> read_glue(path, "sst-2")[0].label
    '1'
    """
    layout = glue_layout(task)
    rows = iter(_rows(path))
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
        text_index = _column(header, layout.text, path, "text", True)
        pair_index = _column(header, layout.text_pair, path, "text_pair",
                             required=layout is not GLUE_LAYOUTS["generic"])
        label_index = _column(header, layout.label, path, "label", with_labels)
    if feature_columns and header is None:
        raise DataError(f"the {task} layout has no header, so feature columns "
                        f"({', '.join(feature_columns)}) cannot be found by name", path)
    feature_indexes = {name: _column(header, name, path, "feature", True)
                       for name in feature_columns}
    examples = []
    for line, fields in [*pending, *rows]:
        if not fields or fields == [""]:
            continue
        needed = max(i for i in (text_index, pair_index, label_index if with_labels else None,
                                 *feature_indexes.values()) if i is not None)
        if len(fields) <= needed:
            raise DataError(f"expected at least {needed + 1} fields, found {len(fields)}; "
                            f"check the separator ({'comma' if path.endswith('.csv') else 'tab'})"
                            f" and the {task} layout", path, line)
        text = require_text(fields[text_index], "text", path, line)
        pair = None if pair_index is None else require_text(fields[pair_index], "text_pair",
                                                            path, line)
        label = None
        if with_labels and label_index is not None:
            label = _parse_label(fields[label_index].strip(), layout, path, line)
        features = ({name: fields[index].strip() for name, index in feature_indexes.items()}
                    if feature_columns else None)
        examples.append(TextExample(text, pair, label, path, line, features))
    return examples


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
