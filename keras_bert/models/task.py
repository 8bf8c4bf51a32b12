"""BertTask: what every fine-tuning model shares. The network is a functional model on the packed
int32 ids, so it runs under every tf.distribute strategy and on TPUs; raw text goes through the
model's preprocessor inside a tf.data pipeline that ``fit``, ``evaluate`` and ``predict`` build
from Python lists, NumPy arrays or tf.data datasets of strings (``predict`` on in-memory text
calls a traced function instead, kept between calls)."""

from __future__ import annotations

import inspect
import logging
import warnings
from typing import Any, Self

import keras
import numpy as np
import tensorflow as tf

from keras_bert.models.encoder import RefusesCalibratedSave, quantization_filters
from keras_bert.models.task_pipeline import (EpochCounter, SetDataEpoch, is_packed,
                                             make_task_dataset)
from keras_bert.models.task_predict import PackFunctions, packed_arrays, predict_by_length

logger = logging.getLogger(__name__)

# BERT's fine-tuning recipe (Devlin et al., 2018, section 4 and appendix A.3).
DEFAULT_LEARNING_RATE = 3e-5
DEFAULT_BATCH_SIZE = 32
DEFAULT_EPOCHS = 3
DEFAULT_WARMUP_FRACTION = 0.1
DEFAULT_WEIGHT_DECAY = 0.01


