"""Reader for JSON Lines task files: one object per line with ``text``, an optional
``text_pair`` and a ``label`` (or the keys the caller names), for classification or regression
tasks that have no GLUE layout."""

from __future__ import annotations

import json
from collections.abc import Sequence

from keras_bert.errors import DataError
from keras_bert.fileio import read_text_lines
from keras_bert.tasks.input_examples import TextExample, check_distinct_columns, require_text


def read_jsonl(path: str, with_labels: bool = True, text_key: str | None = None,
               text_pair_key: str | None = None, label_key: str | None = None,
               feature_keys: Sequence[str] = (), keep_keys: Sequence[str] = ()
               ) -> list[TextExample]:
    """Reads ``{"text": ..., "text_pair": ..., "label": ...}`` lines into TextExamples.

    Blank lines are skipped. Labels keep their JSON type: strings or ints name classes (the
    fine-tuning code compares them as strings), floats are regression targets.

    Args:
        path: the file (local or gs://).
        with_labels: whether every line must have a label.
        text_key, label_key: the fields of the text and the label (None: ``text``,
            ``label``).
        text_pair_key: the field of the second text, on the lines that have a pair; named
            here, some line must have it. None: ``text_pair``, which no line needs to have.
        feature_keys: more fields to read into each example's ``features`` as their JSON
            values, for a classifier with numeric or categorical features; a line without one
            (or with null) has a missing value there, but each must appear on some line.

    Raises:
        DataError: invalid JSON, a line that is not an object, a missing or empty text, a
            missing label, or a named text pair, feature or kept key that no line has; the
            message names the file and line.
        ValueError: two of the keys (text, text pair, label, features) are the same.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
    >>> _ = open(path, "w").write('{"text": "fine", "label": "pos"}\\n')
    >>> example = read_jsonl(path)[0]
    >>> example.text, example.label, example.line
    ('fine', 'pos', 1)
    """
    text_key = "text" if text_key is None else text_key
    label_key = "label" if label_key is None else label_key
    pair_required = text_pair_key is not None
    text_pair_key = "text_pair" if text_pair_key is None else text_pair_key
    check_distinct_columns({"text_key": text_key, "text_pair_key": text_pair_key,
                            "label_key": label_key,
                            **{f"feature key {name!r}": name for name in feature_keys}})
    examples = []
    seen_keys = {}  # every line's keys, in order of appearance, for the kept keys' check
    for line_number, line in enumerate(read_text_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"invalid JSON ({e.msg} at column {e.colno}); each line must be "
                            f"one JSON object", path, line_number) from None
        if not isinstance(record, dict):
            raise DataError(f"expected a JSON object with {text_key!r} and {label_key!r}, got "
                            f"{type(record).__name__}", path, line_number)
        seen_keys.update(dict.fromkeys(record))
        if text_key not in record:
            raise DataError(f"missing text field {text_key!r}; the line has "
                            f"{', '.join(map(repr, record))}", path, line_number)
        text = require_text(record[text_key], text_key, path, line_number)
        pair = record.get(text_pair_key)
        if pair is not None:
            pair = require_text(pair, text_pair_key, path, line_number)
        label = record.get(label_key)
        if with_labels and (label is None or label == ""):
            raise DataError(f"missing label field {label_key!r}; the line has "
                            f"{', '.join(map(repr, record))}", path, line_number)
        if isinstance(label, bool):
            label = str(label).lower()
        features = ({name: record.get(name) for name in feature_keys} if feature_keys
                    else None)
        kept = {name: record.get(name) for name in keep_keys} if keep_keys else None
        examples.append(TextExample(text, pair, label if with_labels else None, path,
                                    line_number, features, kept))
    if not examples:
        raise DataError("the file holds no examples", path)
    if pair_required and all(e.text_pair is None for e in examples):
        raise DataError(f"no line has the text pair field {text_pair_key!r}", path)
    for name in feature_keys:
        if all(e.features[name] is None for e in examples):
            raise DataError(f"no line has the feature {name!r} (or every value is null)", path)
    for name in keep_keys:
        if name not in seen_keys:
            raise DataError(f"no line has the kept key {name!r}; the lines have "
                            f"{', '.join(map(repr, seen_keys))}", path)
    return examples
