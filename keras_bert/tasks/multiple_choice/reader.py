"""Readers for multiple-choice files: SWAG's CSV layout, and JSON Lines with a context, a list of
choices and the index of the right one."""

from __future__ import annotations

import csv
import json

from keras_bert.errors import DataError
from keras_bert.fileio import read_text_lines
from keras_bert.tasks.input_examples import MultipleChoiceExample, require_text

SWAG_ENDINGS = ("ending0", "ending1", "ending2", "ending3")


def read_multiple_choice(path: str, with_labels: bool = True) -> list[MultipleChoiceExample]:
    """Reads a ``.csv`` file in SWAG's layout, or a ``.jsonl`` file, into examples.

    SWAG (columns ``sent1, sent2, ending0..ending3, label``): the context is ``sent1``, and
    choice ``i`` is ``sent2 + " " + ending_i``, as BERT's paper pairs them. JSON Lines: one
    ``{"context": ..., "choices": [...], "label": i}`` object per line; every line must have the
    same number of choices.

    Args:
        path: the file (local or gs://).
        with_labels: whether every example must name the right choice.

    Raises:
        DataError: a missing column or field, an empty text, a label that is not a choice
            index, or a varying number of choices; with the file and line.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.jsonl")
    >>> _ = open(path, "w").write('{"context": "He sat", "choices": ["down", "up"], "label": 0}\\n')
    >>> example = read_multiple_choice(path)[0]
    >>> example.choices, example.label
    (['down', 'up'], 0)
    """
    if path.lower().endswith(".csv"):
        examples = _read_swag(path, with_labels)
    else:
        examples = _read_jsonl(path, with_labels)
    if not examples:
        raise DataError("the file holds no examples", path)
    counts = {len(e.choices) for e in examples}
    if len(counts) > 1:
        odd = next(e for e in examples if len(e.choices) != len(examples[0].choices))
        raise DataError(f"{len(odd.choices)} choices, but the first example has "
                        f"{len(examples[0].choices)}; every example needs the same number",
                        path, odd.line)
    return examples


def _check_label(value, num_choices: int, path: str, line: int) -> int:
    try:
        label = int(value)
    except (TypeError, ValueError):
        raise DataError(f"label {value!r} is not a choice index (0..{num_choices - 1})",
                        path, line) from None
    if not 0 <= label < num_choices or str(value).strip() not in (str(label), f"{label}.0"):
        raise DataError(f"label {value!r} is not a choice index (0..{num_choices - 1})",
                        path, line)
    return label


def _read_swag(path: str, with_labels: bool) -> list[MultipleChoiceExample]:
    reader = csv.reader(line + "\n" for line in read_text_lines(path))
    header = next(reader, None)
    needed = ["sent1", "sent2", *SWAG_ENDINGS] + (["label"] if with_labels else [])
    missing = [name for name in needed if header is None or name not in header]
    if missing:
        raise DataError(f"missing SWAG column(s) {', '.join(map(repr, missing))}; the header "
                        f"must have sent1, sent2, ending0..ending3 and label", path, 1)
    column = {name: header.index(name) for name in needed}
    examples, start = [], reader.line_num + 1
    for fields in reader:
        line, start = start, reader.line_num + 1
        if not fields:
            continue
        if len(fields) < len(header):
            raise DataError(f"expected {len(header)} fields, found {len(fields)}", path, line)
        context = require_text(fields[column["sent1"]], "sent1", path, line)
        prefix = fields[column["sent2"]].strip()
        choices = [f"{prefix} {require_text(fields[column[e]], e, path, line).strip()}".strip()
                   for e in SWAG_ENDINGS]
        label = (_check_label(fields[column["label"]], len(choices), path, line)
                 if with_labels else None)
        examples.append(MultipleChoiceExample(context, choices, label, path, line))
    return examples


def _read_jsonl(path: str, with_labels: bool) -> list[MultipleChoiceExample]:
    examples = []
    for line, text in enumerate(read_text_lines(path), start=1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(f"invalid JSON ({e.msg} at column {e.colno})", path, line) from None
        if not isinstance(record, dict) or not isinstance(record.get("choices"), list) \
                or len(record["choices"]) < 2:
            raise DataError('expected {"context": ..., "choices": [at least two texts], '
                            '"label": index}', path, line)
        context = require_text(record.get("context"), "context", path, line)
        choices = [require_text(c, f"choices[{i}]", path, line)
                   for i, c in enumerate(record["choices"])]
        label = None
        if with_labels:
            if "label" not in record:
                raise DataError("missing field 'label' (the index of the right choice)",
                                path, line)
            label = _check_label(record["label"], len(choices), path, line)
        examples.append(MultipleChoiceExample(context, choices, label, path, line))
    return examples
