"""The fine-tuning loop for MultiWorkerMirroredStrategy, where Keras 3.15's ``model.fit`` does not
run (keras-team/keras#20585, #20329): every worker builds the same global batches in tf.data
(grouped by length, the batches of epoch e a function of the seed and e) and keeps its replicas'
rows of each, and a ``tf.function`` runs ``strategy.run`` steps with the model's own loss and
optimizer.

Every worker therefore runs the same number of steps, each on a slice of the same global batch
(one bucket length), and an update equals ``model.fit``'s on one device with that global batch,
partial last batches included.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import keras
import tensorflow as tf
import tqdm

logger = logging.getLogger(__name__)


def replica_rows(batch, replica_id, num_replicas: int):
    """One replica's share of a global batch: rows ``[n*i//r, n*(i+1)//r)`` of every tensor.

    Args:
        batch: a structure of tensors whose first axis is the global batch (n rows).
        replica_id: the replica's index i in ``[0, num_replicas)`` (int or int tensor).
        num_replicas: r, the replicas in sync.

    Returns:
        The same structure with the replica's rows; shares differ by at most one row, and
        are empty only when the batch has fewer rows than there are replicas.

    Example:
    >>> [replica_rows(tf.range(7), i, 2).numpy().tolist() for i in range(2)]
    [[0, 1, 2], [3, 4, 5, 6]]
    """
    rows = tf.shape(tf.nest.flatten(batch)[0])[0]
    start = rows * replica_id // num_replicas
    end = rows * (replica_id + 1) // num_replicas
    return tf.nest.map_structure(lambda t: t[start:end], batch)


def distribute_global_batches(strategy: tf.distribute.Strategy,
                              make_global_dataset: Callable[[], tf.data.Dataset]
                              ) -> tf.distribute.DistributedDataset:
    """Global batches made on every worker, each replica fed its rows of every one.

    Args:
        strategy: the strategy to feed.
        make_global_dataset: returns the batched dataset of global batches; it must give the
            same batches in the same order on every worker (a seeded shuffle does).

    Returns:
        A distributed dataset whose every element holds one global batch, split among all
        replicas with ``replica_rows`` (worker-major replica order).
    """
    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        num_replicas = context.num_replicas_in_sync
        local_replicas = num_replicas // context.num_input_pipelines
        first = context.input_pipeline_id * local_replicas

        def shares(*batch):  # the worker's replicas take consecutive elements, in order
            batch = batch if len(batch) > 1 else batch[0]
            return tf.data.Dataset.range(local_replicas).map(
                lambda i: replica_rows(batch, first + tf.cast(i, tf.int32), num_replicas))

        return make_global_dataset().flat_map(shares).prefetch(tf.data.AUTOTUNE)

    return strategy.distribute_datasets_from_function(dataset_fn)


def make_finetune_train_loop(model: keras.Model, strategy: tf.distribute.Strategy
                             ) -> Callable[[object, tf.Tensor], tuple[tf.Tensor, tf.Tensor]]:
    """A tf.function ``train_loop(iterator, max_steps) -> (sums, steps)``.

    Each step is Keras' own train step without the metrics: forward pass in training mode, the
    compiled loss (``model.compute_loss``), gradients, ``model.optimizer.apply_gradients``
    (keras-bert's optimizers sum the gradients over replicas before clipping). Keras divides
    each replica's mean loss by the replica count; the step rescales it by the replica's rows
    over the mean rows per replica, so that uneven shares of a partial batch weigh every
    example alike.

    Args:
        model: a compiled task model built under ``strategy.scope()``.
        strategy: its strategy.

    Returns:
        ``train_loop(iterator, max_steps)``: runs up to ``max_steps`` (int32 scalar tensor)
        steps from a distributed iterator of ``(x, y[, sample_weight])``, stopping early at the
        end of the data (on every worker alike), and returns float32 [2] sums over the steps
        (the loss summed over examples, the examples) and the steps run.
    """
    optimizer = model.optimizer
    if not optimizer.built:  # its variables must be made under the scope, not in the step
        with strategy.scope():
            optimizer.build(model.trainable_variables)

    def replica_step(data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        context = tf.distribute.get_replica_context()
        rows = tf.cast(tf.shape(tf.nest.flatten(x)[0])[0], tf.float32)
        global_rows = context.all_reduce(tf.distribute.ReduceOp.SUM, rows)
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight,
                                      training=True)
            loss = loss * (rows * context.num_replicas_in_sync / global_rows)
            scaled_loss = optimizer.scale_loss(loss)
        variables = model.trainable_variables
        # Dense gradients: an embedding's gradient arrives as IndexedSlices with one row per
        # token of this replica's batch, and the all-reduce would gather those; replicas with
        # different token counts (uneven shares, other windows) then fail on shape mismatch.
        gradients = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                     for g in tape.gradient(scaled_loss, variables)]
        optimizer.apply_gradients(zip(gradients, variables))
        return tf.stack([loss * global_rows, rows])

    @tf.function
    def train_loop(iterator, max_steps):
        sums = tf.zeros([2])
        steps = tf.constant(0)
        for _ in tf.range(max_steps):
            batch = iterator.get_next_as_optional()
            if not batch.has_value():
                break
            per_replica = strategy.run(replica_step, args=(batch.get_value(),))
            sums += strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
            steps += 1
        return sums, steps

    return train_loop


def fit_distributed(model: keras.Model, strategy: tf.distribute.Strategy,
                    dataset: tf.distribute.DistributedDataset, epochs: int,
                    on_epoch_end: Callable[[int, dict], None], steps_per_epoch: int | None = None,
                    progress: bool = True, steps_per_loop: int = 50, initial_epoch: int = 0,
                    on_epoch_begin: Callable[[int], None] | None = None) -> None:
    """Trains epochs ``initial_epoch`` to ``epochs - 1``, one pass over ``dataset`` each; every
    worker must call this alike.

    Args:
        model: a compiled task model built under ``strategy.scope()``.
        strategy: its strategy.
        dataset: from ``distribute_global_batches``.
        epochs: the epoch to stop before, as ``model.fit``'s.
        on_epoch_end: called after each epoch with the epoch (from 0) and ``{"loss": mean
            training loss over the epoch's examples}``, as a Keras callback is; it must not
            run collective ops unless every worker runs the same ones.
        steps_per_epoch: the expected steps, for the progress bar only.
        progress: show a progress bar (else one log line per epoch).
        steps_per_loop: steps per ``tf.function`` call (fewer host round trips).
        initial_epoch: the first epoch to run (a resumed run's).
        on_epoch_begin: called with the epoch before its pass over ``dataset`` starts (e.g.
            ``EpochCounter.set``, so that the pass reads that epoch's batches).
    """
    train_loop = make_finetune_train_loop(model, strategy)
    for epoch in range(initial_epoch, epochs):
        if on_epoch_begin is not None:
            on_epoch_begin(epoch)
        started = time.perf_counter()
        iterator = iter(dataset)
        sums, steps = tf.zeros([2]), 0
        with tqdm.tqdm(total=steps_per_epoch, unit="step", desc=f"epoch {epoch + 1}/{epochs}",
                       disable=not progress, dynamic_ncols=True) as bar:
            while True:
                loop_sums, loop_steps = train_loop(iterator, tf.constant(steps_per_loop))
                sums, steps = sums + loop_sums, steps + int(loop_steps)
                bar.update(int(loop_steps))
                bar.set_postfix(loss=f"{float(sums[0] / sums[1]):.4f}")
                if int(loop_steps) < steps_per_loop:
                    break
        logs = {"loss": float(sums[0] / sums[1])}
        logger.info("epoch %d/%d: %d steps, %d examples, loss %.4f, %.1f s", epoch + 1, epochs,
                    steps, int(sums[1]), logs["loss"], time.perf_counter() - started)
        on_epoch_end(epoch, logs)
