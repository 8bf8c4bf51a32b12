"""BertClassifier: BERT fine-tuned to classify single texts or text pairs into K classes, or to
score them (regression, STS-B style), from the pooled [CLS] vector."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np

from keras_bert.data.task_examples import DataError, TextExample, encode_label
from keras_bert.layers.task_heads import ClassificationHead
from keras_bert.models.encoder import INPUT_NAMES, BertEncoder
from keras_bert.models.task import BertTask, as_string_array, is_text_arrays


@keras.saving.register_keras_serializable(package="keras_bert")
class BertClassifier(BertTask):
    """BERT with a K-way softmax layer on the pooled [CLS] output (K=1: a regression score).

    Args:
        encoder: a BertEncoder (all of its layers are fine-tuned).
        num_classes: K; 1 for regression.
        preprocessor: a BertPreprocessor for raw text, or None (packed ids only).
        label_names: the K class names, saved with the model; ``fit`` accepts them as labels
            and ``predict_labels`` returns them.
        dropout: dropout on the pooled output (0.1).
        activation: "softmax" (default for K > 1: outputs are probabilities), None (logits;
            the default for regression) or another Keras activation.

    Inputs: packed ids (the encoder's dict of int32 [batch, seq]); ``fit``, ``evaluate`` and
    ``predict`` also take raw text: a list of strings, a list of (text, text_pair) pairs, or a
    list of TextExample (whose labels are used when ``y`` is not given).

    Outputs: float32 [batch, num_classes]: probabilities (softmax), logits or scores.

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

    def __init__(self, encoder: BertEncoder, num_classes: int = 2, preprocessor=None,
                 label_names: Sequence[str] | None = None, dropout: float = 0.1,
                 activation: str | None = "auto", **kwargs):
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1 (1 for regression), got {num_classes}")
        if label_names is not None and len(label_names) != num_classes:
            raise ValueError(f"got {len(label_names)} label_names for num_classes={num_classes}")
        if activation == "auto":
            activation = "softmax" if num_classes > 1 else None
        # === Layers ===
        head = ClassificationHead(num_classes, dropout, encoder.bert_config.initializer_range,
                                  dtype=encoder.dtype_policy, name="classifier")
        output_activation = (keras.layers.Activation(activation, dtype="float32",
                                                     name="probabilities")
                             if activation else None)
        # === Functional model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUT_NAMES}
        outputs = head(encoder(inputs)["pooled_output"])
        if output_activation is not None:
            outputs = output_activation(outputs)
        super().__init__(inputs=inputs, outputs=outputs, encoder=encoder,
                         preprocessor=preprocessor, **kwargs)
        # === Config ===
        self.head = head
        self.num_classes = num_classes
        self.label_names = None if label_names is None else [str(n) for n in label_names]
        self.dropout = dropout
        self.activation = activation

    @property
    def is_regression(self) -> bool:
        return self.num_classes == 1

    @classmethod
    def from_pretrained(cls, path: str, num_classes: int = 2, seq_length: int = 128,
                        **kwargs) -> "BertClassifier":
        """A classifier on the encoder at ``path`` (Google, Hugging Face or keras-bert) with a
        fresh head and a BertPreprocessor from the checkpoint's vocab.txt; or, when ``path``
        holds a saved BertClassifier, that classifier."""
        from keras_bert.models.pretrained import load_task_parts
        saved, encoder, preprocessor = load_task_parts(cls, path, seq_length,
                                                       dtype=kwargs.pop("dtype", None))
        return saved if saved is not None else cls(encoder, num_classes,
                                                   preprocessor=preprocessor, **kwargs)

    # ------------------------------------------------------------------------ task hooks
    def default_loss(self):
        if self.is_regression:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=self.activation is None)

    def default_metrics(self):
        if self.is_regression:
            return [keras.metrics.MeanSquaredError(name="mse")]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def _to_arrays(self, x, y=None):
        if isinstance(x, dict) or is_text_arrays(x):
            inputs = x
        else:
            x = [x] if isinstance(x, str) else list(x)
            if x and isinstance(x[0], TextExample):
                if y is None and x[0].label is not None:
                    y = self._encode_example_labels(x)
                texts, pairs = [e.text for e in x], [e.text_pair for e in x]
                x = texts if pairs[0] is None else list(zip(texts, pairs))
            if x and isinstance(x[0], (tuple, list)):
                if any(len(pair) != 2 for pair in x):
                    raise ValueError("text pairs must be (text, text_pair) tuples of two strings")
                inputs = (as_string_array([p[0] for p in x], "text"),
                          as_string_array([p[1] for p in x], "text_pair"))
            else:
                inputs = as_string_array(x, "text")
        return inputs, (None if y is None else self._encode_labels(y))

    def _encode_example_labels(self, examples: Sequence[TextExample]) -> np.ndarray:
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

    def _encode_labels(self, y) -> np.ndarray:
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

    def _preprocess(self, x):
        return super()._preprocess(list(x) if isinstance(x, tuple) else x)

    def predict_labels(self, x, batch_size: int | None = None) -> list:
        """The most probable label name (or index, without label_names) of each input; the
        score itself for regression."""
        outputs = self.predict(x, batch_size=batch_size, verbose=0)
        if self.is_regression:
            return [float(v) for v in outputs[:, 0]]
        best = np.argmax(outputs, axis=-1)
        return [self.label_names[i] if self.label_names else int(i) for i in best]

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "num_classes": self.num_classes,
                "label_names": self.label_names, "dropout": self.dropout,
                "activation": self.activation}
