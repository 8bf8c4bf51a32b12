"""The examples that the fine-tuning readers return, the error they raise for bad input (naming the
file and line), the checks they share, and label encoding with the same kind of error."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Union

from keras_bert.errors import DataError

Label = Union[str, float, int, None]


@dataclasses.dataclass(frozen=True)
class TextExample:
    """One text or text pair with its label, for classification and regression.

    Args:
        text: the first segment.
        text_pair: the second segment, or None for single texts.
        label: a class name (str), a regression target (float), or None when unlabelled.
        path, line: where the example was read, for error messages.
        features: {name: value} of the other columns a classifier with features reads (as
            read: strings from TSV/CSV, JSON values from JSONL; None or "" when missing), or
            None.
        kept: {name: value} of the columns copied as they are into the example's prediction
            record (``keep_columns``, e.g. an id; as read, None where a JSONL line lacks one),
            or None.
    """
    text: str
    text_pair: str | None = None
    label: Label = None
    path: str | None = None
    line: int | None = None
    features: dict | None = None
    kept: dict | None = None


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
    """A sentence split into words, with one tag per word (CoNLL), for token classification.

    Args:
        words: the words.
        tags: one tag per word (e.g. ``B-PER``, ``I-PER``, ``O``), or None when unlabelled.
        path, line: the file and the line of the first word; word ``i`` is on ``line + i``.
    """
    words: list[str]
    tags: list[str] | None = None
    path: str | None = None
    line: int | None = None


@dataclasses.dataclass(frozen=True)
class MultipleChoiceExample:
    """A context with several candidate continuations, one of which is right (SWAG).

    Args:
        context: the first segment, shared by every choice.
        choices: the second segments, one per candidate.
        label: the index of the right choice, or None when unlabelled.
        path, line: where the example was read.
    """
    context: str
    choices: list[str]
    label: int | None = None
    path: str | None = None
    line: int | None = None


def require_text(value, field: str, path: str | None, line: int | None) -> str:
    """``value`` as a non-empty str, else a DataError naming the field."""
    if not isinstance(value, str) or not value.strip():
        raise DataError(f"field {field!r} is empty or missing; every example needs a non-empty "
                        f"{field}", path, line)
    return value


def check_distinct_columns(columns: dict[str, str | int | None]) -> None:
    """ValueError when two roles ({role: column}, such as text_column and label_column) name
    the same column (or JSONL key): each is read for one role only.

    >>> check_distinct_columns({"text_column": "score", "label_column": "score"})
    Traceback (most recent call last):
    ...
    ValueError: text_column and label_column both name 'score'; a column is read for one role only
    """
    roles: dict[str | int, str] = {}
    for role, column in columns.items():
        if column is None:
            continue
        if column in roles:
            raise ValueError(f"{roles[column]} and {role} both name {column!r}; a column is "
                             f"read for one role only")
        roles[column] = role


def label_names_of(examples: Sequence, attribute: str = "label") -> list[str]:
    """The sorted distinct labels of ``examples`` (as strings), for building a label vocabulary."""
    names = set()
    for example in examples:
        value = getattr(example, attribute)
        if isinstance(value, list):
            names.update(str(v) for v in value)
        elif value is not None:
            names.add(str(value))
    return sorted(names)


def encode_label(label: Label, label_names: Sequence[str], path: str | None,
                 line: int | None) -> int:
    """The index of ``label`` in ``label_names``; DataError for an unknown label.

    >>> encode_label("pos", ["neg", "pos"], "train.tsv", 3)
    1
    """
    if label is None:
        raise DataError("the example has no label; give a labelled file for training and "
                        "evaluation", path, line)
    try:
        return list(label_names).index(str(label))
    except ValueError:
        raise DataError(f"unknown label {label!r}; the model's labels are "
                        f"{', '.join(map(repr, label_names))}. Fix the label, or pass the full "
                        f"label list (--labels) when training", path, line) from None
