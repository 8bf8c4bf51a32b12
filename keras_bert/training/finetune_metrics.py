"""Fine-tuning metrics: the official SQuAD 1.1/2.0 exact match and F1, conlleval's entity-level
precision/recall/F1, and the GLUE metrics (accuracy, F1, Matthews correlation, Pearson, Spearman).

These are re-implementations of the official definitions (SQuAD's evaluate-v1.1.py and
evaluate-v2.0.py, CoNLL's conlleval script); the tests check them against the official scripts'
numbers on hand-made cases.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence

import numpy as np

from keras_bert.data.tagging import chunk_ended, chunk_started, split_tag

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


# ------------------------------------------------------------------------------------- SQuAD
def normalize_answer(text: str) -> str:
    """SQuAD's answer normalization: lower case, drop punctuation and a/an/the, squash spaces.

    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalized texts are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str, version_2: bool = False) -> float:
    """Token-overlap F1 of the normalized texts, as the official scripts compute it.

    SQuAD 2.0's script scores 1.0 when both are empty (an unanswerable question answered
    with ""), and 0.0 when only one is; SQuAD 1.1's scores 0.0 whenever nothing overlaps.
    """
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if version_2 and (not pred_tokens or not gold_tokens):
        return float(pred_tokens == gold_tokens)
    same = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_scores(gold_answers: Mapping[str, Sequence[str]], predictions: Mapping[str, str],
                 version_2: bool = False) -> dict[str, float]:
    """The official SQuAD metrics, in percent.

    Args:
        gold_answers: {qas_id: [answer texts]}; an empty list marks an unanswerable question.
        predictions: {qas_id: predicted text} ("" for "no answer").
        version_2: score as evaluate-v2.0.py (adds HasAns_/NoAns_ breakdowns); else as
            evaluate-v1.1.py.

    Returns:
        v1.1: ``exact_match``, ``f1`` (a missing prediction scores 0). v2.0: ``exact``, ``f1``,
        ``total``, and ``HasAns_exact``, ``HasAns_f1``, ``HasAns_total``, ``NoAns_...`` for
        the groups present (missing predictions are left out, as the official script does).

    >>> squad_scores({"q1": ["Denver Broncos"]}, {"q1": "the Broncos"})
    {'exact_match': 0.0, 'f1': 66.66666666666666}
    """
    if not version_2:
        exact = f1 = 0.0
        for qas_id, golds in gold_answers.items():
            if qas_id in predictions:
                exact += max(exact_match(predictions[qas_id], g) for g in golds)
                f1 += max(f1_score(predictions[qas_id], g) for g in golds)
        total = max(len(gold_answers), 1)
        return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}
    exact_scores, f1_scores, has_answer = {}, {}, {}
    for qas_id, golds in gold_answers.items():
        has_answer[qas_id] = bool(golds)
        golds = [g for g in golds if normalize_answer(g)] or [""]
        if qas_id not in predictions:
            continue
        exact_scores[qas_id] = max(exact_match(predictions[qas_id], g) for g in golds)
        f1_scores[qas_id] = max(f1_score(predictions[qas_id], g, True) for g in golds)

    def summary(ids):
        return {"exact": 100.0 * sum(exact_scores[i] for i in ids) / len(ids),
                "f1": 100.0 * sum(f1_scores[i] for i in ids) / len(ids), "total": len(ids)}

    result = summary(list(exact_scores)) if exact_scores else {"exact": 0.0, "f1": 0.0,
                                                               "total": 0}
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        ids = [i for i in exact_scores if has_answer[i] == wanted]
        if ids:
            result.update({f"{prefix}_{k}": v for k, v in summary(ids).items()})
    return result


# ------------------------------------------------------------------------------------ CoNLL NER
def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]
                  ) -> dict[str, object]:
    """conlleval's entity-level precision, recall and F1 (percent), overall and per type.

    Sentences are scored as conlleval scores a file with a blank line between them, so an
    entity never spans two sentences. Tags may be IOB1, BIO or IOBES.

    Args:
        gold: per sentence, the gold tags.
        predicted: per sentence, the predicted tags (same lengths).

    Returns:
        ``precision``, ``recall``, ``f1``, ``accuracy`` (token tags), the counts
        ``gold_entities``, ``predicted_entities``, ``correct_entities``, and ``per_type``:
        {type: {precision, recall, f1, predicted_entities}}.

    >>> entity_scores([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])["f1"]
    0.0
    """
    counts = collections.Counter()
    per_type = collections.defaultdict(collections.Counter)
    tokens = correct_tags = 0
    for gold_tags, predicted_tags in zip(gold, predicted, strict=True):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"a sentence has {len(gold_tags)} gold tags but "
                             f"{len(predicted_tags)} predicted tags")
        last_g, last_g_type, last_p, last_p_type = "O", "", "O", ""
        in_correct = False
        for gold_tag, predicted_tag in [*zip(gold_tags, predicted_tags), (None, None)]:
            g, g_type = split_tag(gold_tag) if gold_tag is not None else ("O", "")
            p, p_type = split_tag(predicted_tag) if predicted_tag is not None else ("O", "")
            g_end = chunk_ended(last_g, g, last_g_type, g_type)
            p_end = chunk_ended(last_p, p, last_p_type, p_type)
            if in_correct:
                if g_end and p_end and last_g_type == last_p_type:
                    in_correct = False
                    counts["correct"] += 1
                    per_type[last_g_type]["correct"] += 1
                elif g_end != p_end or g_type != p_type:
                    in_correct = False
            g_start = chunk_started(last_g, g, last_g_type, g_type)
            p_start = chunk_started(last_p, p, last_p_type, p_type)
            if g_start and p_start and g_type == p_type:
                in_correct = True
            if g_start:
                counts["gold"] += 1
                per_type[g_type]["gold"] += 1
            if p_start:
                counts["predicted"] += 1
                per_type[p_type]["predicted"] += 1
            if gold_tag is not None:
                tokens += 1
                correct_tags += int(g == p and g_type == p_type)
            last_g, last_g_type, last_p, last_p_type = g, g_type, p, p_type

    def prf(c):
        precision = 100.0 * c["correct"] / c["predicted"] if c["predicted"] else 0.0
        recall = 100.0 * c["correct"] / c["gold"] if c["gold"] else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1

    precision, recall, f1 = prf(counts)
    types = {}
    for kind in sorted(per_type):
        p_, r_, f_ = prf(per_type[kind])
        types[kind] = {"precision": p_, "recall": r_, "f1": f_,
                       "predicted_entities": per_type[kind]["predicted"]}
    return {"precision": precision, "recall": recall, "f1": f1,
            "accuracy": 100.0 * correct_tags / tokens if tokens else 0.0,
            "gold_entities": counts["gold"], "predicted_entities": counts["predicted"],
            "correct_entities": counts["correct"], "per_type": types}


# ----------------------------------------------------------------------------------- GLUE
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
