"""BertTask: what every fine-tuning model shares. The network is a functional model on the packed
int32 ids, so it runs under every tf.distribute strategy and on TPUs; raw text goes through the
model's preprocessor inside a tf.data pipeline that ``fit``, ``evaluate`` and ``predict`` build
from Python lists, NumPy arrays or tf.data datasets of strings (``predict`` on in-memory text
calls a traced function instead, kept between calls)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from keras_bert.checkpoints.stored_head import StoredHead
from keras_bert.models.encoder import SavesWhole, quantize_passes
from keras_bert.models.int8_calibration import calibrate_before_quantize, kept_calibration_texts
from keras_bert.recipe.batches import PackedRows, pack_examples
from keras_bert.recipe.inputs import (EXAMPLE_INDEX, int32_ids_dataset, is_packed,
                                      windows_line)
from keras_bert.recipe.fit import RECIPE, RecipeState
from keras_bert.recipe.fit import fit as recipe_fit
from keras_bert.models.task_loading import TaskLoading, tokenizer_of
from keras_bert.models.task_predict import (PackFunctions, pack_function, packed_arrays,
                                             predict_by_length)

logger = logging.getLogger(__name__)


class BertTask(TaskLoading, SavesWhole, keras.Model):
    """Base class of the task models: encoder + head as a functional model, plus a preprocessor.

    Subclasses build their functional graph, call ``super().__init__(inputs=..., outputs=...,
    encoder=..., preprocessor=...)``, and override ``to_arrays`` (raw examples -> arrays) and,
    when needed, ``pack_batch`` (a batch of raw tensors -> packed ids, in tf.data). They set
    ``head_arguments`` and ``default_seq_length`` for ``from_pretrained``, which they inherit.

    ``compile()`` without an optimizer uses BERT's: AdamW (weight decay 0.01, not on LayerNorm
    and biases), the peak rate ``config.FinetuneSettings.learning_rate`` (1e-4) with 10% linear
    warmup then linear decay to 0, clipped at global norm 1.0; the number of steps is known only
    in ``fit``, so the optimizer is made there. ``fit`` defaults to batch 32 and 3 epochs.

    Attributes:
        encoder: the BertEncoder.
        preprocessor: the layer that maps raw text to packed ids, or None (then the model takes
            packed ids only).
    """

    token_level_labels = False  # labels with a sequence axis (tagging) in bucketed batches
    # The checkpoint heads (``Head.task``) that from_pretrained takes for this class.
    checkpoint_tasks: tuple[str, ...] = ()
    uses_pooler = True  # whether the head reads the encoder's pooled output
    # Head arguments that an asked value overrides instead of disagreeing (settings without
    # weights, such as an embedding's pooling).
    overridable_head_arguments: tuple[str, ...] = ()
    # The constructor arguments that from_pretrained also takes by position, after the path and
    # before seq_length: the settings of a new head, e.g. ("num_classes",).
    head_arguments: tuple[str, ...] = ()
    # What an output with a sequence axis holds at positions past the rows it was computed for,
    # when predict (and an export's serving_default) pads a chunk's outputs back to the input's
    # length; outputs not named here get 0. A head that scores padding (SpanHead) names its score.
    sequence_padding: dict[str, float] = {}
    default_seq_length = 128  # the preprocessor's length when from_pretrained is given none
    # The `keras-bert finetune --task` that trains this model and scores and runs it in
    # `keras-bert evaluate` and `predict` (``TaskSpec.takes``); None for none.
    finetune_task: str | None = None

    def __init__(self, *, inputs, outputs, encoder, preprocessor=None,
                 distillation: dict[str, Any] | None = None, **kwargs):
        positions = encoder.bert_config.max_position_embeddings
        if preprocessor is not None and preprocessor.seq_length > positions:
            raise ValueError(f"the preprocessor packs {preprocessor.seq_length} tokens, but the "
                             f"encoder has {positions} positions (max_position_embeddings); "
                             f"use seq_length={positions} or less")
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        if encoder.dtype_policy.name in ("mixed_float16", "mixed_bfloat16"):
            # The model computes as its encoder does: compile then wraps the optimizer in a
            # LossScaleOptimizer for float16, as Keras does for a mixed_float16 model.
            self.dtype_policy = encoder.dtype_policy
        self.encoder = encoder
        self.preprocessor = preprocessor
        # A distilled student's record (keras_bert.distill): the teacher, its layers kept, the
        # temperature and label weight; None for a model trained on labels.
        self.distillation = None if distillation is None else dict(distillation)
        self.recipe = RecipeState()  # compile's recipe settings, fit's optimizer (recipe.fit)
        # A sample of the texts the model was trained on (fit, keras-bert finetune, distill;
        # saved with a "keras" checkpoint), which int8 calibrates on when no texts are given
        # (quantize, export_model(quantize="int8")); None when unknown.
        self.calibration_texts: list[str] | None = None
        self._tokenizer = None
        self._pack_functions = PackFunctions()

    @property
    def tokenizer(self):
        """The Python BertTokenizer with the preprocessor's vocabulary and casing, for tasks that
        align words or characters (built on first use)."""
        if self._tokenizer is None:
            self._tokenizer = tokenizer_of(self.preprocessor, type(self).__name__)
        return self._tokenizer

    def quantize(self, mode=None, config=None, filters=None, *, calibration_texts=None,
                 **kwargs) -> None:
        """``keras.Model.quantize``; ``"int8"`` without ``filters`` quantizes the encoder's
        ``int8_layers()`` (the head stays float32), which then run on oneDNN's int8 matmul in
        ``predict``, in ``.keras`` files and in exports (``BertEncoder``).

        ``calibration_texts``: a few hundred texts like the ones to be served (your own
        traffic, or training texts); None: the sample of its training texts the model keeps
        (``calibration_texts``, after ``fit``, ``keras-bert finetune`` or ``distill``), when
        it has one. The float32 model first runs on them and most int8
        layers get static per-channel input ranges (``models.int8_calibration``), the path a
        calibrated int8 export runs: faster than finding each row's range on every call
        (benchmarks/README.md), with the export's labels. The model stays savable
        (``save_checkpoint``, ``.keras``) and exportable."""
        if (calibration_texts is None and filters is None
                and (mode or getattr(config, "mode", None)) == "int8"):
            calibration_texts = kept_calibration_texts(self)
        if calibration_texts is not None:
            calibrate_before_quantize(self, self.preprocessor, calibration_texts, mode, config,
                                      filters, kwargs)
        quantize_passes(self, self.encoder, mode, config, filters, kwargs)

    def check_saved_arguments(self, path: str, asked: dict[str, Any]) -> dict[str, Any]:
        """For ``from_pretrained`` on this saved model: ValueError for an asked argument that
        the model does not have; returns the arguments left to compare one by one."""
        return asked

    def checkpoint_head(self) -> StoredHead | None:
        """The head as checkpoint formats name it (``save_checkpoint``): its task, labels and
        Dense layer; None for a head no format names."""
        return None

    @classmethod
    def head_arguments_of(cls, head: StoredHead) -> dict[str, Any]:
        """The constructor arguments a checkpoint's head of this class's task fixes (its size,
        names, mode), for ``from_pretrained``."""
        return {}

    # ------------------------------------------------------------------------ hooks
    def to_arrays(self, x, y=None):
        """In-memory inputs and labels as arrays with one row per model input: ``(x, y)``.

        ``fit``, ``evaluate``, ``predict`` and ``make_dataset`` call it on in-memory inputs
        (not on tf.data datasets); the tf.data pipeline (in ``predict``, a traced function)
        then packs ``x`` with the preprocessor.
        Each task model documents the forms it takes (texts, pairs, read examples...); packed
        ids pass through unchanged. One example may give several rows (the windows of a long
        text).

        Args:
            x: the task's raw inputs, or packed ids (a dict of int32 [rows, seq] arrays).
            y: labels, one per example, or None (examples that carry labels give theirs).

        Returns:
            ``(x, y)``: ``x`` as string arrays [rows] (a tuple of them for text pairs) or packed
            int32 ids [rows, seq]; ``y`` an array [rows, ...] (or a dict of them), or None.
        """
        return x, y

    def pack_batch(self, x):
        """A batch of raw inputs (string tensors) -> the encoder's packed int32 ids."""
        if self.preprocessor is None:
            raise ValueError(f"{type(self).__name__} has no preprocessor, so it takes packed ids "
                             f"only; build it with from_pretrained(...) or pass "
                             f"preprocessor=BertPreprocessor(vocab_file, ...) to accept raw text")
        return self.preprocessor(x)

    def traced_pack_batch(self, x):
        """``pack_batch`` on a batch of tensors, through a function traced once per input
        structure and kept on the model (``task_predict.pack_function``) for every later
        ``fit``, ``evaluate`` and ``predict`` call; traced again when the preprocessor or its
        vocabulary changes."""
        return pack_function(self, x)(x)

    def default_loss(self):
        raise NotImplementedError

    def default_metrics(self):
        return None

    def soft_targets(self) -> str | None:
        """How ``keras_bert.distill`` reads this model's output as a teacher's soft targets:
        "softmax" (probabilities over the last axis), "sigmoid" (independent probabilities),
        "logits" (over the last axis) or "score" (values matched by squared error); None for a
        model it cannot distil."""
        return None

    def distillation_rows(self, x, labels=None):
        """``keras_bert.distill``'s view of examples: ``(rows, y, labelled, scored)``.

        ``rows`` is ``x`` as ``to_arrays`` gives it; ``y`` the labels as ``to_arrays`` gives
        them, where ``labelled`` (bool [rows], or [rows, seq] for labels per position) is True,
        anything elsewhere (None when no row has a label); ``scored``, bool [rows, seq], the
        positions a per-position head is trained on (None: every row counts whole). This base
        version serves heads with one row per example; ``labels`` holds None for an example
        without a label."""
        rows, _ = self.to_arrays(x)
        count = len(tf.nest.flatten(rows)[0])
        labels = None if labels is None else list(labels)  # a NumPy array or pandas Series too
        if labels is not None and len(labels) != count:
            raise ValueError(f"got {count} texts but {len(labels)} labels")
        labelled = np.array([labels is not None and label is not None
                             for label in (labels or [None] * count)], bool)
        if not labelled.any():
            return rows, None, labelled, None
        index = np.flatnonzero(labelled)
        _, known = self.to_arrays(tf.nest.map_structure(lambda a: np.asarray(a)[index], rows),
                                  [labels[i] for i in index])
        y = np.zeros((count, *np.shape(known)[1:]), np.asarray(known).dtype)
        y[index] = known
        return rows, y, labelled, None

    def combine_windows(self, outputs, example_index: np.ndarray, num_examples: int):
        """One output row per example from the rows of its windows, for a model whose
        ``pack_batch`` reads a long text as several windows (``recipe.inputs.EXAMPLE_INDEX``).

        Args:
            outputs: the model's outputs on the windows, [rows, ...].
            example_index: int32 [rows], the example of each row (ascending).
            num_examples: the examples.

        Returns:
            The outputs, [num_examples, ...].
        """
        raise NotImplementedError(f"{type(self).__name__}.pack_batch read texts as windows, "
                                  f"but the model does not say how to combine them")

    def learning_rate_multipliers(self) -> dict[str, float]:
        """{variable-path pattern: factor} of layers that learn faster than the encoder (a
        freshly initialised head that fine-tuning's rate would barely move); {} by default."""
        return {}

    # ----------------------------------------------------------------------- datasets
    def make_dataset(self, x, y=None, sample_weight=None, batch_size: int | None = None,
                     shuffle: bool = False, seed: int | None = None, bucket_lengths=None,
                     drop_remainder: bool = False, epoch: int | None = None) -> tf.data.Dataset:
        """A tf.data pipeline of packed batches from raw examples, arrays or a dataset.

        In-memory examples are packed once (raw text through the preprocessor); each pass
        over the dataset then yields one epoch of batches (passes 0, 1, 2, ...; see
        ``keras_bert.recipe.batches``). A tf.data dataset runs as it is batched (raw
        inputs are packed batch by batch). ``fit`` builds its training data with
        ``keras_bert.recipe.plan.FinetuningPlan`` instead.

        Args:
            x: raw examples (as the subclass documents), packed id arrays, or a batched
                tf.data.Dataset of ``x`` or ``(x, y[, sample_weight])`` (raw or packed).
            y, sample_weight: labels and weights for in-memory ``x``.
            batch_size: examples per batch (32).
            shuffle: shuffle the rows and the batch order of every epoch.
            seed: the shuffling seed; epoch e's batches are a function of (seed, e) (None: one
                drawn from NumPy's global generator, which ``keras.utils.set_random_seed``
                fixes).
            bucket_lengths: None (the default here) pads every batch to the preprocessor's
                seq_length and keeps the rows in order unless shuffled, as ``predict`` on the
                dataset needs; ``"auto"`` (``fit``'s and ``evaluate``'s default) or a list of
                lengths groups rows of similar length, each batch padded to one of them.
            drop_remainder: only full batches (other rows left out each epoch).
            epoch: every pass yields this epoch's batches (for custom loops); None: the passes
                are epochs 0, 1, 2, ...
        """
        if isinstance(x, tf.data.Dataset):
            spec = x.element_spec
            if is_packed(spec[0] if isinstance(spec, tuple) else spec):
                return int32_ids_dataset(x)
            return x.map(self._pack_dataset_element, num_parallel_calls=tf.data.AUTOTUNE)
        x, y = self.to_arrays(x, y)
        data = (x,) if y is None else ((x, y) if sample_weight is None else (x, y, sample_weight))
        return PackedRows(data, self.traced_pack_batch, batch_size or RECIPE.batch_size,
                          bucket_lengths=bucket_lengths, shuffle=shuffle, seed=seed,
                          drop_remainder=drop_remainder,
                          token_level_labels=self.token_level_labels).dataset(epoch)

    def _pack_dataset_element(self, x, *rest):
        """A dataset's batch ``(x[, y[, sample_weight]])`` packed; where ``pack_batch`` reads long
        texts as windows, each window is a row with its text's labels and weights."""
        packed = dict(self.pack_batch(x))
        example_index = packed.pop(EXAMPLE_INDEX, None)
        if example_index is not None:
            rest = tuple(tf.nest.map_structure(lambda t: tf.gather(t, example_index), part)
                         for part in rest)
        return (packed, *rest) if rest else packed

    def adapt(self, x) -> None:
        """Learns what the model takes from its training examples before ``fit`` trains on
        them (a classifier's feature statistics); nothing by default."""

    def sample_texts(self, x, count: int, seed: int | None = None) -> list[str] | None:
        """Up to ``count`` texts of ``x`` (``to_arrays``' output), drawn with ``seed``: its
        texts (a pair's two texts joined by a space), or its packed ids read back as text
        (``BertTokenizer.decode``); None when ``x`` holds neither (the recipe keeps them as
        ``calibration_texts``)."""
        if isinstance(x, dict) and not is_packed(x):  # a classifier's {text, features}
            x = tuple(x[name] for name in ("text", "text_pair") if name in x) or None
        if x is None:
            return None
        if is_packed(x):
            rows = np.asarray(x["input_word_ids"])
            rows = rows.reshape(-1, rows.shape[-1])  # multiple choice: a row per choice
        else:
            columns = x if isinstance(x, tuple) else (x,)
            rows = np.asarray(columns[0], dtype=object).reshape(-1)
            if len(columns) > 1:
                rows = np.array([" ".join(map(str, pair)) for pair in zip(*columns)],
                                dtype=object)
        chosen = np.random.default_rng(seed).permutation(len(rows))[:count]
        if is_packed(x):
            if self.preprocessor is None:
                return None
            return [self.tokenizer.decode(rows[i]) for i in sorted(chosen)]
        return [str(rows[i]) for i in sorted(chosen)]

    # ----------------------------------------------------------------------- Keras API
    def compile(self, optimizer: Any = "auto", loss: Any = "auto", metrics: Any = "auto",
                learning_rate: float = RECIPE.learning_rate,
                weight_decay: float = RECIPE.weight_decay,
                warmup_fraction: float = RECIPE.warmup_fraction, **kwargs):
        """``keras.Model.compile`` with BERT's defaults ("auto"): the task's loss and metrics,
        and AdamW with ``learning_rate``, warmup over ``warmup_fraction`` of the steps then
        linear decay, made in ``fit`` once the number of steps is known
        (``keras_bert.recipe``). Every later ``fit`` goes on with the same
        optimizer (its state carries over) on a schedule of its own, from warmup to 0 at its
        last step; an optimizer given here is used as it is."""
        compile_arguments = dict(
            loss=self.default_loss() if loss == "auto" else loss,
            metrics=self.default_metrics() if metrics == "auto" else metrics, **kwargs)
        self.recipe = RecipeState(compile_arguments=compile_arguments)
        if optimizer == "auto":
            self.recipe.settings = dict(learning_rate=learning_rate, weight_decay=weight_decay,
                                        warmup_fraction=warmup_fraction)
            optimizer = keras.optimizers.AdamW(learning_rate)  # replaced in fit
        super().compile(optimizer=optimizer, **compile_arguments)

    def get_compile_config(self):
        if self.recipe.settings is None or not self.compiled:
            # Not the recipe's, or saved as uncompiled (save_checkpoint keeps no training state).
            return super().get_compile_config()
        if self.recipe.optimizer is None:
            # An "auto" optimizer that fit has not made yet is a placeholder: save no compile
            # state.
            return None
        # The recipe's optimizer, with its settings: a loaded model's next fit goes on with it
        # on a schedule of its own, as it would have before saving.
        return {**super().get_compile_config(), "recipe": self.recipe.settings}

    def compile_from_config(self, config):
        # Keras skips compile on load for models that override compile(); ours takes the same
        # arguments as keras.Model.compile, so the saved configuration applies as it is.
        config = dict(config)
        recipe = config.pop("recipe", None)
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if recipe is not None:
            self.recipe.settings, self.recipe.optimizer = dict(recipe), self.optimizer
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def fit(self, x=None, y=None, batch_size: int | None = None,
            epochs: int = RECIPE.epochs, verbose: str | int = "auto", callbacks=None,
            validation_split: float = 0.0, validation_data=None, shuffle: bool = True,
            class_weight: dict | None = None, sample_weight=None, initial_epoch: int = 0,
            steps_per_epoch: int | None = None, validation_steps: int | None = None,
            validation_batch_size: int | None = None, validation_freq: int = 1, *,
            bucket_lengths: Sequence[int] | str | None = RECIPE.bucket_lengths,
            seed: int | None = None):
        """``keras.Model.fit`` that also takes raw examples and defaults to BERT's batch 32 and
        3 epochs.

        In-memory examples (raw text, pairs, read examples, feature columns, packed ids) are
        tokenized once, then grouped by length: each batch is padded only to the smallest of a
        few bucket lengths that holds its longest row (``bucket_lengths="auto"``: at most 8
        multiples of 8, chosen from the data's lengths to pad least; a list: those; None: every
        batch padded to seq_length, as ``keras.Model.fit`` on packed ids). Every epoch the rows
        are shuffled, ordered by bucket within windows of 50 batches (shuffled within a
        bucket), cut into batches, and the batches shuffled; where the lengths are too alike
        for that to pad at least 20% less, the shuffled rows are batched as they come, each
        batch still padded to its bucket. An epoch has ``ceil(rows / batch_size)`` batches
        either way, and epoch e's batches are a function of (``seed``, e) alone, so a fit
        resumed by ``keras.callbacks.BackupAndRestore`` at epoch e reads the batches an
        uninterrupted one would (give ``seed``; None draws one from NumPy's global generator).
        Under TPUStrategy only full batches are used. A tf.data dataset runs as it is batched.
        ``fit`` hands the model to the recipe (``keras_bert.recipe.fit``): the optimizer made
        from ``compile``'s settings once the number of steps is known, the epoch's data
        (``keras_bert.recipe.plan.FinetuningPlan``). A second ``fit`` trains on: the same
        optimizer goes on, on a schedule of its own.

        ``validation_data`` is ``(x, y)``, labelled examples or a dataset, grouped by length
        the same way without shuffling. ``validation_split`` holds out the last share of the
        in-memory rows (before shuffling), as Keras does. ``shuffle=False`` keeps the rows in
        their order within each bucket, and the same batches every epoch.
        """
        return recipe_fit(self, x, y, batch_size=batch_size, epochs=epochs, verbose=verbose,
                          callbacks=callbacks, validation_split=validation_split,
                          validation_data=validation_data, shuffle=shuffle,
                          class_weight=class_weight, sample_weight=sample_weight,
                          initial_epoch=initial_epoch, steps_per_epoch=steps_per_epoch,
                          validation_steps=validation_steps,
                          validation_batch_size=validation_batch_size,
                          validation_freq=validation_freq, bucket_lengths=bucket_lengths,
                          seed=seed)

    def evaluate(self, x=None, y=None, batch_size: int | None = None, verbose: str | int = "auto",
                 sample_weight=None, steps: int | None = None, callbacks=None,
                 return_dict: bool = False, *,
                 bucket_lengths: Sequence[int] | str | None = RECIPE.bucket_lengths, **kwargs):
        """``keras.Model.evaluate`` that also takes raw examples, grouped by length as in
        ``fit`` (ordered by bucket, not shuffled; the scores do not depend on the order).
        ``kwargs`` are Keras' own (``fit`` passes its validation data here).

        Where the model reads long texts as windows (a classifier), in-memory examples are
        scored one per text, on the combined windows ``predict`` returns (the loss and the
        metrics over all the texts at once; ``steps`` and ``callbacks`` do not apply then); a
        tf.data dataset is scored per window."""
        if isinstance(x, tf.data.Dataset):
            dataset = self.make_dataset(x, y, sample_weight, batch_size,
                                        bucket_lengths=bucket_lengths)
            return super().evaluate(dataset, verbose=verbose, steps=steps, callbacks=callbacks,
                                    return_dict=return_dict, **kwargs)
        x, y = self.to_arrays(x, y)
        packed = pack_examples(x, self.traced_pack_batch)
        example_index = packed.pop(EXAMPLE_INDEX, None)
        if example_index is not None and len(example_index) > example_index[-1] + 1:
            return self._evaluate_texts(packed, example_index, y, sample_weight,
                                        batch_size or RECIPE.batch_size, verbose, return_dict)
        data = (packed,) if y is None else (
            (packed, y) if sample_weight is None else (packed, y, sample_weight))
        dataset = PackedRows(data, self.traced_pack_batch, batch_size or RECIPE.batch_size,
                             bucket_lengths=bucket_lengths,
                             token_level_labels=self.token_level_labels).dataset()
        return super().evaluate(dataset, verbose=verbose, steps=steps, callbacks=callbacks,
                                return_dict=return_dict, **kwargs)

    def _evaluate_texts(self, packed: dict, example_index: np.ndarray, y, sample_weight,
                        batch_size: int, verbose, return_dict: bool):
        """``evaluate`` of examples read as windows: the compiled loss and metrics on the
        combined outputs, one row per example."""
        if not self.compiled:
            raise ValueError(f"{type(self).__name__} must be compiled before evaluate: call "
                             f"compile() (BERT's loss and metrics by default)")
        if y is None:
            raise ValueError("evaluate needs labels: pass y, or examples that carry them")
        logger.info("%s", windows_line(example_index))
        outputs = self.combine_windows(predict_by_length(self, packed, batch_size, verbose),
                                       example_index, int(example_index[-1]) + 1)
        weight = None if sample_weight is None else tf.constant(np.asarray(sample_weight))
        y, outputs = keras.tree.map_structure(tf.constant, y), tf.constant(outputs)
        self.reset_metrics()
        loss = self.compute_loss(y=y, y_pred=outputs, sample_weight=weight, training=False)
        metrics = self.compute_metrics(None, y, outputs, weight)
        logs = {"loss": float(loss), **{name: float(value) for name, value in metrics.items()
                                        if name != "loss"}}
        if return_dict:
            return logs
        return logs["loss"] if len(logs) == 1 else list(logs.values())

    def predict(self, x, batch_size: int | None = None, verbose: str | int = "auto",
                steps: int | None = None, callbacks=None):
        """``keras.Model.predict`` that also takes raw examples (a Python list works).

        In-memory inputs (raw examples, or packed id arrays) are grouped by length: the rows are
        sorted by their number of tokens, each batch is padded only to its longest row, and the
        results come back in the caller's order. Text is tokenized by a traced function kept
        for the next call, and an input of at most ``batch_size`` rows runs in chunks of 8
        sorted rows, as the exported signatures run a request, so a call on a few texts costs
        about what the export costs. The outputs equal those of padding every row to
        seq_length at every text position; outputs with a sequence axis come back
        [rows, seq_length, ...] (positions past a row's text, where ``input_mask`` is 0, hold
        no prediction). Where the model reads a text longer than seq_length as windows (a
        classifier), the windows are rows like any others (batches count windows, not texts)
        and come back combined, one row per text (``combine_windows``). A tf.data dataset, or
        ``steps``/``callbacks``, runs through ``keras.Model.predict`` on the batched dataset
        (one row per window).
        """
        if isinstance(x, tf.data.Dataset) or steps is not None or callbacks:
            return super().predict(self.make_dataset(x, batch_size=batch_size),
                                   verbose=verbose, steps=steps, callbacks=callbacks)
        packed = packed_arrays(self, x)
        example_index = packed.pop(EXAMPLE_INDEX, None)
        outputs = predict_by_length(self, packed, batch_size or RECIPE.batch_size, verbose)
        if example_index is None or len(example_index) == example_index[-1] + 1:
            return outputs  # every text one window: the outputs as they are
        logger.info("%s", windows_line(example_index))
        return self.combine_windows(outputs, example_index, int(example_index[-1]) + 1)

    # ----------------------------------------------------------------------- config
    def _base_config(self) -> dict[str, Any]:
        config = {"name": self.name, "trainable": self.trainable,
                  "encoder": keras.saving.serialize_keras_object(self.encoder),
                  "preprocessor": None if self.preprocessor is None
                  else keras.saving.serialize_keras_object(self.preprocessor)}
        if self.distillation is not None:
            config["distillation"] = json.loads(json.dumps(self.distillation))
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        if config.get("preprocessor") is not None:
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(**config)

