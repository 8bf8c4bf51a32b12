"""BertClassifier's inputs: raw texts, pairs, read examples, dicts and DataFrames of columns
with named features, as the arrays and tensors the model takes; labels as class indices.

``ClassifierInputs`` knows only the classifier's label and feature settings, not its layers, so
the model (model.py) stays its layers and its Keras hooks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from keras_bert.layers.feature_columns import (categorical_column, is_data_frame, numeric_column,
                                             table_columns)
from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.recipe.inputs import as_string_array, is_packed, is_text_arrays
from keras_bert.errors import DataError
from keras_bert.tasks.input_examples import TextExample, encode_label

TEXT, TEXT_PAIR = "text", "text_pair"  # the text columns of dict, DataFrame and served inputs
RESERVED_NAMES = frozenset({*INPUT_NAMES, TEXT, TEXT_PAIR})


@dataclasses.dataclass(frozen=True)
class ClassifierInputs:
    """A classifier's label and feature settings, and the conversions they imply.

    Args:
        num_classes: K (1: regression).
        label_names: the K class names, or None.
        numeric_features, categorical_features: the feature names, in the model's order.
        multi_label: each example has any number of the K labels (a set of names or indices,
            or a 0/1 row of K), as float32 [rows, K].
    """

    num_classes: int
    label_names: tuple[str, ...] | None = None
    numeric_features: tuple[str, ...] = ()
    categorical_features: tuple[str, ...] = ()
    multi_label: bool = False

    @property
    def is_regression(self) -> bool:
        return self.num_classes == 1

    @property
    def feature_names(self) -> list[str]:
        return [*self.numeric_features, *self.categorical_features]

    def to_arrays(self, x, y=None):
        if is_packed(x):  # packed ids (and features)
            inputs = self.with_feature_columns(dict(x), "the packed inputs")
        elif isinstance(x, dict) or is_data_frame(x):
            inputs = self.table_arrays(table_columns(x))
        elif is_text_arrays(x):
            inputs = x
        else:
            x = [x] if isinstance(x, str) else list(x)
            if x and isinstance(x[0], TextExample):
                if y is None and x[0].label is not None:
                    y = self.encode_example_labels(x)
                if self.feature_names:
                    return self.example_arrays(x), (None if y is None
                                                     else self.encode_labels(y))
                texts, pairs = [e.text for e in x], [e.text_pair for e in x]
                x = texts if pairs[0] is None else list(zip(texts, pairs))
            elif self.feature_names:
                raise ValueError(f"this classifier also takes the features "
                                 f"{', '.join(self.feature_names)}: pass a dict of columns or a "
                                 f"DataFrame with {TEXT!r} (and {TEXT_PAIR!r}) and those columns")
            if x and isinstance(x[0], (tuple, list)):
                if any(len(pair) != 2 for pair in x):
                    raise ValueError("text pairs must be (text, text_pair) tuples of two strings")
                inputs = (as_string_array([p[0] for p in x], "text"),
                          as_string_array([p[1] for p in x], "text_pair"))
            else:
                inputs = as_string_array(x, "text")
        return inputs, (None if y is None else self.encode_labels(y))

    def table_arrays(self, columns: dict[str, np.ndarray], sources=None):
        """Text (a tuple with pairs) for a text-only model; else {text, [text_pair,] features}."""
        if TEXT not in columns:
            raise ValueError(f"the input has no {TEXT!r} column (columns: "
                             f"{', '.join(map(repr, columns))}); name the text column {TEXT!r} "
                             f"and the second text of pairs {TEXT_PAIR!r}")
        text = as_string_array(columns[TEXT], TEXT)
        pair = as_string_array(columns[TEXT_PAIR], TEXT_PAIR) if TEXT_PAIR in columns else None
        if not self.feature_names:
            return text if pair is None else (text, pair)
        arrays = {TEXT: text} if pair is None else {TEXT: text, TEXT_PAIR: pair}
        return self.with_feature_columns({**columns, **arrays}, "the input", sources)

    def with_feature_columns(self, columns: dict, what: str, sources=None) -> dict:
        """``columns`` with each feature converted to the model's form (numeric float32 with
        NaN for missing, categorical str with "" for missing); ValueError naming a feature
        that is absent or a column whose length differs."""
        if not self.feature_names:
            return columns
        absent = [name for name in self.feature_names if name not in columns]
        if absent:
            raise ValueError(
                f"feature {absent[0]!r} is missing from {what}: this classifier takes the numeric "
                f"features {list(self.numeric_features)} and the categorical features "
                f"{list(self.categorical_features)}; {what} has "
                f"{', '.join(map(repr, columns))}")
        result = {name: value for name, value in columns.items()
                  if name in INPUT_NAMES or name in (TEXT, TEXT_PAIR)}
        for name in self.numeric_features:
            result[name] = numeric_column(columns[name], name, sources)
        for name in self.categorical_features:
            result[name] = categorical_column(columns[name])
        rows = {name: len(value) for name, value in result.items()}
        if len(set(rows.values())) > 1:
            raise ValueError(f"the columns of {what} differ in length: {rows}")
        return result

    def example_arrays(self, examples: Sequence[TextExample]) -> dict:
        """Read examples (with their ``features``) as model columns; errors name file and line."""
        for e in examples:
            absent = [n for n in self.feature_names if n not in (e.features or {})]
            if absent:
                raise DataError(f"the example has no feature {absent[0]!r}; this classifier "
                                f"takes {', '.join(map(repr, self.feature_names))} (read the "
                                f"file with those feature columns)", e.path, e.line)
        columns = {TEXT: [e.text for e in examples]}
        if examples[0].text_pair is not None:
            columns[TEXT_PAIR] = [e.text_pair for e in examples]
        for name in self.feature_names:
            columns[name] = np.asarray([e.features[name] for e in examples], dtype=object)
        return self.table_arrays(columns, [(e.path, e.line) for e in examples])

    def encode_example_labels(self, examples: Sequence[TextExample]) -> np.ndarray:
        """Labels of read examples; errors name the example's file and line."""
        if self.is_regression:
            values = []
            for e in examples:
                try:
                    values.append(float(e.label))
                except (TypeError, ValueError):
                    raise DataError(f"label {e.label!r} is not a number; a regression target "
                                    f"must be one", e.path, e.line) from None
            return np.asarray(values, dtype=np.float32).reshape(-1, 1)
        if self.label_names is None:
            raise ValueError("the examples have label names, but the classifier has no "
                             "label_names; pass label_names=[...]")
        return np.asarray([encode_label(e.label, self.label_names, e.path, e.line)
                           for e in examples], dtype=np.int32)

    def encode_labels(self, y) -> np.ndarray:
        if self.multi_label:
            return self.encode_label_sets(y)
        values = list(np.asarray(y, dtype=object).reshape(-1))
        if self.is_regression:
            return np.asarray(values, dtype=np.float32).reshape(-1, 1)
        if all(isinstance(v, (int, np.integer)) for v in values):
            labels = np.asarray(values, dtype=np.int32)
            bad = labels[(labels < 0) | (labels >= self.num_classes)]
            if len(bad):
                raise ValueError(f"label {int(bad[0])} is outside 0..{self.num_classes - 1}")
            return labels
        if self.label_names is None:
            raise ValueError("labels are names, but the classifier has no label_names; pass "
                             "label_names=[...] or integer labels")
        return np.asarray([encode_label(v, self.label_names, None, None) for v in values],
                          dtype=np.int32)

    def encode_label_sets(self, y) -> np.ndarray:
        """Multi-label targets as float32 [rows, K] 0/1 rows: each row a 0/1 (or probability)
        row of K numbers, or a collection of label names or indices."""
        rows = []
        for index, row in enumerate(y.tolist() if isinstance(y, np.ndarray) else y):
            if isinstance(row, str) or not isinstance(row, (list, tuple, set, frozenset)):
                raise ValueError(f"y[{index}] is {row!r}; a multi-label classifier takes a list "
                                 f"of label names (or indices) per example, or a 0/1 row of "
                                 f"{self.num_classes}")
            items = list(row)
            if len(items) == self.num_classes and all(
                    isinstance(v, (int, float, np.number)) and 0 <= v <= 1 for v in items) \
                    and not all(isinstance(v, (int, np.integer)) for v in items):
                rows.append([float(v) for v in items])
                continue
            hot = [0.0] * self.num_classes
            for item in items:
                if isinstance(item, (int, np.integer)) and 0 <= item < self.num_classes:
                    hot[int(item)] = 1.0
                elif self.label_names is not None and str(item) in self.label_names:
                    hot[self.label_names.index(str(item))] = 1.0
                else:
                    raise ValueError(f"y[{index}] has the label {item!r}, which is not one of "
                                     f"{list(self.label_names or range(self.num_classes))}")
            rows.append(hot)
        return np.asarray(rows, dtype=np.float32).reshape(-1, self.num_classes)

    def feature_tensors(self, x: dict) -> dict:
        """The features of a batch of raw tensors: numeric float32, categorical strings
        (integer categories as their decimal string)."""
        result = {}
        for name in self.feature_names:
            if name not in x:
                raise ValueError(f"feature {name!r} is missing from the dataset; it has "
                                 f"{', '.join(map(repr, x))}")
            value = tf.convert_to_tensor(x[name])
            if name in self.numeric_features:
                result[name] = tf.cast(value, tf.float32)
            elif value.dtype == tf.string:
                result[name] = value
            elif value.dtype.is_integer:
                result[name] = tf.strings.as_string(value)
            else:
                raise ValueError(f"categorical feature {name!r} is {value.dtype.name}; give "
                                 f"strings or integers")
        return result

    def dataset_feature_columns(self, dataset: tf.data.Dataset, names) -> dict:
        parts = {name: [] for name in names}
        for element in dataset:
            x = element[0] if isinstance(element, tuple) else element
            if not isinstance(x, dict) or any(name not in x for name in parts):
                missing = [n for n in parts if not isinstance(x, dict) or n not in x]
                raise ValueError(f"feature {missing[0]!r} is missing from the training dataset")
            for name in parts:
                parts[name].append(np.asarray(x[name]).reshape(-1))
        return {name: (numeric_column(np.concatenate(values), name)
                       if name in self.numeric_features
                       else categorical_column(np.concatenate(values)))
                for name, values in parts.items()}
