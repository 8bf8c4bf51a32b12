"""training_curves.png's two panels say what they plot: the loss after every step, and the
training accuracy and the dev score per epoch beside always guessing the majority label."""

from keras_bert.finetuning.curves import training_curves_figure

EPOCHS = [
    {"epoch": 1, "loss": 0.69, "accuracy": 0.55,
     "dev": {"accuracy": 0.60, "majority_rate": 0.658, "majority_label": "great"}},
    {"epoch": 2, "loss": 0.52, "accuracy": 0.74,
     "dev": {"accuracy": 0.78, "majority_rate": 0.658, "majority_label": "great"}},
]
STEPS = [[1, 0.70], [2, 0.68], [3, 0.55], [4, 0.50]]


def _panels(figure):
    loss, score = figure.axes
    return loss, score, {line.get_label(): line for line in score.get_lines()}


def test_the_panels_plot_the_steps_the_epochs_and_the_majority_line():
    loss, score, lines = _panels(training_curves_figure(EPOCHS, STEPS, "accuracy"))
    assert loss.get_title() == "training loss"
    assert list(loss.get_lines()[0].get_ydata()) == [0.70, 0.68, 0.55, 0.50]
    assert score.get_title() == "training accuracy and dev accuracy"
    assert list(lines["training accuracy"].get_ydata()) == [0.55, 0.74]
    assert list(lines["dev accuracy"].get_ydata()) == [0.60, 0.78]
    assert list(lines["always 'great'"].get_ydata()) == [0.658, 0.658]


def test_a_metric_other_than_accuracy_has_no_majority_line():
    epochs = [{"epoch": 1, "loss": 0.4, "dev": {"f1": 0.31}},
              {"epoch": 2, "loss": 0.3, "dev": {"f1": 0.52}}]
    loss, score, lines = _panels(training_curves_figure(epochs, [], "f1"))
    assert score.get_title() == "dev f1"
    assert set(lines) == {"dev f1"}
    assert list(loss.get_lines()[0].get_ydata()) == [0.4, 0.3]  # the epochs' losses alone


def test_the_held_out_set_is_named_as_given():
    _, score, lines = _panels(training_curves_figure(EPOCHS, STEPS, "accuracy", held_out="test"))
    assert score.get_title() == "training accuracy and test accuracy"
    assert "test accuracy" in lines
