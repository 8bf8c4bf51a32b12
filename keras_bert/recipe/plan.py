"""One fine-tuning run's plan: ``FinetuningPlan`` turns a task model, its training examples and
the recipe's settings (``keras_bert.config.FinetuneSettings``, BERT's defaults: Devlin et al.,
2018, section 4 and appendix A.3) into what a run needs: the dataset of each epoch, the number
of steps, AdamW on its warmup-then-linear-decay schedule, and the callback that tells the data
which epoch runs.

``recipe.fit`` (``BertTask.fit``), ``keras-bert finetune`` (``model.fit``'s path and the
multi-worker loop) and ``keras_bert.distill`` build one per run.
"""

from __future__ import annotations

import logging

import keras
import tensorflow as tf

from keras_bert.config import CALIBRATION_SAMPLE_TEXTS, FinetuneSettings
from keras_bert.recipe.batches import EpochCounter, PackedRows, SetDataEpoch
from keras_bert.optimization.optimizers import create_optimizer
from keras_bert.optimization.schedules import WarmupPolynomialDecay

logger = logging.getLogger(__name__)


class FinetuningPlan:
    """One fine-tuning run of ``model`` on its training examples under ``settings``.

    In-memory examples are turned into rows (``model.to_arrays``) and tokenized once; each
    epoch's batches then come from ``BatchPlan`` (rows of similar length together, each batch
    padded to its bucket; epoch e's batches depend on (seed, e) only), and the epoch a pass
    reads is the one ``callbacks()`` sets at each epoch's start, so a run resumed at epoch e
    reads the batches an uninterrupted one would. A tf.data dataset runs as it is batched (its
    number of batches must be known, or ``steps_per_epoch`` given).

    Args:
        model: the task model (a ``BertTask``).
        x, y, sample_weight: the training examples as ``model.fit`` takes them, or a batched
            tf.data dataset.
        settings: the recipe (batch size, epochs, optimizer, bucket lengths).
        seed: the shuffling seed (None: drawn from NumPy's global generator, which
            ``keras.utils.set_random_seed`` fixes).
        shuffle: shuffle the rows and batches of every epoch (False: rows ordered by bucket,
            the same batches every epoch).
        steps_per_epoch: the steps of one epoch (None: one pass over the data; a dataset of
            unknown length needs it).
        arrays: ``x`` and ``y`` are already ``model.to_arrays``' output (and ``y`` targets the
            compiled loss reads as they are, such as a teacher's outputs), not converted again.

    Attributes:
        rows: the training rows (an example may give several: the windows of a long text);
            None for a dataset.
        steps_per_epoch: optimizer steps in one epoch.
        steps_per_epoch_given: the ``steps_per_epoch`` asked for, or None (what Keras' ``fit``
            takes).
        total_steps: ``steps_per_epoch * settings.epochs``.
        text_sample: up to ``CALIBRATION_SAMPLE_TEXTS`` of the training texts
            (``model.sample_texts``), which the run leaves as the model's
            ``calibration_texts``; None for a dataset.
    """

    def __init__(self, model, x, y=None, sample_weight=None, *, settings: FinetuneSettings,
                 seed: int | None = None, shuffle: bool = True,
                 steps_per_epoch: int | None = None, arrays: bool = False):
        self.model, self.settings = model, settings
        # TPUs need every batch full; the model's strategy is the one it was built under.
        self.drop_remainder = isinstance(model.distribute_strategy, tf.distribute.TPUStrategy)
        self.steps_per_epoch_given = steps_per_epoch
        self.counter: EpochCounter | None = None  # the epoch the data reads; None: a dataset
        self._dataset = self._rows = self.rows = self.text_sample = None
        if isinstance(x, tf.data.Dataset):
            self._dataset = model.make_dataset(x)
            steps = steps_per_epoch or int(self._dataset.cardinality())
            if steps <= 0:
                raise ValueError("cannot tell the number of training steps for the learning-rate "
                                 "schedule from this dataset; pass steps_per_epoch= or compile "
                                 "with an optimizer")
        else:
            if not arrays:
                x, y = model.to_arrays(x, y)
            self.text_sample = model.sample_texts(x, CALIBRATION_SAMPLE_TEXTS, seed)
            data = (x,) if y is None else ((x, y) if sample_weight is None
                                          else (x, y, sample_weight))
            self._rows = PackedRows(data, model.traced_pack_batch, settings.batch_size,
                                    bucket_lengths=settings.bucket_lengths, shuffle=shuffle,
                                    seed=seed, drop_remainder=self.drop_remainder,
                                    token_level_labels=model.token_level_labels)
            self.counter = EpochCounter()
            self.rows = len(self._rows.plan.lengths)
            steps = steps_per_epoch or self._rows.plan.num_batches
        self.steps_per_epoch = int(steps)
        self.total_steps = self.steps_per_epoch * settings.epochs

    @property
    def warmup_steps(self) -> int:
        return int(self.total_steps * self.settings.warmup_fraction)

    @property
    def schedule_steps(self) -> int:
        """The steps the learning rate decays over (``total_steps``, at least 1)."""
        return max(self.total_steps, 1)

    def make_dataset(self) -> tf.data.Dataset:
        """The training dataset: every pass yields the epoch ``callbacks()`` last set (a new
        dataset object over the same tokenized rows each call, as a multi-worker input
        function needs)."""
        if self._rows is None:
            return self._dataset
        return self._rows.dataset(self.counter)

    def schedule(self, start_step: int = 0) -> WarmupPolynomialDecay:
        """The recipe's learning rate for this run: linear warmup over ``warmup_steps``, then
        linear decay to 0 at ``total_steps``, counted from optimizer step ``start_step``."""
        return WarmupPolynomialDecay(self.settings.learning_rate, decay_steps=self.schedule_steps,
                                     warmup_steps=self.warmup_steps, start_step=start_step)

    def make_optimizer(self, start_step: int = 0) -> keras.optimizers.Optimizer:
        """AdamW on ``schedule(start_step)`` with the recipe's weight decay, clipped at global
        norm 1.0, and the model's ``learning_rate_multipliers`` (a new head that learns
        faster)."""
        return create_optimizer(self.settings.learning_rate, num_train_steps=self.schedule_steps,
                                num_warmup_steps=self.warmup_steps,
                                weight_decay=self.settings.weight_decay,
                                learning_rate_multipliers=self.model.learning_rate_multipliers(),
                                start_step=start_step)

    def compile_model(self, optimizer: keras.optimizers.Optimizer | None = None, *,
                      initial_epoch: int = 0, **compile_arguments) -> None:
        """Compiles the model for this run, under the model's strategy, with the optimizer
        built at once: a checkpoint can then be restored into it, and the train step creates no
        variables, so tf.function traces once. ``compile_arguments`` (loss, metrics...) go to
        ``keras.Model.compile``.

        Every run has a schedule of its own (warmup, then decay to 0 at the run's last step),
        as every ``fit`` of a Keras model trains: with ``optimizer`` None a new one
        (``make_optimizer``); else ``optimizer``, one an earlier run of the recipe made (the
        model's compiled optimizer), goes on with its state (Adam's moments, its step count) on
        this run's schedule, restarted in place (``WarmupPolynomialDecay.restart``), so the
        train step traced for it is not traced again. Epoch ``initial_epoch`` (a resumed run)
        starts where an uninterrupted run would have been: ``initial_epoch * steps_per_epoch``
        steps into the schedule."""
        model = self.model
        start_step = -initial_epoch * self.steps_per_epoch
        if optimizer is not None:
            start_step += int(optimizer.iterations.numpy())
        logger.info("AdamW: lr %g, %d steps (%d per epoch), %d warmup%s",
                    self.settings.learning_rate, self.total_steps, self.steps_per_epoch,
                    self.warmup_steps, "" if optimizer is None else
                    f", going on from optimizer step {int(optimizer.iterations.numpy())}")
        inner = getattr(optimizer, "inner_optimizer", optimizer)  # a LossScaleOptimizer's
        schedule = getattr(inner, "schedule", None)
        if schedule is not None and schedule.peak_learning_rate == self.settings.learning_rate:
            schedule.restart(self.schedule_steps, self.warmup_steps, start_step)
            return
        with model.distribute_strategy.scope():
            if optimizer is None:
                optimizer = self.make_optimizer(start_step)
            else:  # another rate: a new schedule, and the train step traced again
                inner.learning_rate = inner.schedule = self.schedule(start_step)
            keras.Model.compile(model, optimizer=optimizer, **compile_arguments)
            optimizer.build(model.trainable_variables)

    def callbacks(self) -> list[keras.callbacks.Callback]:
        """What ``fit`` needs besides the user's callbacks: the data epoch set at each epoch's
        start (``on_epoch_begin``)."""
        return [] if self.counter is None else [SetDataEpoch(self.counter)]

    def on_epoch_begin(self, epoch: int) -> None:
        """Sets the epoch the next pass over ``make_dataset()`` reads: what ``callbacks()`` do
        in ``fit``, for a loop of one's own (the multi-worker loop)."""
        if self.counter is not None:
            self.counter.set(epoch)

