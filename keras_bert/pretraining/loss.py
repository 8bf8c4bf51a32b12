"""The BERT pretraining objective: weighted masked-LM plus next-sentence cross-entropy.

Matches google-research/bert's ``run_pretraining.py``: the MLM loss is the cross-entropy of the
masked positions weighted by masked_lm_weights and divided by (their sum + 1e-5); the NSP loss is
the mean cross-entropy; the total is their sum. Here the pieces are returned as *sums* so a
training step can divide them by global (all-replica, all-micro-batch) denominators; the
gradient of a global batch is then the same however it is split across replicas or
accumulation steps.
"""

from __future__ import annotations

import tensorflow as tf

MLM_DENOMINATOR_EPSILON = 1e-5  # google-research/bert's run_pretraining.py


def _masked_lm_sums(mlm_ids: tf.Tensor, weights: tf.Tensor,
                    mlm_logits: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(sum of weight * cross-entropy, weight of slots whose label has the largest logit).

    The logits are [batch, max_predictions_per_seq, vocab]: the largest tensor of the step after
    the embedding table. XLA fuses the max, the log-sum-exp, the label's logit, the accuracy and
    the backward pass into about one sweep over them each way, where TensorFlow's softmax
    cross-entropy kernel and an argmax make several. A tie for the largest logit counts as correct (an argmax picks one).
    """
    max_logit = tf.stop_gradient(tf.reduce_max(mlm_logits, -1))                # [batch, preds]
    log_sum_exp = tf.math.log(tf.reduce_sum(tf.exp(mlm_logits - max_logit[..., None]), -1))
    label_logit = tf.gather(mlm_logits, mlm_ids, axis=2, batch_dims=2)         # [batch, preds]
    cross_entropy = log_sum_exp + max_logit - label_logit
    correct = tf.cast(label_logit >= max_logit, tf.float32)
    return tf.reduce_sum(cross_entropy * weights), tf.reduce_sum(correct * weights)


_masked_lm_sums_xla = tf.function(_masked_lm_sums, jit_compile=True)


def pretraining_loss_sums(labels: dict[str, tf.Tensor], outputs: dict[str, tf.Tensor],
                          jit_compile: bool = True) -> dict[str, tf.Tensor]:
    """Per-batch sums that the pretraining loss and its metrics are made of.

    Args:
        labels: masked_lm_ids int [batch, max_predictions_per_seq], masked_lm_weights float32
            [batch, max_predictions_per_seq] (0 marks padding slots), next_sentence_labels int
            [batch] or [batch, 1] (0 = actual next, 1 = random).
        outputs: BertPretrainer's mlm_logits float32 [batch, max_predictions_per_seq, vocab]
            and nsp_logits float32 [batch, 2].
        jit_compile: compute the masked-LM sums as one XLA computation; pass False inside a
            function that XLA compiles as a whole (a nested one would be recompiled per call).

    Returns:
        float32 scalars: mlm_loss_sum (sum of weight * cross-entropy), mlm_weight_sum,
        mlm_correct_sum (weight of the slots whose label has the largest logit), nsp_loss_sum,
        nsp_correct_sum, num_examples.

    Example:
    >>> sums = pretraining_loss_sums(
    ...     {"masked_lm_ids": [[1, 0]], "masked_lm_weights": [[1.0, 0.0]],
    ...      "next_sentence_labels": [0]},
    ...     {"mlm_logits": tf.zeros([1, 2, 4]), "nsp_logits": tf.zeros([1, 2])})
    >>> round(float(sums["mlm_loss_sum"]), 4), round(float(sums["nsp_loss_sum"]), 4)
    (1.3863, 0.6931)
    >>> float(sums["mlm_correct_sum"])  # label 1's logit ties for the largest: correct
    1.0
    """
    mlm_ids = tf.cast(labels["masked_lm_ids"], tf.int32)
    weights = tf.cast(labels["masked_lm_weights"], tf.float32)
    nsp_labels = tf.reshape(tf.cast(labels["next_sentence_labels"], tf.int32), [-1])
    mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
    nsp_logits = tf.cast(outputs["nsp_logits"], tf.float32)
    masked_lm_sums = _masked_lm_sums_xla if jit_compile else _masked_lm_sums
    mlm_loss_sum, mlm_correct_sum = masked_lm_sums(mlm_ids, weights, mlm_logits)
    nsp_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=nsp_labels,
                                                              logits=nsp_logits)
    nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32), nsp_labels),
                          tf.float32)
    return {
        "mlm_loss_sum": mlm_loss_sum,
        "mlm_weight_sum": tf.reduce_sum(weights),
        "mlm_correct_sum": mlm_correct_sum,
        "nsp_loss_sum": tf.reduce_sum(nsp_loss),
        "nsp_correct_sum": tf.reduce_sum(nsp_correct),
        "num_examples": tf.cast(tf.shape(nsp_labels)[0], tf.float32),
    }


def pretraining_loss(sums: dict[str, tf.Tensor], mlm_weight_total: tf.Tensor,
                     num_examples_total: tf.Tensor) -> tf.Tensor:
    """The loss contribution of one batch part, given the totals of the whole global batch.

    Summed over all parts of a global batch (replicas, micro-batches) this is Google's loss on
    that batch: mlm_loss_sum / (mlm_weight_total + 1e-5) + nsp_loss_sum / num_examples_total.

    Args:
        sums: ``pretraining_loss_sums`` of this part.
        mlm_weight_total: sum of masked_lm_weights over the global batch.
        num_examples_total: number of examples in the global batch.

    Returns:
        A float32 scalar.
    """
    return (sums["mlm_loss_sum"] / (mlm_weight_total + MLM_DENOMINATOR_EPSILON)
            + sums["nsp_loss_sum"] / num_examples_total)


def summarize(totals: dict[str, float]) -> dict[str, float]:
    """Loss and accuracy metrics from sums accumulated over any number of batches.

    Args:
        totals: sums as returned by ``pretraining_loss_sums``, added up over batches.

    Returns:
        mlm_loss, mlm_accuracy, nsp_loss, nsp_accuracy and loss (mlm_loss + nsp_loss).
    """
    weight = max(float(totals["mlm_weight_sum"]), MLM_DENOMINATOR_EPSILON)
    examples = max(float(totals["num_examples"]), 1.0)
    metrics = {
        "mlm_loss": float(totals["mlm_loss_sum"]) / weight,
        "mlm_accuracy": float(totals["mlm_correct_sum"]) / weight,
        "nsp_loss": float(totals["nsp_loss_sum"]) / examples,
        "nsp_accuracy": float(totals["nsp_correct_sum"]) / examples,
    }
    metrics["loss"] = metrics["mlm_loss"] + metrics["nsp_loss"]
    return metrics
