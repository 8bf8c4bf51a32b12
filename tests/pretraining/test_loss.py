"""The pretraining loss equals run_pretraining.py's, and splitting a batch does not change it."""

import doctest

import numpy as np
import tensorflow as tf

from keras_bert.pretraining import loss as pretraining_loss
from keras_bert.pretraining.loss import pretraining_loss_sums, summarize


def _batch(seed=0, batch=6, predictions=4, vocab=11):
    rng = np.random.default_rng(seed)
    labels = {
        "masked_lm_ids": rng.integers(0, vocab, size=(batch, predictions)).astype("int32"),
        "masked_lm_weights": (rng.random((batch, predictions)) < 0.7).astype("float32"),
        "next_sentence_labels": rng.integers(0, 2, size=(batch, 1)).astype("int32"),
    }
    outputs = {"mlm_logits": rng.normal(size=(batch, predictions, vocab)).astype("float32"),
               "nsp_logits": rng.normal(size=(batch, 2)).astype("float32")}
    return labels, outputs


def _google_loss(labels, outputs):
    """run_pretraining.py's get_masked_lm_output + get_next_sentence_output, in NumPy."""
    log_probs = outputs["mlm_logits"] - np.log(
        np.exp(outputs["mlm_logits"]).sum(-1, keepdims=True))
    per_example = -np.take_along_axis(log_probs, labels["masked_lm_ids"][..., None], -1)[..., 0]
    weights = labels["masked_lm_weights"]
    mlm = (per_example * weights).sum() / (weights.sum() + 1e-5)
    nsp_log_probs = outputs["nsp_logits"] - np.log(
        np.exp(outputs["nsp_logits"]).sum(-1, keepdims=True))
    nsp = -np.take_along_axis(nsp_log_probs, labels["next_sentence_labels"], -1).mean()
    return mlm + nsp


def test_loss_is_google_formula():
    labels, outputs = _batch()
    sums = pretraining_loss_sums(labels, outputs)
    loss = pretraining_loss.pretraining_loss(sums, sums["mlm_weight_sum"], sums["num_examples"])
    np.testing.assert_allclose(float(loss), _google_loss(labels, outputs), rtol=1e-6)
    metrics = summarize({k: v.numpy() for k, v in sums.items()})
    assert metrics["loss"] == np.float32(metrics["mlm_loss"] + metrics["nsp_loss"])
    predicted = outputs["mlm_logits"].argmax(-1) == labels["masked_lm_ids"]
    weights = labels["masked_lm_weights"]
    assert metrics["mlm_accuracy"] == (predicted * weights).sum() / weights.sum()


def test_parts_normalised_by_global_totals_add_up_to_the_whole_batch_loss():
    labels, outputs = _batch(seed=3, batch=8)
    whole = _google_loss(labels, outputs)
    parts = [{k: v[i::2] for k, v in d.items()} for d in (labels, outputs) for i in (0, 1)]
    label_parts, output_parts = parts[:2], parts[2:]
    weight_total = labels["masked_lm_weights"].sum()
    total = sum(
        float(pretraining_loss.pretraining_loss(pretraining_loss_sums(lab, out),
                                                tf.constant(weight_total), tf.constant(8.0)))
        for lab, out in zip(label_parts, output_parts))
    np.testing.assert_allclose(total, whole, rtol=1e-6)
    # Averaging per-part means instead (what a naive data-parallel loop does) differs.
    naive = np.mean([_google_loss(lab, out) for lab, out in zip(label_parts, output_parts)])
    assert abs(naive - whole) > 1e-3


def test_docstring_examples_run():
    result = doctest.testmod(pretraining_loss)
    assert result.failed == 0 and result.attempted > 0
