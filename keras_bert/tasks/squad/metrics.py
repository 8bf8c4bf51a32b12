"""SQuAD's official metrics: exact match and F1 of evaluate-v1.1.py and evaluate-v2.0.py
(answers normalised: lower case, no punctuation, no articles, single spaces), re-implemented and
checked against the official scripts' numbers on hand-made cases."""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence


_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


_PUNCTUATION = set(string.punctuation)


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
