"""The GLUE metrics: accuracy, F1, Matthews correlation (classification), Pearson and Spearman
(regression)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def classification_scores(labels: Sequence[int], predictions: Sequence[int],
                          label_names: Sequence[str] | None = None) -> dict[str, object]:
    """Accuracy; for two classes also F1 of class 1 (MRPC, QQP) and Matthews correlation (CoLA).

    Beside them, what the scores are read against: ``majority_label`` and ``majority_rate``
    (the accuracy of always predicting the rows' most frequent label), and ``per_class``,
    {label: {precision, recall, f1, rows, predicted}} (``rows``: how many rows have the label,
    ``predicted``: how many were given it). ``label_names`` name the classes (default: their
    indices as strings).

    >>> scores = classification_scores([0, 0, 1], [0, 0, 0], ["no", "yes"])
    >>> scores["accuracy"] == scores["majority_rate"], scores["per_class"]["yes"]["predicted"]
    (True, 0)
    """
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    result: dict[str, object] = {
        "accuracy": float(np.mean(labels == predictions)) if len(labels) else 0.0}
    if set(np.unique(labels)) | set(np.unique(predictions)) <= {0, 1}:
        tp = float(np.sum((predictions == 1) & (labels == 1)))
        tn = float(np.sum((predictions == 0) & (labels == 0)))
        fp = float(np.sum((predictions == 1) & (labels == 0)))
        fn = float(np.sum((predictions == 0) & (labels == 1)))
        result["f1"] = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        result["matthews_corrcoef"] = float((tp * tn - fp * fn) / denominator) \
            if denominator else 0.0
    num_classes = max(len(label_names or ()), int(labels.max(initial=-1)) + 1,
                      int(predictions.max(initial=-1)) + 1)
    names = list(label_names) if label_names else [str(i) for i in range(num_classes)]
    rows = np.bincount(labels.astype(np.int64), minlength=num_classes)
    predicted = np.bincount(predictions.astype(np.int64), minlength=num_classes)
    correct = np.bincount(labels[labels == predictions].astype(np.int64),
                          minlength=num_classes)
    if len(labels):
        result["majority_label"] = names[int(np.argmax(rows))]
        result["majority_rate"] = float(rows.max() / len(labels))
    per_class = {}
    for i, name in enumerate(names):
        precision = float(correct[i] / predicted[i]) if predicted[i] else 0.0
        recall = float(correct[i] / rows[i]) if rows[i] else 0.0
        per_class[name] = {
            "precision": precision, "recall": recall,
            "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
            "rows": int(rows[i]), "predicted": int(predicted[i])}
    result["per_class"] = per_class
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
    """Pearson and Spearman correlations (STS-B) and the mean squared error; beside them the
    baseline ``baseline_mse`` (the error of always predicting the rows' mean score) and
    ``prediction_std`` (0: the model gives every row the same score)."""
    labels = np.asarray(labels, dtype=np.float64)
    predictions = np.asarray(predictions, dtype=np.float64).reshape(-1)

    def pearson(a, b):
        a, b = a - a.mean(), b - b.mean()
        denominator = np.sqrt((a * a).sum() * (b * b).sum())
        return float((a * b).sum() / denominator) if denominator else 0.0

    if not len(labels):
        return {"pearson": 0.0, "spearman": 0.0, "mse": 0.0}
    return {"pearson": pearson(labels, predictions),
            "spearman": pearson(_ranks(labels), _ranks(predictions)),
            "mse": float(np.mean((labels - predictions) ** 2)),
            # the baseline: always the rows' mean score
            "baseline_mse": float(np.mean((labels - labels.mean()) ** 2)),
            "prediction_std": float(predictions.std())}