class BertTask(RefusesCalibratedSave, keras.Model):
    """Base class of the task models: encoder + head as a functional model, plus a preprocessor.

    Subclasses build their functional graph, call ``super().__init__(inputs=..., outputs=...,
    encoder=..., preprocessor=...)``, and override ``to_arrays`` (raw examples -> arrays) and,
    when needed, ``_preprocess`` (a batch of raw tensors -> packed ids, in tf.data). They set
    ``head_arguments`` and ``default_seq_length`` for ``from_pretrained``, which they inherit.

    ``compile()`` without an optimizer uses BERT's: AdamW (weight decay 0.01, not on LayerNorm
    and biases), lr 3e-5 with 10% linear warmup then linear decay to 0, clipped at global norm
    1.0; the number of steps is known only in ``fit``, so the optimizer is made there.
    ``fit`` defaults to batch 32 and 3 epochs.

    Attributes:
        encoder: the BertEncoder.
        preprocessor: the layer that maps raw text to packed ids, or None (then the model takes
            packed ids only).
    """

    token_level_labels = False  # labels with a sequence axis (tagging) in bucketed batches
    # The constructor arguments that from_pretrained also takes by position, after the path and
    # before seq_length: the settings of a new head, e.g. ("num_classes",).
    head_arguments: tuple[str, ...] = ()
    # What an output with a sequence axis holds at positions past the rows it was computed for,
    # when predict (and an export's serving_default) pads a chunk's outputs back to the input's
    # length; outputs not named here get 0. A head that scores padding (SpanHead) names its score.
    sequence_padding: dict[str, float] = {}
    default_seq_length = 128  # the preprocessor's length when from_pretrained is given none

    def __init__(self, *, inputs, outputs, encoder, preprocessor=None, **kwargs):
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.encoder = encoder
        self.preprocessor = preprocessor
        self._auto_optimizer: dict | None = None
        self._compile_kwargs: dict = {}
        self._tokenizer = None
        self._pack_functions = PackFunctions()

    @property
    def tokenizer(self):
        """The Python BertTokenizer with the preprocessor's vocabulary and casing, for tasks that
        align words or characters (built on first use)."""
        if self._tokenizer is None:
            from keras_bert.models.pretrained import tokenizer_of
            self._tokenizer = tokenizer_of(self.preprocessor, type(self).__name__)
        return self._tokenizer

    def quantize(self, mode=None, config=None, filters=None, **kwargs) -> None:
        """``keras.Model.quantize``; ``"int8"`` without ``filters`` quantizes the encoder's
        ``int8_layers()`` (the head stays float32), which then run on oneDNN's int8 matmul in
        ``predict``, in ``.keras`` files and in exports (``BertEncoder``)."""
        super().quantize(mode, config=config,
                         filters=quantization_filters(self.encoder, mode, config, filters),
                         **kwargs)

    def save_to_preset(self, directory: str, overwrite: bool = False) -> str:
        """Saves the task model (head, encoder, preprocessor and its vocab.txt) as a preset
        directory that this class's ``from_pretrained``, ``keras-bert export`` and
        ``keras_bert.models.checkpoint_io.load_model`` read back whole."""
        from keras_bert.models.checkpoint_io import save_preset
        return save_preset(self, directory, overwrite=overwrite)

    @classmethod
    def from_pretrained(cls, path: str, *args, **kwargs) -> Self:
        """A task model with a new head on the encoder at ``path``, or the task model saved there.

        ``path`` is a Google TF1, Hugging Face or keras-bert checkpoint (a directory or a
        preset): its encoder is loaded and a BertPreprocessor is built from the vocab.txt beside
        it (without one, a warning, and the model takes packed ids only). The other arguments
        go to the constructor: by position the class's ``head_arguments`` then ``seq_length``
        (``BertClassifier.from_pretrained(path, 3, 64)``), by keyword any constructor argument.
        A head argument left None takes the constructor's default.

        When ``path`` holds a saved model of this class (``save_to_preset``, or a fine-tuning
        run's ``best_model``), that model is returned as it is; an argument that would change
        it is a ValueError naming it.

        Args:
            path: the checkpoint directory or preset.
            seq_length: the preprocessor's packed length (None: ``default_seq_length``).
            lower_case: overrides the checkpoint's casing (None: read from the checkpoint).
            dtype: the encoder's dtype policy when it is built from a checkpoint.
        """
        from keras_bert.models.pretrained import load_task_parts
        positional = (*cls.head_arguments, "seq_length")
        if len(args) > len(positional):
            raise TypeError(f"{cls.__name__}.from_pretrained takes the path and at most "
                            f"{len(positional)} more positional arguments "
                            f"({', '.join(positional)}); got {len(args) + 1}")
        for name, value in zip(positional, args):
            if name in kwargs:
                raise TypeError(f"{cls.__name__}.from_pretrained got multiple values for "
                                f"argument {name!r}")
            kwargs[name] = value
        asked = {name: kwargs.pop(name, None) for name in (*positional, "lower_case")}
        dtype = kwargs.pop("dtype", None)
        asked.update(kwargs)
        saved, encoder, preprocessor = load_task_parts(
            cls, path, asked["seq_length"] or cls.default_seq_length, dtype=dtype,
            lower_case=asked["lower_case"])
        if saved is not None:
            saved._keep_saved(path, asked)
            return saved
        required = inspect.signature(cls.__init__).parameters
        for name in cls.head_arguments:
            if asked[name] is None and required[name].default is inspect.Parameter.empty:
                raise ValueError(f"{name} is required for a new {cls.__name__} ({path!r} holds "
                                 f"no saved one)")
        arguments = {name: value for name, value in asked.items()
                     if name not in ("seq_length", "lower_case")
                     and not (name in cls.head_arguments and value is None)}
        return cls(encoder, preprocessor=preprocessor, **arguments)

    def _keep_saved(self, path: str, asked: dict[str, Any]) -> None:
        """ValueError naming each of ``from_pretrained``'s arguments (``asked``; None asks for
        nothing) that this saved model, loaded from ``path``, does not have."""
        from keras_bert.models.pretrained import keep_saved
        keep_saved(self, path, **asked)

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

    def _preprocess(self, x):
        """A batch of raw inputs (string tensors) -> the encoder's packed int32 ids."""
        if self.preprocessor is None:
            raise ValueError(f"{type(self).__name__} has no preprocessor, so it takes packed ids "
                             f"only; build it with from_pretrained(...) or pass "
                             f"preprocessor=BertPreprocessor(vocab_file, ...) to accept raw text")
        return self.preprocessor(x)

    def default_loss(self):
        raise NotImplementedError

    def default_metrics(self):
        return None

    def learning_rate_multipliers(self) -> dict[str, float]:
        """{variable-path pattern: factor} of layers that learn faster than the encoder (a
        freshly initialised head that fine-tuning's rate would barely move); {} by default."""
        return {}

    # ----------------------------------------------------------------------- datasets
    def make_dataset(self, x, y=None, sample_weight=None, batch_size: int | None = None,
                     shuffle: bool = False, seed: int | None = None, bucket_lengths=None,
                     drop_remainder: bool = False, epoch: int | EpochCounter | None = None
                     ) -> tf.data.Dataset:
        """A tf.data pipeline of packed batches from raw examples, arrays or a dataset.

        In-memory examples are packed once (raw text through the preprocessor), then each pass
        over the dataset yields one epoch of batches (see ``keras_bert.models.task_pipeline``).
        A tf.data dataset runs as it is batched (raw inputs are packed batch by batch).

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
            epoch: every pass yields this epoch's batches (an int, for custom loops), or the
                epoch an ``EpochCounter`` holds when the pass starts (what ``fit`` passes);
                None: the passes are epochs 0, 1, 2, ...
        """
        if isinstance(x, tf.data.Dataset):
            spec = x.element_spec
            if is_packed(spec[0] if isinstance(spec, tuple) else spec):
                return x
            return x.map(lambda *e: (self._preprocess(e[0]), *e[1:]) if len(e) > 1
                         else self._preprocess(e[0]), num_parallel_calls=tf.data.AUTOTUNE)
        x, y = self.to_arrays(x, y)
        data = (x,) if y is None else ((x, y) if sample_weight is None else (x, y, sample_weight))
        return make_task_dataset(data, self._preprocess, batch_size or DEFAULT_BATCH_SIZE,
                                 shuffle=shuffle, seed=seed, bucket_lengths=bucket_lengths,
                                 token_level_labels=self.token_level_labels,
                                 drop_remainder=drop_remainder, epoch=epoch)

    def _validation(self, validation_data, batch_size):
        if validation_data is None:
            return None
        if not isinstance(validation_data, tuple):
            validation_data = (validation_data,)
        return self.make_dataset(*validation_data, batch_size=batch_size,
                                 bucket_lengths="auto")

    # ----------------------------------------------------------------------- Keras API
    def compile(self, optimizer: Any = "auto", loss: Any = "auto", metrics: Any = "auto",
                learning_rate: float = DEFAULT_LEARNING_RATE,
                weight_decay: float = DEFAULT_WEIGHT_DECAY,
                warmup_fraction: float = DEFAULT_WARMUP_FRACTION, **kwargs):
        """``keras.Model.compile`` with BERT's defaults ("auto"): the task's loss and metrics,
        and AdamW with ``learning_rate``, warmup over ``warmup_fraction`` of the steps then
        linear decay, made in ``fit`` once the number of steps is known."""
        self._compile_kwargs = dict(
            loss=self.default_loss() if loss == "auto" else loss,
            metrics=self.default_metrics() if metrics == "auto" else metrics, **kwargs)
        self._auto_optimizer = None
        if optimizer == "auto":
            self._auto_optimizer = dict(learning_rate=learning_rate, weight_decay=weight_decay,
                                        warmup_fraction=warmup_fraction)
            optimizer = keras.optimizers.AdamW(learning_rate)  # replaced in fit
        super().compile(optimizer=optimizer, **self._compile_kwargs)

    def get_compile_config(self):
        # An "auto" optimizer that fit has not made yet is a placeholder: save no compile state.
        return None if self._auto_optimizer is not None else super().get_compile_config()

    def compile_from_config(self, config):
        # Keras skips compile on load for models that override compile(); ours takes the same
        # arguments as keras.Model.compile, so the saved configuration applies as it is.
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def _make_auto_optimizer(self, steps_per_epoch: int, epochs: int) -> None:
        from keras_bert.optimization.optimizers import create_optimizer
        total = max(int(steps_per_epoch) * int(epochs), 1)
        settings = self._auto_optimizer
        optimizer = create_optimizer(
            settings["learning_rate"], num_train_steps=total,
            num_warmup_steps=int(total * settings["warmup_fraction"]),
            weight_decay=settings["weight_decay"],
            learning_rate_multipliers=self.learning_rate_multipliers())
        logger.info("AdamW: lr %g, %d steps, %d warmup", settings["learning_rate"], total,
                    int(total * settings["warmup_fraction"]))
        with self.distribute_strategy.scope():
            super().compile(optimizer=optimizer, **self._compile_kwargs)
            # Built here, the train step creates no variables, so tf.function traces it once.
            optimizer.build(self.trainable_variables)
        self._auto_optimizer = None

    def fit(self, x=None, y=None, batch_size: int | None = None, epochs: int = DEFAULT_EPOCHS,
            verbose="auto", callbacks=None, validation_data=None, shuffle: bool = True,
            sample_weight=None, bucket_lengths="auto", seed: int | None = None, **kwargs):
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

        ``validation_data`` is ``(x, y)``, labelled examples or a dataset, grouped by length
        the same way without shuffling.
        """
        batch_size = batch_size or DEFAULT_BATCH_SIZE
        callbacks = list(callbacks or [])
        if isinstance(x, tf.data.Dataset):
            dataset = self.make_dataset(x)
        else:
            counter = EpochCounter()
            dataset = self.make_dataset(
                x, y, sample_weight, batch_size, shuffle=shuffle, seed=seed,
                bucket_lengths=bucket_lengths, epoch=counter,
                drop_remainder=isinstance(self.distribute_strategy, tf.distribute.TPUStrategy))
            callbacks.insert(0, SetDataEpoch(counter))
        if self._auto_optimizer is not None:
            steps_per_epoch = kwargs.get("steps_per_epoch") or int(dataset.cardinality())
            if steps_per_epoch <= 0:
                raise ValueError("cannot tell the number of training steps for the learning-rate "
                                 "schedule from this dataset; pass steps_per_epoch= or compile "
                                 "with an optimizer")
            self._make_auto_optimizer(steps_per_epoch, epochs)
        with warnings.catch_warnings():
            # Span and tagging heads do not use the encoder's pooler; that is expected.
            warnings.filterwarnings("ignore", message=r"Gradients do not exist for variables "
                                                      r"\['pooler/kernel', 'pooler/bias'\]")
            return super().fit(dataset, epochs=epochs, verbose=verbose, callbacks=callbacks,
                               validation_data=self._validation(validation_data, batch_size),
                               shuffle=False, **kwargs)

    def evaluate(self, x=None, y=None, batch_size: int | None = None, verbose="auto",
                 sample_weight=None, *, bucket_lengths="auto", **kwargs):
        """``keras.Model.evaluate`` that also takes raw examples, grouped by length as in
        ``fit`` (ordered by bucket, not shuffled; the scores do not depend on the order)."""
        dataset = self.make_dataset(x, y, sample_weight, batch_size,
                                    bucket_lengths=bucket_lengths)
        return super().evaluate(dataset, verbose=verbose, **kwargs)

    def predict(self, x, batch_size: int | None = None, verbose="auto", **kwargs):
        """``keras.Model.predict`` that also takes raw examples (a Python list works).

        In-memory inputs (raw examples, or packed id arrays) are grouped by length: the rows are
        sorted by their number of tokens, each batch is padded only to its longest row (rounded
        up to a multiple of 8), and the results come back in the caller's order. Text is
        tokenized by a traced function kept for the next call, and an input of at most
        ``batch_size`` rows runs in chunks of 8 sorted rows, as the exported signatures run a
        request, so a call on a few texts costs about what the export costs. The outputs
        equal those of padding every row to seq_length at every text position; outputs with a
        sequence axis come back [rows, seq_length, ...] as before (positions past a row's text,
        where ``input_mask`` is 0, hold no prediction). A tf.data dataset runs as it is
        batched.
        """
        if isinstance(x, tf.data.Dataset) or kwargs:
            return super().predict(self.make_dataset(x, batch_size=batch_size),
                                   verbose=verbose, **kwargs)
        return predict_by_length(self, packed_arrays(self, x), batch_size or DEFAULT_BATCH_SIZE,
                                 verbose)

    # ----------------------------------------------------------------------- config
    def _base_config(self) -> dict[str, Any]:
        return {"name": self.name, "trainable": self.trainable,
                "encoder": keras.saving.serialize_keras_object(self.encoder),
                "preprocessor": None if self.preprocessor is None
                else keras.saving.serialize_keras_object(self.preprocessor)}

    @classmethod
    def from_config(cls, config: dict[str, Any]):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        if config.get("preprocessor") is not None:
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(**config)


def is_text_arrays(x) -> bool:
    """Whether ``x`` is already the output of ``to_arrays``: a tuple of string arrays."""
    return isinstance(x, tuple) and bool(x) and all(isinstance(a, np.ndarray) for a in x)


def as_string_array(values, what: str) -> np.ndarray:
    """A 1-D object array of str (bytes decoded as UTF-8); ValueError naming ``what`` for an
    entry that is not text. An empty text is valid and packs as ``[CLS] [SEP]``, as the served
    signatures and Google's run_classifier.py pack it."""
    array = np.asarray(values, dtype=object).reshape(-1)
    for index, value in enumerate(array):
        if isinstance(value, bytes):
            value = array[index] = value.decode("utf-8")
        if not isinstance(value, str):
            raise ValueError(f"{what}[{index}] is {value!r}; every text must be a string")
    return array
