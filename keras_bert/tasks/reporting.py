"""How a score is reported: beside its baseline (what always guessing scores), with the
per-class counts, and with a warning when the model learned nothing useful. Pure Python: the
command line, the fine-tuning run and the distillation report share it."""

from __future__ import annotations


LEARNING_HINT = "train longer (more epochs) or with a higher learning rate"


def learning_warning(scores: dict, hint: str = LEARNING_HINT) -> str | None:
    """A sentence saying that the scores show a model that learned nothing useful, with
    ``hint`` (what to try), or None.

    Classification (``classification_scores``): every row was given one class, or accuracy is
    at or below the majority rate. Regression (``regression_scores``): the predictions do not
    vary, or their mean squared error is no lower than always predicting the rows' mean.

    >>> from keras_bert.tasks.classification.metrics import classification_scores
    >>> learning_warning(classification_scores([0, 0, 1], [0, 0, 0], ["no", "yes"]))[:40]
    "the model predicted 'no' for all 3 rows,"
    """
    if "per_class" in scores:
        per_class = scores["per_class"]
        total = sum(counts["rows"] for counts in per_class.values())
        if not total:
            return None
        if sum(counts["rows"] > 0 for counts in per_class.values()) < 2:
            return (f"all {total} rows have the label {scores['majority_label']!r}: accuracy "
                    f"cannot tell a model that learned from one that did not; score it on "
                    f"rows with several labels")
        given = [name for name, counts in per_class.items() if counts["predicted"]]
        if len(given) == 1:
            return (f"the model predicted {given[0]!r} for all {total} rows, so it learned "
                    f"nothing useful (accuracy {scores['accuracy']:.4f} is the share of "
                    f"{given[0]!r}); {hint}")
        if scores["accuracy"] <= scores["majority_rate"]:
            return (f"accuracy {scores['accuracy']:.4f} is no better than always predicting "
                    f"{scores['majority_label']!r} ({scores['majority_rate']:.4f}); {hint}")
        return None
    if "baseline_mse" in scores:
        if scores.get("prediction_std", 1.0) == 0.0:
            return f"the model predicted the same score for every row; {hint}"
        if scores["mse"] >= scores["baseline_mse"]:
            return (f"mean squared error {scores['mse']:.4f} is no lower than always predicting "
                    f"the rows' mean ({scores['baseline_mse']:.4f}); {hint}")
    return None


def baseline(scores: dict) -> str | None:
    """The baseline the scores are read against, in words, or None when they have none.

    >>> baseline({"accuracy": 0.7, "majority_label": "great", "majority_rate": 0.62})
    "always 'great': 0.6200"
    """
    if "majority_rate" in scores:
        label = scores.get("majority_label")
        who = f"always {label!r}" if label is not None else "always the most frequent answer"
        return f"{who}: {scores['majority_rate']:.4f}"
    if "baseline_mse" in scores:
        return f"always the mean: mse {scores['baseline_mse']:.4f}"
    return None


def score_line(scores: dict, metric: str) -> str:
    """``metric`` with its value and its baseline, e.g. "accuracy 0.8120 (always 'great':
    0.6220)".

    >>> score_line({"f1": 91.25}, "f1")
    'f1 91.2500'
    """
    line = f"{metric} {scores[metric]:.4f}"
    if metric == "pearson" and "mse" in scores:
        line += f", mse {scores['mse']:.4f}"
    against = baseline(scores)
    return f"{line} ({against})" if against else line


def score_table(scores: dict) -> list[str]:
    """Per class, the precision, recall and F1, and how many rows have the label and were given
    it, as aligned text lines (none when the scores have no classes).

    >>> print("\\n".join(score_table({"per_class": {"great": {
    ...     "precision": 0.8, "recall": 0.9, "f1": 0.85, "rows": 10, "predicted": 11}}})))
    label  precision  recall      f1  rows  predicted
    great     0.8000  0.9000  0.8500    10         11
    """
    per_class = scores.get("per_class")
    if not per_class:
        return []
    width = max(5, *(len(name) for name in per_class))
    lines = [f"{'label':<{width}}  precision  recall      f1  rows  predicted"]
    for name, counts in per_class.items():
        lines.append(f"{name:<{width}}  {counts['precision']:>9.4f}  {counts['recall']:>6.4f}  "
                     f"{counts['f1']:>6.4f}  {counts['rows']:>4}  {counts['predicted']:>9}")
    return lines
