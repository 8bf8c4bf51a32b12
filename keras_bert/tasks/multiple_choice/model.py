"""BertMultipleChoice: BERT fine-tuned to pick the right continuation among N (SWAG): each
(context, choice) pair is encoded on its own, scored from its pooled [CLS] vector, and the N scores
go through a softmax, as in BERT's paper."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from keras_bert.tasks.input_examples import MultipleChoiceExample
from keras_bert.checkpoints.stored_head import StoredHead
from keras_bert.layers.task_heads import ClassificationHead
from keras_bert.models.encoder import BertEncoder
from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.export.saved_model import ExportsRawText
from keras_bert.models.task import BertTask
from keras_bert.recipe.inputs import as_string_array, is_text_arrays


@keras.saving.register_keras_serializable(package="keras_bert")
class BertMultipleChoice(ExportsRawText, BertTask):
    """BERT with a vector V: choice i scores ``V . pooled(context, choice_i)``, softmax over i.

    Args:
        encoder: a BertEncoder.
        num_choices: N, the number of choices per example (4 for SWAG).
        preprocessor: a BertPreprocessor for raw text, or None (packed ids only).
        dropout: dropout on the pooled output (0.1).

    Inputs: packed ids, each int32 [batch, num_choices, seq]; ``fit``/``evaluate``/``predict``
    also take MultipleChoiceExamples or (context, [choice, ...]) pairs.

    Outputs: float32 probabilities [batch, num_choices].

    ``from_pretrained(path, num_choices=4, seq_length=128, **kwargs)`` builds one on a
    checkpoint's encoder, or loads a saved one (see ``BertTask.from_pretrained``).

    Example:
    >>> import numpy as np
    >>> encoder = BertEncoder(vocab_size=50, hidden_size=16, num_hidden_layers=1,
    ...                       num_attention_heads=2, intermediate_size=32)
    >>> model = BertMultipleChoice(encoder, num_choices=3)
    >>> ids = np.tile(np.array([[[2, 7, 3, 8, 3]]], "int32"), (2, 3, 1))
    >>> model.predict({"input_word_ids": ids, "input_mask": np.ones_like(ids),
    ...                "input_type_ids": np.zeros_like(ids)}, verbose=0).shape
    (2, 3)
    """

    head_arguments = ("num_choices",)
    checkpoint_tasks = ("multiple_choice",)
    finetune_task = "multiple-choice"

    def __init__(self, encoder: BertEncoder, num_choices: int = 4, preprocessor=None,
                 dropout: float = 0.1, **kwargs):
        if num_choices < 2:
            raise ValueError(f"num_choices must be at least 2, got {num_choices}")
        # === Layers ===
        flatten = keras.layers.Lambda(
            lambda x: ops.reshape(x, (-1, ops.shape(x)[-1])), name="flatten_choices")
        head = ClassificationHead(1, dropout, encoder.bert_config.initializer_range,
                                  dtype=encoder.dtype_policy, name="choice_score")
        unflatten = keras.layers.Lambda(lambda x: ops.reshape(x, (-1, num_choices)),
                                        dtype="float32", name="choice_logits")
        softmax = keras.layers.Softmax(dtype="float32", name="probabilities")
        # === Functional model ===
        inputs = {name: keras.Input(shape=(num_choices, None), dtype="int32", name=name)
                  for name in INPUT_NAMES}
        pooled = encoder({name: flatten(inputs[name]) for name in INPUT_NAMES})["pooled_output"]
        outputs = softmax(unflatten(head(pooled)))
        super().__init__(inputs=inputs, outputs=outputs, encoder=encoder,
                         preprocessor=preprocessor, **kwargs)
        # === Config ===
        self.head = head
        self.num_choices = num_choices
        self.dropout = dropout

    def checkpoint_head(self) -> StoredHead:
        """BertForMultipleChoice's head: one score per (context, choice) from the pooled
        output."""
        return StoredHead("multiple_choice", "a BertMultipleChoice", layer=self.head.dense)

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy()

    def soft_targets(self) -> str:
        return "softmax"

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def to_arrays(self, x, y=None):
        """Examples as text arrays, one row per example (see ``BertTask.to_arrays``).

        Args:
            x: MultipleChoiceExamples (their labels serve when ``y`` is None) or (context,
                [choice, ...]) pairs with ``num_choices`` choices each; or packed ids.
            y: the index of the right choice of each example.

        Returns:
            ``(x, y)``: ``(contexts, choices)``, str arrays [rows] and [rows, num_choices]
            (packed ids stay int32 [rows, num_choices, seq]), and int32 [rows] or None.
        """
        if isinstance(x, dict) or is_text_arrays(x):
            return x, (None if y is None else np.asarray(y, dtype=np.int32))
        items = list(x)
        if items and isinstance(items[0], MultipleChoiceExample):
            if y is None and items[0].label is not None:
                y = [e.label for e in items]
            items = [(e.context, e.choices) for e in items]
        bad = [i for i, (_, choices) in enumerate(items) if len(choices) != self.num_choices]
        if bad:
            raise ValueError(f"example {bad[0]} has {len(items[bad[0]][1])} choices; this model "
                             f"takes {self.num_choices}")
        contexts = as_string_array([context for context, _ in items], "context")
        choices = as_string_array([c for _, cs in items for c in cs], "choice").reshape(
            len(items), self.num_choices)
        return (contexts, choices), (None if y is None else np.asarray(y, dtype=np.int32))

    def pack_batch(self, x):
        contexts, choices = x
        packed = super().pack_batch(
            [tf.repeat(contexts, self.num_choices), tf.reshape(choices, [-1])])
        return {name: tf.reshape(value, [-1, self.num_choices, tf.shape(value)[-1]])
                for name, value in packed.items()}

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "num_choices": self.num_choices,
                "dropout": self.dropout}
