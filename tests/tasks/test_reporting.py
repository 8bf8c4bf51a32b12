"""Scores beside their baselines, and the warning for a model that learned nothing."""

from keras_bert.tasks.classification.metrics import classification_scores, regression_scores
from keras_bert.tasks.reporting import learning_warning, score_line, score_table


def test_classification_scores_carry_the_majority_rate_and_per_class_counts():
    scores = classification_scores([0, 0, 0, 1, 2], [0, 1, 0, 1, 0], ["a", "b", "c"])
    assert scores["majority_label"] == "a" and scores["majority_rate"] == 0.6
    assert scores["per_class"]["a"] == {"precision": 2 / 3, "recall": 2 / 3,
                                        "f1": 2 / 3, "rows": 3, "predicted": 3}
    assert scores["per_class"]["b"]["precision"] == 0.5 and \
        scores["per_class"]["b"]["recall"] == 1.0
    assert scores["per_class"]["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "rows": 1,
                                        "predicted": 0}
    assert score_line(scores, "accuracy") == "accuracy 0.6000 (always 'a': 0.6000)"
    assert [line.split()[0] for line in score_table(scores)] == ["label", "a", "b", "c"]


def test_the_warning_names_what_went_wrong():
    names = ["neg", "pos"]
    one_class = classification_scores([0, 1, 1, 1], [1, 1, 1, 1], names)
    assert learning_warning(one_class, "try X").startswith(
        "the model predicted 'pos' for all 4 rows")
    assert learning_warning(one_class, "try X").endswith("; try X")
    below = classification_scores([1, 1, 1, 0], [0, 1, 1, 1], names)
    assert learning_warning(below).startswith("accuracy 0.5000 is no better than always "
                                              "predicting 'pos' (0.7500)")
    assert learning_warning(classification_scores([1, 1, 0, 0], [1, 1, 0, 0], names)) is None
    assert "cannot tell" in learning_warning(classification_scores([1, 1], [1, 0], names))


def test_regression_has_the_mean_as_its_baseline():
    flat = regression_scores([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    assert flat["baseline_mse"] == flat["mse"] == 2 / 3
    assert learning_warning(flat).startswith("the model predicted the same score")
    worse = regression_scores([1.0, 2.0, 3.0], [3.0, 2.0, 1.0])
    assert learning_warning(worse).startswith("mean squared error 2.6667 is no lower")
    assert learning_warning(regression_scores([1.0, 2.0, 3.0], [1.1, 2.0, 2.9])) is None
    assert score_line(flat, "pearson").endswith("(always the mean: mse 0.6667)")
