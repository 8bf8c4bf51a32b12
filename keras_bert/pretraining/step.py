"""The distributed pretraining step: forward, backward, all-reduce and update on every replica.

``make_pretraining_train_loop`` returns a ``tf.function`` that runs N steps per call (fewer host
round trips; TPUs need this), each ``strategy.run(replica_step)``. A step splits each replica's
batch into ``gradient_accumulation_steps`` micro-batches, sums their gradients, all-reduces the
sum once and applies it; the loss of every part is normalised by the *global* batch's totals, so
the update equals that of one big batch on one device whatever the replica and micro-batch split.
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import tensorflow as tf

from keras_bert.distribute import num_local_replicas
from keras_bert.pretraining.loss import pretraining_loss, pretraining_loss_sums

SUM_NAMES = ("mlm_loss_sum", "mlm_weight_sum", "mlm_correct_sum", "nsp_loss_sum",
             "nsp_correct_sum", "num_examples")


def _inner_optimizer(optimizer: keras.optimizers.Optimizer) -> keras.optimizers.Optimizer:
    return getattr(optimizer, "inner_optimizer", optimizer)


def make_pretraining_train_loop(model: keras.Model, optimizer: keras.optimizers.Optimizer,
                                strategy: tf.distribute.Strategy,
                                gradient_accumulation_steps: int = 1,
                                split_worker_batch: bool = False, jit_compile: bool = False
                                ) -> Callable[[object, tf.Tensor], tuple[dict, tf.Tensor]]:
    """A tf.function ``train_loop(iterator, num_steps) -> (sums, grad_norm_sum)``.

    Args:
        model: a BertPretrainer built under ``strategy.scope()``.
        optimizer: from ``create_optimizer`` (a BertAdamW/BertLamb, maybe loss-scaled), built on
            ``model.trainable_variables``. Its own cross-replica reduction is turned off: the
            step all-reduces, so clipping and the loss-scale finiteness check see the global
            gradient.
        strategy: the strategy the model was built under.
        gradient_accumulation_steps: micro-batches per replica batch; the replica batch size
            must be divisible by it.
        split_worker_batch: the iterator is a plain tf.data iterator of this worker's batches,
            which each step splits evenly among the worker's replicas; else it is a distributed
            iterator (``strategy.distribute_datasets_from_function``) of per-replica batches.
        jit_compile: compile each replica's forward and backward pass (the model, the loss and
            the gradients) with XLA. The all-reduce and the optimizer update stay outside the
            XLA cluster, where MirroredStrategy's cross-replica calls can run.

    Returns:
        ``train_loop(iterator, num_steps)``: runs ``num_steps`` (int32 scalar tensor) updates
        from an iterator of (inputs, labels); returns the loss sums of
        ``pretraining_loss_sums`` added over all replicas and steps, and the sum over steps of
        the global gradient norm (before clipping).
    """
    _inner_optimizer(optimizer).aggregate_gradients = False
    accumulation = int(gradient_accumulation_steps)
    variables = model.trainable_variables
    local_replicas = num_local_replicas(strategy)

    def split(t, parts):  # [batch, ...] -> [parts, batch / parts, ...]
        return tf.reshape(t, tf.concat([[parts, -1], tf.shape(t)[1:]], 0))

    def local_share(batch):
        """This replica's slice of the worker batch (replica ids are worker-major)."""
        if local_replicas == 1:
            return batch
        index = tf.distribute.get_replica_context().replica_id_in_sync_group % local_replicas
        return tf.nest.map_structure(lambda t: tf.gather(split(t, local_replicas), index),
                                     batch)

    def forward_backward(inputs, labels, weight_total, example_total):
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            sums = pretraining_loss_sums(labels, outputs, jit_compile=not jit_compile)
            loss = pretraining_loss(sums, weight_total, example_total)
            scaled_loss = optimizer.scale_loss(loss)
        # Dense gradients: the embedding gradients arrive as IndexedSlices with repeated rows,
        # whose values' norm is not the gradient's norm; summing them makes clipping exact.
        return [tf.convert_to_tensor(g) for g in tape.gradient(scaled_loss, variables)], sums

    if jit_compile:
        forward_backward = tf.function(forward_backward, jit_compile=True)

    def replica_step(inputs, labels):
        if split_worker_batch:
            inputs, labels = local_share((inputs, labels))
        context = tf.distribute.get_replica_context()
        weights = labels["masked_lm_weights"]
        weight_total, example_total = context.all_reduce(
            tf.distribute.ReduceOp.SUM,
            [tf.reduce_sum(weights), tf.cast(tf.shape(weights)[0], tf.float32)])
        if accumulation == 1:
            grads, sums = forward_backward(inputs, labels, weight_total, example_total)
        else:
            inputs, labels = tf.nest.map_structure(lambda t: split(t, accumulation),
                                                   (inputs, labels))
            grads = [tf.zeros_like(v) for v in variables]
            sums = {name: tf.constant(0.0) for name in SUM_NAMES}
            for i in tf.range(accumulation):
                micro_grads, micro_sums = forward_backward(
                    tf.nest.map_structure(lambda t: t[i], inputs),
                    tf.nest.map_structure(lambda t: t[i], labels), weight_total, example_total)
                grads = [g + m for g, m in zip(grads, micro_grads)]
                sums = {name: sums[name] + micro_sums[name] for name in SUM_NAMES}
        grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        grad_norm = tf.linalg.global_norm(grads) / optimizer.scale_loss(tf.constant(1.0))
        optimizer.apply(grads, variables)
        return sums, grad_norm

    @tf.function
    def train_loop(iterator, num_steps):
        totals = {name: tf.constant(0.0) for name in SUM_NAMES}
        grad_norm_sum = tf.constant(0.0)
        for _ in tf.range(num_steps):
            inputs, labels = next(iterator)
            sums, grad_norm = strategy.run(replica_step, args=(inputs, labels))
            totals = {name: totals[name] + strategy.reduce("SUM", sums[name], axis=None)
                      for name in SUM_NAMES}
            grad_norm_sum += strategy.reduce("MEAN", grad_norm, axis=None)
        return totals, grad_norm_sum

    return train_loop


def make_eval_loop(model: keras.Model, strategy: tf.distribute.Strategy
                   ) -> Callable[[object, tf.Tensor], dict]:
    """A tf.function ``eval_loop(iterator, num_steps) -> sums`` (inference mode, no update).

    Runs ``num_steps`` batches (or until the iterator ends) and returns the
    ``pretraining_loss_sums`` added over replicas and batches.
    """

    def replica_step(inputs, labels):
        return pretraining_loss_sums(labels, model(inputs, training=False))

    @tf.function
    def eval_loop(iterator, num_steps):
        totals = {name: tf.constant(0.0) for name in SUM_NAMES}
        for _ in tf.range(num_steps):
            batch = iterator.get_next_as_optional()
            if not batch.has_value():
                break
            inputs, labels = batch.get_value()
            sums = strategy.run(replica_step, args=(inputs, labels))
            totals = {name: totals[name] + strategy.reduce("SUM", sums[name], axis=None)
                      for name in SUM_NAMES}
        return totals

    return eval_loop
