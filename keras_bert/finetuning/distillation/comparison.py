"""Teacher and student side by side: on labelled examples (``compare``: accuracy or mean squared
error, the student's agreement with the teacher, speed, and the majority label's rate), and in
size (``sizes``, ``size_note``: parameters, the embeddings' share, and what that means)."""

from __future__ import annotations

import time

import numpy as np

from keras_bert.config import FinetuneSettings
from keras_bert.finetuning.distillation.targets import _inputs
from keras_bert.models.task import BertTask

RECIPE = FinetuneSettings()  # epochs and batch size: the fine-tuning recipe's


def compare(teacher: BertTask, student: BertTask, texts, labels=None, text_pairs=None,
            batch_size: int = RECIPE.batch_size) -> dict[str, dict[str, float]]:
    """Teacher and student on the same labelled examples, side by side: {"teacher": scores,
    "student": scores, "majority": scores}. Scores: accuracy where there are labels (of the
    top class, of each class decision for multi-label, of each first piece's tag for a
    tagger, of the start and end positions for a span head), or mean squared error for
    regression; the student's agreement with the teacher; examples per second of ``predict``
    (after a first call); and the majority label's rate, the score of always guessing it."""
    inputs = _inputs(texts, text_pairs)
    rows, y, labelled, scored = teacher.distillation_rows(inputs, labels)
    if y is None:
        raise ValueError("compare needs labelled examples")
    kind = teacher.soft_targets()
    outputs, results = {}, {}
    for name, model in (("teacher", teacher), ("student", student)):
        model.predict(rows, batch_size=batch_size, verbose=0)  # traced before it is timed
        start = time.perf_counter()
        outputs[name] = model.predict(rows, batch_size=batch_size, verbose=0)
        results[name] = {"texts_per_s": len(inputs) / max(time.perf_counter() - start, 1e-9)}
    mask = labelled if scored is None else labelled & scored
    names = list(y) if isinstance(y, dict) else [None]
    for name in ("teacher", "student"):
        values = []
        for output_name in names:
            output = np.asarray(outputs[name] if output_name is None
                                else outputs[name][output_name])
            truth = np.asarray(y if output_name is None else y[output_name])
            if kind == "score":
                errors = (output.reshape(len(truth), -1) - truth.reshape(len(truth), -1)) ** 2
                values.append(float(np.mean(errors[mask])))
            elif kind == "sigmoid":
                values.append(float(np.mean(((output >= 0.5) == (truth >= 0.5))[mask])))
            else:
                values.append(float(np.mean((np.argmax(output, -1) == truth)[mask])))
        results[name]["mse" if kind == "score" else "accuracy"] = float(np.mean(values))
    if kind != "score":
        agreements = []
        for output_name in names:
            ours, theirs = ((outputs[n] if output_name is None else outputs[n][output_name])
                            for n in ("student", "teacher"))
            same = ((np.asarray(ours) >= 0.5) == (np.asarray(theirs) >= 0.5)).all(-1) \
                if kind == "sigmoid" else np.argmax(ours, -1) == np.argmax(theirs, -1)
            agreements.append(float(np.mean(same if scored is None else same[scored])))
        results["student"]["agreement"] = float(np.mean(agreements))
    if kind in ("softmax", "logits"):
        majority = []
        for output_name in names:
            truth = np.asarray(y if output_name is None else y[output_name])[mask]
            majority.append(float(np.bincount(truth.reshape(-1)).max() / truth.size))
        results["majority"] = {"accuracy": float(np.mean(majority))}
    return results


def sizes(teacher: BertTask, student: BertTask) -> dict[str, dict[str, int]]:
    """The teacher's and the student's sizes: {"teacher": {"layers", "parameters",
    "embedding_parameters"}, "student": {...}}; the embeddings are the encoder's word,
    position and segment tables and their LayerNorm."""
    return {name: {"layers": model.encoder.bert_config.num_hidden_layers,
                   "parameters": model.count_params(),
                   "embedding_parameters": model.encoder.embeddings.count_params()}
            for name, model in (("teacher", teacher), ("student", student))}


def size_note(counts: dict[str, dict[str, int]]) -> str:
    """One sentence on the numbers ``sizes`` gives: the student's parameters against the
    teacher's, the embeddings' share of them, and why its speed follows the layers it keeps
    rather than that share (an embedding is a table look-up per token: memory, almost no
    time)."""
    teacher, student = counts["teacher"], counts["student"]
    return (f"the student keeps {student['parameters'] / teacher['parameters']:.0%} of the "
            f"teacher's parameters ({student['parameters']:,} of {teacher['parameters']:,}), "
            f"{student['embedding_parameters'] / student['parameters']:.0%} of them the "
            f"embeddings, which cost memory but almost no time per text (a table look-up): its "
            f"speed follows the {student['layers']} of {teacher['layers']} layers it keeps, not "
            f"its share of the parameters")
