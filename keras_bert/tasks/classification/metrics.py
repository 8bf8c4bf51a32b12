"""The GLUE metrics: accuracy, F1, Matthews correlation (classification), Pearson and Spearman
(regression)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def classification_scores(labels: Sequence[int], predictions: Sequence[int]) -> dict[str, float]:
    """Accuracy; for two classes also F1 of class 1 (MRPC, QQP) and Matthews correlation (CoLA)."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    result = {"accuracy": float(np.mean(labels == predictions)) if len(labels) else 0.0}
    if set(np.unique(labels)) | set(np.unique(predictions)) <= {0, 1}:
        tp = float(np.sum((predictions == 1) & (labels == 1)))
        tn = float(np.sum((predictions == 0) & (labels == 0)))
        fp = float(np.sum((predictions == 1) & (labels == 0)))
        fn = float(np.sum((predictions == 0) & (labels == 1)))
        result["f1"] = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        result["matthews_corrcoef"] = float((tp * tn - fp * fn) / denominator) \
            if denominator else 0.0
    return result


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties sharing their average rank."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def regression_scores(labels: Sequence[float], predictions: Sequence[float]) -> dict[str, float]:
    """Pearson and Spearman correlations (STS-B), and the mean squared error."""
    labels = np.asarray(labels, dtype=np.float64)
    predictions = np.asarray(predictions, dtype=np.float64).reshape(-1)

    def pearson(a, b):
        a, b = a - a.mean(), b - b.mean()
        denominator = np.sqrt((a * a).sum() * (b * b).sum())
        return float((a * b).sum() / denominator) if denominator else 0.0

    return {"pearson": pearson(labels, predictions),
            "spearman": pearson(_ranks(labels), _ranks(predictions)),
            "mse": float(np.mean((labels - predictions) ** 2)) if len(labels) else 0.0}
