"""Reader for JSON Lines task files: one object per line with ``text``, an optional
``text_pair`` and a ``label``, for classification or regression tasks that have no GLUE layout."""

from __future__ import annotations

import json
from collections.abc import Sequence

from keras_bert.errors import DataError
from keras_bert.fileio import read_text_lines
from keras_bert.tasks.examples import TextExample, require_text


def read_jsonl(path: str, with_labels: bool = True, text_key: str = "text",
               text_pair_key: str = "text_pair", label_key: str = "label",
               feature_keys: Sequence[str] = ()) -> list[TextExample]:
    """Reads ``{"text": ..., "text_pair": ..., "label": ...}`` lines into TextExamples.

    Blank lines are skipped. Labels keep their JSON type: strings or ints name classes (the
    fine-tuning code compares them as strings), floats are regression targets.

    Args:
        path: the file (local or gs://).
        with_labels: whether every line must have a label.
        text_key, text_pair_key, label_key: the field names.
        feature_keys: more fields to read into each example's ``features`` as their JSON
            values, for a classifier with numeric or categorical features; a line without one
            (or with null) has a missing value there, but each must appear on some line.

    Raises:
        DataError: invalid JSON, a line that is not an object, an empty text, a missing
            label, or a feature no line has; the message names the file and line.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
    >>> _ = open(path, "w").write('{"text": "fine", "label": "pos"}\\n')
    >>> example = read_jsonl(path)[0]
    >>> example.text, example.label, example.line
    ('fine', 'pos', 1)
    """
    examples = []
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
        text = require_text(record.get(text_key), text_key, path, line_number)
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
        examples.append(TextExample(text, pair, label if with_labels else None, path,
                                    line_number, features))
    if not examples:
        raise DataError("the file holds no examples", path)
    for name in feature_keys:
        if all(e.features[name] is None for e in examples):
            raise DataError(f"no line has the feature {name!r} (or every value is null)", path)
    return examples
