"""Numeric and categorical features that go beside the text into a classifier: each numeric value
normalised with its mean and variance plus a missing flag, each categorical value looked up in a
vocabulary and embedded, all joined into one float32 vector per example.

Missing values: a numeric NaN (or any non-finite value) becomes 0 after normalisation (the mean)
with its missing flag 1; a categorical "" takes a learned "missing" embedding and a value outside
the vocabulary a learned "unknown" one. Statistics and vocabularies are given or learned with
``adapt``; the lookup is in the graph with core TensorFlow ops only (no lookup tables), so it
exports to TF Serving.
"""

from __future__ import annotations

import collections
import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from keras_bert.layers.feature_columns import CATEGORICAL_MISSING, category_string
from keras_bert.layers.shapes import check_rank

logger = logging.getLogger(__name__)

DEFAULT_MAX_CATEGORIES = 100  # categories kept when the vocabulary is learned
MAX_EMBEDDING_DIM = 50
MISSING_ROW, UNKNOWN_ROW, FIRST_VOCABULARY_ROW = 0, 1, 2
FINGERPRINT_BUCKETS = 2 ** 63 - 1  # Fingerprint64 of the value, as an int64 >= 0
NO_FINGERPRINT = -1  # a vocabulary slot not in use
MIN_STD = 1e-3
FEATURE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")


