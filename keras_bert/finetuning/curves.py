"""A fine-tuning run's curves as a PNG: the training loss after every step and the dev score
after every epoch, beside the score of always guessing the most frequent label."""

from __future__ import annotations

from collections.abc import Sequence

from keras_bert.fileio import PathLike, atomic_write

CURVES_NAME = "training_curves.png"  # in a fine-tuning run's output_dir


def plot_training_curves(path: PathLike, epochs: Sequence[dict], steps: Sequence[Sequence[float]],
                         metric: str) -> None:
    """Writes ``training_curves_figure(epochs, steps, metric)`` to ``path`` (PNG, atomically).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "curves.png")
    >>> plot_training_curves(path, [{"epoch": 1, "loss": 0.6, "dev": {"accuracy": 0.7}}],
    ...                      [[1, 0.7], [2, 0.6]], "accuracy")
    >>> open(path, "rb").read(4)
    b'\\x89PNG'
    """
    figure = training_curves_figure(epochs, steps, metric)
    with atomic_write(path, "wb") as f:
        figure.savefig(f, format="png")


def training_curves_figure(epochs: Sequence[dict], steps: Sequence[Sequence[float]],
                           metric: str, held_out: str = "dev"):
    """A matplotlib Figure of two panels: the training loss, and the accuracy and dev score per
    epoch beside the majority-class line.

    Args:
        epochs: per epoch, Keras' logs (``loss``, and ``accuracy`` where compiled) and ``dev``,
            the dev scores (a fine-tuning run's ``eval_results.json`` ``epochs``).
        steps: [step, loss] pairs: the training loss as Keras reports it during an epoch (the
            running mean of the epoch so far); empty: the epochs' losses alone.
        metric: the dev score to plot (the task's primary metric); its baseline
            (``majority_rate``) is drawn where the scores have one.
        held_out: what the scores under ``dev`` were measured on, as the plot names it.
    """
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state

    figure = Figure(figsize=(10, 4), dpi=100)
    loss_axes, score_axes = figure.subplots(1, 2)
    if steps:
        loss_axes.plot([s[0] for s in steps], [s[1] for s in steps], label="running mean in "
                                                                             "the epoch")
        loss_axes.set_xlabel("step")
    else:
        loss_axes.plot([e["epoch"] for e in epochs], [e.get("loss") for e in epochs], "o-",
                       label="mean of the epoch")
        loss_axes.set_xlabel("epoch")
    loss_axes.set_title("training loss")
    loss_axes.legend()
    numbers = [e["epoch"] for e in epochs]
    dev = [e["dev"] for e in epochs if "dev" in e]
    titles = []
    if any("accuracy" in e for e in epochs):
        titles.append("training accuracy")
        score_axes.plot(numbers, [e.get("accuracy") for e in epochs], "o-",
                        label="training accuracy")
    if dev:
        titles.append(f"{held_out} {metric}")
        score_axes.plot([e["epoch"] for e in epochs if "dev" in e], [d[metric] for d in dev],
                        "o-", label=f"{held_out} {metric}")
        if "majority_rate" in dev[-1] and metric == "accuracy":
            label = dev[-1].get("majority_label")
            score_axes.axhline(dev[-1]["majority_rate"], color="gray", linestyle="--",
                               label=f"always {label!r}" if label is not None
                               else "always the most frequent")
    score_axes.set_xlabel("epoch")
    score_axes.set_xticks(numbers)
    score_axes.set_title(" and ".join(titles))
    if score_axes.get_legend_handles_labels()[0]:
        score_axes.legend()
    figure.tight_layout()
    return figure
