"""BertClassifier: BERT fine-tuned to classify single texts or text pairs into K classes, or to
score them (regression, STS-B style), from the pooled [CLS] vector, optionally joined with named
numeric and categorical features (a review and its star count, a profile and a country)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from keras_bert.config import CLASSIFIER_POOLINGS, WINDOW_COMBINATIONS
from keras_bert.checkpoints.stored_head import StoredHead
from keras_bert.layers.features import TabularFeatures
from keras_bert.layers.pooling import SentencePooling
from keras_bert.layers.task_heads import ClassificationHead
from keras_bert.models.encoder import BertEncoder
from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.export.saved_model import ExportsRawText
from keras_bert.models.task import BertTask
from keras_bert.recipe.inputs import EXAMPLE_INDEX
from keras_bert.tasks.classification.inputs import (RESERVED_NAMES, TEXT, TEXT_PAIR,
                                                    ClassifierInputs)
from keras_bert.tasks.classification.windows import (combine_windows, pack_windows,
                                                     resolved_stride)
POOLINGS = CLASSIFIER_POOLINGS
# With features, the new layers after the encoder learn this many times faster than the encoder
# (at the paper's 3e-5: 9e-4): at BERT's rates, a fresh hidden layer barely moves in a few
# epochs and cannot learn how the text and the features interact.
FEATURE_LEARNING_RATE_MULTIPLIER = 30.0


@keras.saving.register_keras_serializable(package="keras_bert")
class BertClassifier(ExportsRawText, BertTask):
    """BERT with a K-way softmax layer on the pooled [CLS] output (K=1: a regression score),
    optionally joined with numeric and categorical features.

    Args:
        encoder: a BertEncoder (all of its layers are fine-tuned).
        num_classes: K; 1 for regression.
        preprocessor: a BertPreprocessor for raw text, or None (packed ids only).
        label_names: the K class names, saved with the model; ``fit`` accepts them as labels
            and ``predict_labels`` returns them.
        dropout: dropout on the pooled output (0.1); with features, on the joined vector too.
        activation: "softmax" (default for K > 1: outputs are probabilities), None (logits;
            the default for regression), "sigmoid" (multi-label: each class independent,
            trained with binary cross-entropy on a set of labels per example, as Hugging
            Face's multi_label_classification) or another Keras activation.
        numeric_features: names of numeric inputs, or {name: None (learned in ``fit``) or
            {"mean": m, "variance": v}}; each becomes its normalised value and a missing flag
            (NaN, None or "" is missing: value 0 after normalisation, flag 1).
        categorical_features: names of categorical inputs (strings or ints), or {name: None or
            {"vocabulary": [...] (None: the ``max_categories`` most frequent in ``fit``),
            "max_categories": n (100), "embedding_dim": d (min(50, (n + 3) // 2))}}; each is
            embedded, "" or None with a learned "missing" row, an unseen value with a learned
            "unknown" row. See ``keras_bert.layers.TabularFeatures``.
        feature_hidden_units: with features, a GELU layer of this width on [pooled output,
            features] before the head, so that the text and the features can interact (0: the
            head reads the joined vector directly).
        pooling: the text vector: "pooled" (BERT's pooler on [CLS], default), "cls" (the raw
            [CLS] vector) or "mean" (mean over the text's tokens).
        window_combination: how a text longer than ``seq_length`` is read. "mean" (default):
            as overlapping windows of ``seq_length - 2`` WordPieces, the text's output the
            activation of the mean of its windows' logits (``fit`` trains on every window, each
            with its text's label; ``predict``, ``evaluate`` and the exports give one row per
            text). "first": the first window alone, the text cut at ``seq_length`` (one
            window's cost). A text that fits is one window either way, read exactly as
            without windows. A text pair too long for ``seq_length`` keeps its first text (at
            most half of ``seq_length - 3`` WordPieces, rounded up, as Google cuts it) in every
            window and reads its second text as windows of the rest ("mean"), or is cut as
            Google cuts a pair ("first"; "mean"'s first window); see
            ``windows.pack_pair_windows``.
        window_stride: WordPieces from one window's start to the next, 1 to ``seq_length -
            3``; None: half the window (``config.default_window_stride``). A pair's second
            text, read in shorter windows, steps at most one less than its window.

    Inputs: packed ids (the encoder's dict of int32 [batch, seq]) and, with features, each
    feature by name (numeric float32 [batch], NaN for missing; categorical string [batch], ""
    for missing). ``fit``, ``evaluate`` and ``predict`` also take raw text: a list of strings, a
    list of (text, text_pair) pairs, a list of TextExample (whose labels are used when ``y`` is
    not given), or a dict of columns or pandas DataFrame with "text" (and "text_pair") and the
    feature columns. ``fit`` learns the feature statistics not given (``adapt``); a
    feature absent from the input is an error naming it.

    Outputs: float32 [batch, num_classes]: probabilities (softmax), logits or scores.

    ``from_pretrained(path, num_classes=2, seq_length=128, **kwargs)`` builds one on a
    checkpoint's encoder, or loads a saved one (see ``BertTask.from_pretrained``).

    Example:
    >>> import numpy as np
    >>> encoder = BertEncoder(vocab_size=50, hidden_size=16, num_hidden_layers=1,
    ...                       num_attention_heads=2, intermediate_size=32)
    >>> classifier = BertClassifier(encoder, num_classes=3, label_names=["a", "b", "c"])
    >>> ids = np.array([[2, 7, 8, 3]], dtype="int32")
    >>> probabilities = classifier.predict({"input_word_ids": ids, "input_mask": np.ones_like(ids),
    ...                                     "input_type_ids": np.zeros_like(ids)}, verbose=0)
    >>> probabilities.shape, round(float(probabilities.sum()), 4)
    ((1, 3), 1.0)
    """

    head_arguments = ("num_classes",)
    checkpoint_tasks = ("classification",)
    # activation=None asks for logits, also of a checkpoint's multi-label (sigmoid) head
    overridable_head_arguments = ("activation",)

    def __init__(self, encoder: BertEncoder, num_classes: int = 2, preprocessor=None,
                 label_names: Sequence[str] | None = None, dropout: float = 0.1,
                 activation: str | None = "auto", numeric_features=None,
                 categorical_features=None, feature_hidden_units: int = 128,
                 pooling: str = "pooled", window_combination: str = "mean",
                 window_stride: int | None = None, **kwargs):
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1 (1 for regression), got {num_classes}")
        if label_names is not None and len(label_names) != num_classes:
            raise ValueError(f"got {len(label_names)} label_names for num_classes={num_classes}")
        if activation == "auto":
            activation = "softmax" if num_classes > 1 else None
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; expected one of {', '.join(POOLINGS)}")
        if window_combination not in WINDOW_COMBINATIONS:
            raise ValueError(f"unknown window_combination {window_combination!r}; expected one "
                             f"of {', '.join(WINDOW_COMBINATIONS)}")
        if preprocessor is not None:
            resolved_stride(window_stride, preprocessor.seq_length)  # ValueError if out of range
        # === Layers ===
        features = (TabularFeatures(numeric_features, categorical_features,
                                    name="tabular_features")
                    if numeric_features or categorical_features else None)
        if features is not None:
            clash = sorted(set(features.input_names) & RESERVED_NAMES)
            if clash:
                raise ValueError(f"feature name {clash[0]!r} is taken by the text inputs "
                                 f"({', '.join(sorted(RESERVED_NAMES))}); rename the feature")
        pool = None if pooling == "pooled" else SentencePooling(pooling, name="pooling")
        feature_layers = []
        if features is not None:
            feature_layers.append(keras.layers.Concatenate(dtype=encoder.dtype_policy,
                                                           name="text_and_features"))
            if feature_hidden_units:
                feature_layers += [
                    keras.layers.Dropout(dropout, dtype=encoder.dtype_policy,
                                         name="features_dropout"),
                    # Glorot, not BERT's N(0, 0.02): a nonlinear layer must start outside the
                    # near-linear regime to learn how text and features interact.
                    keras.layers.Dense(feature_hidden_units, activation="gelu",
                                       dtype=encoder.dtype_policy, name="features_dense")]
        head = ClassificationHead(num_classes, dropout, encoder.bert_config.initializer_range,
                                  dtype=encoder.dtype_policy, name="classifier")
        output_activation = (keras.layers.Activation(activation, dtype="float32",
                                                     name="probabilities")
                             if activation else None)
        # === Functional model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUT_NAMES}
        encoded = encoder(inputs)
        pooled = (encoded["pooled_output"] if pool is None
                  else pool(encoded["sequence_output"], inputs["input_mask"]))
        if features is not None:
            feature_inputs = {
                name: keras.Input(shape=(), dtype="float32" if name in features.numeric_features
                                  else "string", name=name)
                for name in features.input_names}
            inputs.update(feature_inputs)
            pooled = feature_layers[0]([pooled, features(feature_inputs)])
            for layer in feature_layers[1:]:
                pooled = layer(pooled)
        outputs = head(pooled)
        if output_activation is not None:
            outputs = output_activation(outputs)
        super().__init__(inputs=inputs, outputs=outputs, encoder=encoder,
                         preprocessor=preprocessor, **kwargs)
        # === Config ===
        self.head = head
        self.features = features
        self.num_classes = num_classes
        self.label_names = None if label_names is None else [str(n) for n in label_names]
        self.dropout = dropout
        self.activation = activation
        self.feature_hidden_units = feature_hidden_units
        self.pooling = pooling
        self.window_combination = window_combination
        self.window_stride = window_stride

    @property
    def is_regression(self) -> bool:
        return self.num_classes == 1

    @property
    def is_multi_label(self) -> bool:
        """Each class independent (sigmoid outputs), as HF's multi_label_classification."""
        return self.activation == "sigmoid" and self.num_classes > 1

    @property
    def finetune_task(self) -> str | None:
        """The `keras-bert finetune` task of this model: ``"regression"`` for one score,
        ``"classification"`` for classes, None for multi-label classes (no task trains them)."""
        if self.is_regression:
            return "regression"
        return None if self.is_multi_label else "classification"

    def check_saved_arguments(self, path: str, asked: dict[str, Any]) -> dict[str, Any]:
        """Features must be the saved ones; the window settings, which hold no weights, are
        taken as asked (``set_windows``)."""
        asked = dict(asked)
        windows = {name: asked.pop(name, None)
                   for name in ("window_combination", "window_stride")}
        self.set_windows(**windows)
        features = {name: asked.pop(name, None)
                    for name in ("numeric_features", "categorical_features")}
        requested = [*(features["numeric_features"] or []),
                     *(features["categorical_features"] or [])]
        if any(features.values()) and requested != self.feature_names:
            raise ValueError(f"{path!r} holds a saved BertClassifier with the features "
                             f"{self.feature_names}, but was asked for {requested}")
        return asked

    # ------------------------------------------------------------------------ checkpoints
    def checkpoint_head(self) -> StoredHead:
        """run_classifier.py's and BertForSequenceClassification's head: K logits from the
        pooled output (softmax: single-label; sigmoid: multi-label; K=1: regression). A
        classifier with features or another pooling has no equivalent in those formats."""
        unportable = None
        if self.features is not None or self.pooling != "pooled":
            unportable = (f"a BertClassifier with {'features' if self.features is not None else f'{self.pooling} pooling'} "
                          f"has no equivalent in Hugging Face's or Google's classifier")
        problem_type = ("regression" if self.is_regression
                        else "multi_label_classification" if self.activation == "sigmoid"
                        else "single_label_classification")
        return StoredHead("classification", "a BertClassifier", num_labels=self.num_classes,
                          label_names=self.label_names, problem_type=problem_type,
                          layer=self.head.dense, unportable=unportable)

    @classmethod
    def head_arguments_of(cls, head: StoredHead) -> dict[str, Any]:
        """A checkpoint's classifier fixes ``num_classes``, the label names it has, and the
        mode: softmax probabilities (single-label), sigmoid (multi-label: each class
        independent), or a score (regression)."""
        arguments: dict[str, Any] = {"num_classes": head.num_labels}
        if head.label_names:
            arguments["label_names"] = head.label_names
        if head.problem_type == "multi_label_classification":
            arguments["activation"] = "sigmoid"
        elif head.problem_type == "regression" and head.num_labels != 1:
            raise ValueError(f"{head.source}: problem_type regression with {head.num_labels} "
                             f"outputs; a BertClassifier scores one value (num_classes=1)")
        return arguments

    # ------------------------------------------------------------------------ task hooks
    def default_loss(self):
        if self.is_regression:
            return keras.losses.MeanSquaredError()
        if self.is_multi_label:
            return keras.losses.BinaryCrossentropy()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=self.activation is None)

    def soft_targets(self) -> str | None:
        if self.is_regression:
            return "score"
        return {"softmax": "softmax", "sigmoid": "sigmoid", None: "logits"}.get(self.activation)

    def learning_rate_multipliers(self) -> dict[str, float]:
        """With features, the layers after the encoder (feature embeddings, hidden layer, head)
        are new and learn at FEATURE_LEARNING_RATE_MULTIPLIER times the encoder's rate; a
        text-only classifier trains as BERT's recipe says (one rate)."""
        if self.features is None:
            return {}
        return {r"^(tabular_features|features_dense|classifier)/":
                FEATURE_LEARNING_RATE_MULTIPLIER}

    def default_metrics(self):
        if self.is_regression:
            return [keras.metrics.MeanSquaredError(name="mse")]
        if self.is_multi_label:
            return [keras.metrics.BinaryAccuracy(name="accuracy")]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    @property
    def feature_names(self) -> list[str]:
        """The names of the numeric, then categorical, features ([] for a text-only model)."""
        return [] if self.features is None else list(self.features.input_names)

    def _classifier_inputs(self) -> ClassifierInputs:
        """The input conversions for this classifier's labels and features (inputs.py)."""
        features = self.features
        return ClassifierInputs(
            self.num_classes, None if self.label_names is None else tuple(self.label_names),
            () if features is None else tuple(features.numeric_features),
            () if features is None else tuple(features.categorical_features),
            multi_label=self.is_multi_label)

    def to_arrays(self, x, y=None):
        """Inputs and labels as arrays, one row per example (see ``BertTask.to_arrays``).

        Args:
            x: a text, a list of texts, of (text, text_pair) pairs or of TextExamples (whose
                labels serve when ``y`` is None); with features, a dict of columns or a
                DataFrame with "text" (and "text_pair") and the feature columns; or packed ids
                (and the features by name).
            y: label names (of ``label_names``) or class indices; scores for regression.

        Returns:
            ``(x, y)``: ``x`` a str array [rows] (a tuple of two for pairs); with features, a
            dict of "text" (and "text_pair") str [rows] and each feature (numeric float32
            [rows], NaN for missing; categorical str [rows], "" for missing); packed ids stay
            int32 [rows, seq]. ``y`` int32 class indices [rows] (float32 [rows, 1] for
            regression), or None.
        """
        self.require_feature_statistics()
        return self._classifier_inputs().to_arrays(x, y)

    def pack_batch(self, x):
        """A batch of raw inputs as packed ids (see ``BertTask.pack_batch``); with
        ``window_combination="mean"``, texts and pairs as the rows of their windows
        (``windows.pack_windows``), features repeated for each, and
        ``recipe.inputs.EXAMPLE_INDEX`` [rows] naming each row's text."""
        self.require_feature_statistics()
        features = {}
        if isinstance(x, dict):  # {text, [text_pair,] features}
            if TEXT not in x:
                raise ValueError(f"a dataset of raw inputs needs a {TEXT!r} entry; it has "
                                 f"{', '.join(map(repr, x))}")
            features = self._classifier_inputs().feature_tensors(x)
            x = x[TEXT] if TEXT_PAIR not in x else (x[TEXT], x[TEXT_PAIR])
        pair = isinstance(x, tuple)
        if self.window_combination == "first" or self.preprocessor is None:
            # cut texts (pairs cut as Google cuts them): one window each
            return {**super().pack_batch(list(x) if pair else x), **features}
        texts, text_pairs = x if pair else (x, None)
        packed, text_index = pack_windows(
            self.preprocessor, tf.convert_to_tensor(texts), self.window_stride,
            text_pairs=None if text_pairs is None else tf.convert_to_tensor(text_pairs))
        return {**packed, **{name: tf.gather(value, text_index)
                             for name, value in features.items()},
                EXAMPLE_INDEX: text_index}

    def set_windows(self, window_combination: str | None = None,
                    window_stride: int | None = None) -> None:
        """Changes how texts longer than ``seq_length`` are read (the constructor's
        arguments of these names; None keeps the current one), checked as there."""
        combination = window_combination or self.window_combination
        stride = self.window_stride if window_stride is None else window_stride
        if combination not in WINDOW_COMBINATIONS:
            raise ValueError(f"unknown window_combination {combination!r}; expected one "
                             f"of {', '.join(WINDOW_COMBINATIONS)}")
        if self.preprocessor is not None:
            resolved_stride(stride, self.preprocessor.seq_length)
        self.window_combination, self.window_stride = combination, stride
        self._pack_functions.functions.clear()  # traced with the old settings

    def combine_windows(self, outputs, example_index, num_examples):
        """Each text's output from its windows' (``windows.combine_windows``): the activation
        of the mean of their logits; a text of one window keeps its output as it is."""
        return combine_windows(outputs, example_index, num_examples, self.activation).numpy()

    # ------------------------------------------------------------------------ features
    def adapt(self, x) -> None:
        """Learns the feature statistics and vocabularies that were not given (see
        TabularFeatures) from training inputs: a dict of columns, a DataFrame, TextExamples
        with features, or a tf.data dataset of such dicts (or of (dict, label) pairs). ``fit``
        calls it; features already known keep what they have."""
        if self.features is None or not self.features.unadapted():
            return
        if isinstance(x, tf.data.Dataset):
            columns = self._classifier_inputs().dataset_feature_columns(x, self.features.unadapted())
        else:
            columns = self._classifier_inputs().to_arrays(x, None)[0]
            if not isinstance(columns, dict):
                raise ValueError(f"this classifier takes the features "
                                 f"{', '.join(self.feature_names)}; the training inputs have none")
        self.features.adapt(columns)

    def require_feature_statistics(self) -> None:
        """ValueError naming the features whose statistics or vocabulary are not known yet."""
        unknown = [] if self.features is None else self.features.unadapted()
        if unknown:
            raise ValueError(
                f"the statistics of feature(s) {', '.join(map(repr, unknown))} are not known: "
                f"fit the classifier first (it learns them from the training data), call "
                f"adapt(training inputs), or give them, e.g. numeric_features="
                f"{{'age': {{'mean': 40.0, 'variance': 100.0}}}}, categorical_features="
                f"{{'country': {{'vocabulary': ['fr', 'us']}}}}")

    def predict_labels(self, x, batch_size: int | None = None) -> list:
        """The most probable label name (or index, without label_names) of each input; the
        score itself for regression; for a multi-label classifier, the list of labels whose
        probability is at least 0.5."""
        outputs = self.predict(x, batch_size=batch_size, verbose=0)
        if self.is_regression:
            return [float(v) for v in outputs[:, 0]]
        if self.is_multi_label:
            return [[self.label_names[i] if self.label_names else int(i)
                     for i in np.flatnonzero(row >= 0.5)] for row in outputs]
        best = np.argmax(outputs, axis=-1)
        return [self.label_names[i] if self.label_names else int(i) for i in best]

    def get_config(self) -> dict[str, Any]:
        config = {**self._base_config(), "num_classes": self.num_classes,
                  "label_names": self.label_names, "dropout": self.dropout,
                  "activation": self.activation}
        if self.features is not None:  # a text-only classifier's config is as it always was
            features = self.features.get_config()
            config.update(numeric_features=features["numeric_features"],
                          categorical_features=features["categorical_features"],
                          feature_hidden_units=self.feature_hidden_units)
        if self.pooling != "pooled":
            config["pooling"] = self.pooling
        config.update(window_combination=self.window_combination,
                      window_stride=self.window_stride)
        return config
