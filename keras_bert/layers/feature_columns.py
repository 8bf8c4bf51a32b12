"""Tabular inputs for a classifier with features beside its text: a dict of columns or a pandas
DataFrame as named NumPy columns, and each feature column in the form the model takes (numeric:
float32 with NaN for missing; categorical: strings with "" for missing), with errors that name the
feature and the row (or the file and line it was read from)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from keras_bert.errors import DataError

CATEGORICAL_MISSING = ""  # the value a missing categorical has
Source = tuple[str | None, int | None]  # (file, line) a row was read from


def is_data_frame(x) -> bool:
    """Whether ``x`` looks like a pandas DataFrame (named columns, each ``to_numpy()``)."""
    return hasattr(x, "columns") and hasattr(x, "__getitem__") and not isinstance(x, Mapping)


def table_columns(x) -> dict[str, np.ndarray]:
    """A dict of columns or a DataFrame as {name: 1-D array}.

    >>> table_columns({"text": ["a", "b"], "age": [3, 4]})["age"].tolist()
    [3, 4]
    """
    if is_data_frame(x):
        return {str(name): x[name].to_numpy() for name in x.columns}
    columns = {}
    for name, values in x.items():
        array = np.asarray(values, dtype=object if _is_text_like(values) else None)
        if array.ndim == 2 and array.shape[1] == 1:
            array = array[:, 0]
        if array.ndim != 1:
            raise ValueError(f"column {name!r} has shape {array.shape}; give one value per "
                             f"example (a 1-D list or array)")
        columns[str(name)] = array
    return columns


def _is_text_like(values) -> bool:
    return isinstance(values, (list, tuple)) and any(isinstance(v, (str, bytes)) or v is None
                                                     for v in values)


def _fail(message: str, name: str, row: int, sources: Sequence[Source] | None):
    if sources is not None:
        raise DataError(f"feature {name!r}: {message}", *sources[row])
    raise ValueError(f"feature {name!r}, row {row}: {message}")


def numeric_column(values, name: str, sources: Sequence[Source] | None = None) -> np.ndarray:
    """float32 [rows]: numbers as they are, None/NaN/"" as NaN (missing).

    Raises:
        ValueError (DataError with ``sources``): a value that is not a number, or is infinite.

    >>> numeric_column([1, None, "2.5", ""], "age").tolist()
    [1.0, nan, 2.5, nan]
    """
    values = np.asarray(values, dtype=object).reshape(-1)
    result = np.empty(len(values), np.float32)
    for row, value in enumerate(values):
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        if value is None or (isinstance(value, str) and not value.strip()):
            result[row] = np.nan
            continue
        if isinstance(value, (bool, np.bool_)):
            _fail(f"{value!r} is a boolean; give numbers (or make it categorical)", name, row,
                  sources)
        try:
            number = float(value)
        except (TypeError, ValueError):
            _fail(f"{value!r} is not a number (missing values: empty, None or NaN)", name, row,
                  sources)
        if math.isinf(number):
            _fail(f"{value!r} is infinite; give a finite number, or NaN for missing", name, row,
                  sources)
        result[row] = number
    return result


def category_string(value) -> str:
    """A categorical value as the string the model sees: ints (and integral floats, as pandas
    gives int columns with gaps) in decimal, None and NaN as "" (missing)."""
    if value is None:
        return CATEGORICAL_MISSING
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return CATEGORICAL_MISSING
        if float(value).is_integer():
            return str(int(value))
        return repr(float(value))
    return str(value)


def categorical_column(values) -> np.ndarray:
    """object [rows] of str: strings as they are, ints in decimal, None/NaN as "" (missing).

    >>> categorical_column(["fr", 3, None, 4.0]).tolist()
    ['fr', '3', '', '4']
    """
    values = np.asarray(values, dtype=object).reshape(-1)
    return np.asarray([category_string(v) for v in values] or [], dtype=object)