def default_embedding_dim(num_categories: int) -> int:
    """min(50, (n + 1) // 2) for n categories plus the missing and unknown rows."""
    return max(1, min(MAX_EMBEDDING_DIM, (num_categories + FIRST_VOCABULARY_ROW + 1) // 2))


def fingerprints(values: Sequence[str]) -> np.ndarray:
    """int64 [len(values)]: the in-graph key of each categorical value."""
    return tf.strings.to_hash_bucket_fast(tf.constant(list(values), tf.string),
                                          FINGERPRINT_BUCKETS).numpy()


def _named_specs(specs, kind: str) -> list[tuple[str, Any]]:
    """(name, spec or None) pairs of a list of names or a dict; errors for a bad or repeated
    name."""
    if specs is None:
        return []
    if isinstance(specs, str):
        raise TypeError(f"{kind}_features must be a list of names or a dict, got the string "
                        f"{specs!r}; write [{specs!r}]")
    items = list(specs.items() if isinstance(specs, Mapping) else ((n, None) for n in specs))
    seen = set()
    for name, _ in items:
        if not isinstance(name, str) or not FEATURE_NAME.match(name):
            raise ValueError(f"{kind} feature name {name!r} is not a valid input name; use "
                             f"letters, digits, '_', '.' and '-', starting with a letter or '_'")
        if name in seen:
            raise ValueError(f"{kind} feature {name!r} is named twice")
        seen.add(name)
    return items


def normalize_numeric_specs(specs) -> dict[str, dict | None]:
    """``["age"]`` or ``{"age": None | {"mean": m, "variance": v}}`` -> the dict form."""
    result = {}
    for name, spec in _named_specs(specs, "numeric"):
        if spec is not None:
            if set(spec) != {"mean", "variance"}:
                raise ValueError(f"numeric feature {name!r}: give both 'mean' and 'variance' "
                                 f"(or None to learn them in fit), got {sorted(spec)}")
            mean, variance = float(spec["mean"]), float(spec["variance"])
            if not (math.isfinite(mean) and math.isfinite(variance) and variance >= 0):
                raise ValueError(f"numeric feature {name!r}: mean {mean} and variance {variance} "
                                 f"must be finite, the variance >= 0")
            spec = {"mean": mean, "variance": variance}
        result[name] = spec
    return result


def normalize_categorical_specs(specs) -> dict[str, dict]:
    """``["country"]`` or ``{"country": None | {"vocabulary": [...], "max_categories": n,
    "embedding_dim": d}}`` -> the dict form, every key filled in (vocabulary None: learned)."""
    result = {}
    for name, spec in _named_specs(specs, "categorical"):
        spec = dict(spec or {})
        unknown = set(spec) - {"vocabulary", "max_categories", "embedding_dim"}
        if unknown:
            raise ValueError(f"categorical feature {name!r}: unknown settings {sorted(unknown)}; "
                             f"expected vocabulary, max_categories, embedding_dim")
        vocabulary = spec.get("vocabulary")
        if vocabulary is not None:
            vocabulary = [category_string(v) for v in vocabulary]
            if CATEGORICAL_MISSING in vocabulary or len(set(vocabulary)) != len(vocabulary):
                raise ValueError(f"categorical feature {name!r}: the vocabulary must hold "
                                 f"distinct, non-empty values")
        max_categories = spec.get("max_categories")
        if max_categories is None:
            max_categories = len(vocabulary) if vocabulary is not None else DEFAULT_MAX_CATEGORIES
        max_categories = int(max_categories)
        if max_categories < 1 or (vocabulary is not None and len(vocabulary) > max_categories):
            raise ValueError(f"categorical feature {name!r}: max_categories={max_categories} "
                             f"must be >= 1 and hold the vocabulary")
        embedding_dim = int(spec.get("embedding_dim") or default_embedding_dim(max_categories))
        result[name] = {"vocabulary": vocabulary, "max_categories": max_categories,
                        "embedding_dim": embedding_dim}
    return result


@keras.saving.register_keras_serializable(package="keras_bert")
class TabularFeatures(keras.layers.Layer):
    """Named numeric and categorical inputs -> one float32 vector per example.

    Numeric feature ``x``: ``[(x - mean) / sqrt(variance), missing]``, where a non-finite ``x``
    (NaN: missing) gives ``[0, 1]``. Categorical feature ``c``: the row of a learned embedding
    table: row 0 for ``""`` (missing), row 1 for a value not in the vocabulary, row 2 + i for
    ``vocabulary[i]``. Values are matched by their 64-bit fingerprint, kept in a non-trainable
    variable of ``max_categories`` slots, so the lookup runs in any graph (TF Serving included)
    and a vocabulary learned by ``adapt`` lives in the weights as well as in the config.

    Args:
        numeric_features: names, or {name: None (learn) or {"mean": m, "variance": v}}.
        categorical_features: names, or {name: None or {"vocabulary": [values] (None:
            learn), "max_categories": slots (the vocabulary's size, 100 when learned),
            "embedding_dim": width (min(50, (max_categories + 3) // 2))}}.

    Call args:
        inputs: {name: float [batch] for a numeric feature, string [batch] for a categorical}.

    Returns:
        float32 [batch, 2 * numeric features + sum of embedding_dim], numeric features first,
        each group in the order given.

    Example:
    >>> import numpy as np
    >>> layer = TabularFeatures({"age": {"mean": 40.0, "variance": 100.0}},
    ...                         {"country": {"vocabulary": ["fr", "us"], "embedding_dim": 2}})
    >>> out = layer({"age": np.array([50.0, np.nan], "float32"),
    ...              "country": np.array(["us", ""])})
    >>> out.shape, out.numpy()[:, :2].tolist()
    (TensorShape([2, 4]), [[1.0, 0.0], [0.0, 1.0]])
    >>> layer.category_rows("country", ["fr", "us", "", "de"]).tolist()
    [2, 3, 0, 1]
    """

    def __init__(self, numeric_features=None, categorical_features=None, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.numeric_features = normalize_numeric_specs(numeric_features)
        self.categorical_features = normalize_categorical_specs(categorical_features)
        clash = set(self.numeric_features) & set(self.categorical_features)
        if clash:
            raise ValueError(f"feature {sorted(clash)[0]!r} is both numeric and categorical")
        self.embeddings = {
            name: keras.layers.Embedding(spec["max_categories"] + FIRST_VOCABULARY_ROW,
                                         spec["embedding_dim"], dtype="float32",
                                         name=f"{name}_embedding")
            for name, spec in self.categorical_features.items()}
        self.input_names = [*self.numeric_features, *self.categorical_features]

    @property
    def output_width(self) -> int:
        return 2 * len(self.numeric_features) + sum(
            spec["embedding_dim"] for spec in self.categorical_features.values())

    def build(self, input_shape=None):
        shape = (len(self.numeric_features),)
        self.mean = self.add_weight(
            shape=shape, trainable=False, name="numeric_mean",
            initializer=keras.initializers.Constant(self._numeric_values("mean", 0.0)))
        self.variance = self.add_weight(
            shape=shape, trainable=False, name="numeric_variance",
            initializer=keras.initializers.Constant(self._numeric_values("variance", 1.0)))
        self.vocabulary_keys = {}
        for name, spec in self.categorical_features.items():
            self.vocabulary_keys[name] = self.add_weight(
                shape=(spec["max_categories"],), dtype="int64", trainable=False,
                name=f"{name}_vocabulary_keys",
                initializer=keras.initializers.Constant(self._keys(spec)))
            self.embeddings[name].build((None,))

    def _numeric_values(self, key: str, unknown: float) -> np.ndarray:
        """float32 [numeric features]: each feature's ``key`` statistic (``unknown`` when it is
        not known yet)."""
        return np.asarray([unknown if spec is None else spec[key]
                           for spec in self.numeric_features.values()], np.float32)

    @staticmethod
    def _keys(spec: dict) -> np.ndarray:
        keys = np.full((spec["max_categories"],), NO_FINGERPRINT, np.int64)
        if spec["vocabulary"]:
            keys[:len(spec["vocabulary"])] = fingerprints(spec["vocabulary"])
        return keys

    def call(self, inputs):
        self._check_ranks(inputs)
        parts = []
        if self.numeric_features:
            values = ops.stack([ops.cast(ops.reshape(inputs[name], (-1,)), "float32")
                                for name in self.numeric_features], axis=1)
            missing = ops.logical_not(ops.isfinite(values))
            std = ops.sqrt(ops.maximum(self.variance, MIN_STD ** 2))
            normalised = ops.where(missing, 0.0, (values - self.mean) / std)
            parts += [normalised, ops.cast(missing, "float32")]
        for name in self.categorical_features:
            rows = self._rows(name, tf.reshape(inputs[name], [-1]))
            parts.append(self.embeddings[name](rows))
        return ops.concatenate(parts, axis=1)

    def _rows(self, name: str, values: tf.Tensor) -> tf.Tensor:
        """int32 [batch]: the embedding row of each string value."""
        keys = tf.strings.to_hash_bucket_fast(values, FINGERPRINT_BUCKETS)
        matches = tf.equal(keys[:, None], tf.convert_to_tensor(self.vocabulary_keys[name])[None])
        rows = tf.where(tf.reduce_any(matches, axis=1),
                        tf.argmax(tf.cast(matches, tf.int32), axis=1, output_type=tf.int32)
                        + FIRST_VOCABULARY_ROW, UNKNOWN_ROW)
        return tf.where(tf.equal(values, CATEGORICAL_MISSING), MISSING_ROW, rows)

    def category_rows(self, name: str, values) -> np.ndarray:
        """The embedding rows of categorical ``values`` (0 missing, 1 unknown, 2 + i)."""
        if not self.built:
            self.build()
        values = tf.constant([category_string(v) for v in values], tf.string)
        return self._rows(name, values).numpy()

    def compute_output_shape(self, input_shape=None):
        self._check_ranks(input_shape)
        return (None, self.output_width)

    def _check_ranks(self, inputs) -> None:
        """Each feature [batch] (or [batch, 1], as a column comes from a table)."""
        if isinstance(inputs, Mapping):
            for name in self.input_names:
                if name in inputs:
                    check_rank("TabularFeatures", name, inputs[name], ("batch",),
                               allow_last_axis_squeeze=True)

    # ------------------------------------------------------------------------ adapt
    def unadapted(self) -> list[str]:
        """The features whose statistics or vocabulary are not known yet."""
        return ([n for n, s in self.numeric_features.items() if s is None]
                + [n for n, s in self.categorical_features.items() if s["vocabulary"] is None])

    def adapt(self, columns: Mapping[str, np.ndarray]) -> None:
        """Learns what is not known yet from training columns (numeric: float with NaN for
        missing; categorical: strings with "" for missing): the mean and variance of the
        present values; the ``max_categories`` most frequent values (ties by value).

        Raises:
            ValueError: a column is absent, or holds no present value.
        """
        if not self.built:
            self.build()
        for name in self.unadapted():
            if name not in columns:
                raise ValueError(f"cannot learn feature {name!r}: the training data has no "
                                 f"such column")
            values = np.asarray(columns[name]).reshape(-1)
            if name in self.numeric_features:
                present = values.astype(np.float64)
                present = present[np.isfinite(present)]
                if not len(present):
                    raise ValueError(f"numeric feature {name!r} has no value in the training "
                                     f"data (all missing); cannot learn its mean and variance")
                variance = float(present.var()) or 1.0  # a constant column: scale 1
                self.numeric_features[name] = {"mean": float(present.mean()),
                                               "variance": variance}
                self.mean.assign(self._numeric_values("mean", 0.0))
                self.variance.assign(self._numeric_values("variance", 1.0))
                logger.info("numeric feature %r: mean %g, variance %g from %d values", name,
                            present.mean(), variance, len(present))
            else:
                spec = self.categorical_features[name]
                counts = collections.Counter(v for v in values.tolist()
                                             if v != CATEGORICAL_MISSING)
                if not counts:
                    raise ValueError(f"categorical feature {name!r} has no value in the training "
                                     f"data (all missing); cannot learn its vocabulary")
                ranked = sorted(counts, key=lambda v: (-counts[v], v))
                spec["vocabulary"] = ranked[:spec["max_categories"]]
                self.vocabulary_keys[name].assign(self._keys(spec))
                logger.info("categorical feature %r: %d of %d distinct values in the vocabulary"
                            "%s", name, len(spec["vocabulary"]), len(ranked),
                            "" if len(ranked) <= spec["max_categories"] else
                            " (the rest share the unknown embedding)")

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({
            "numeric_features": {n: None if s is None else dict(s)
                                 for n, s in self.numeric_features.items()},
            "categorical_features": {n: {**s, "vocabulary": None if s["vocabulary"] is None
                                         else list(s["vocabulary"])}
                                     for n, s in self.categorical_features.items()}})
        return config
