"""SQuAD post-processing: from each feature's start and end logits to one answer text per question,
with the n-best list and, for SQuAD 2.0, the null-score threshold (google-research/bert's
``write_predictions``, cutting the answer text from the context by character offsets)."""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from keras_bert.tasks.squad.reader import SquadExample
from keras_bert.tasks.squad.features import SquadFeature


@dataclasses.dataclass(frozen=True)
class SquadPrediction:
    """One answer candidate: its text, character span in the context, logits and probability."""
    text: str
    start: int
    end: int
    start_logit: float
    end_logit: float
    probability: float = 0.0

    @property
    def score(self) -> float:
        return self.start_logit + self.end_logit


def _best_indexes(logits: np.ndarray, n_best_size: int) -> list[int]:
    """Indexes of the ``n_best_size`` largest logits, largest first (stable on ties)."""
    return [int(i) for i in np.argsort(-logits, kind="stable")[:n_best_size]]


def _softmax(scores: list[float]) -> list[float]:
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def postprocess_squad(examples: Sequence[SquadExample], features: Sequence[SquadFeature],
                      start_logits: np.ndarray, end_logits: np.ndarray, n_best_size: int = 20,
                      max_answer_length: int = 30, version_2_with_negative: bool = False,
                      null_score_diff_threshold: float = 0.0):
    """Picks each question's answer from the logits of its features.

    Candidates are (start, end) pairs among each feature's ``n_best_size`` best start and end
    positions that lie in the context, start where the feature has max context, and satisfy
    ``start <= end < start + max_answer_length``. For SQuAD 2.0 the null score is the lowest
    ``start_logit[0] + end_logit[0]`` over the features; the answer is "" when
    ``null_score - best_non_null_score > null_score_diff_threshold``.

    Args:
        examples: the examples the features were made from.
        features: ``make_squad_features(examples, ...)``.
        start_logits, end_logits: float [num_features, seq], the model's outputs.
        n_best_size: candidates kept per feature and in the n-best list.
        max_answer_length: the longest answer, in tokens.
        version_2_with_negative: allow "no answer" (SQuAD 2.0).
        null_score_diff_threshold: how much the null score must beat the best span.

    Returns:
        (answers {qas_id: text}, nbest {qas_id: [SquadPrediction, ...]} best first,
        null_score_diffs {qas_id: float}, empty for SQuAD 1.1).
    """
    start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
    if len(features) != len(start_logits) or len(features) != len(end_logits):
        raise ValueError(f"got {len(features)} features but {len(start_logits)} start and "
                         f"{len(end_logits)} end logit rows; predict on exactly the features")
    by_example = defaultdict(list)
    for index, feature in enumerate(features):
        by_example[feature.example_index].append(index)
    answers, nbest_all, null_diffs = {}, {}, {}
    for example_index, example in enumerate(examples):
        candidates, null_score, null_logits = [], math.inf, (0.0, 0.0)
        for index in by_example[example_index]:
            feature, starts, ends = features[index], start_logits[index], end_logits[index]
            if version_2_with_negative and starts[0] + ends[0] < null_score:
                null_score = float(starts[0] + ends[0])
                null_logits = (float(starts[0]), float(ends[0]))
            length = len(feature.token_spans)
            for s in _best_indexes(starts[:length], n_best_size):
                for e in _best_indexes(ends[:length], n_best_size):
                    if (feature.token_spans[s] is None or feature.token_spans[e] is None
                            or not feature.token_is_max_context[s] or e < s
                            or e - s + 1 > max_answer_length):
                        continue
                    char_start, char_end = feature.token_spans[s][0], feature.token_spans[e][1]
                    candidates.append(SquadPrediction(
                        example.context[char_start:char_end], char_start, char_end,
                        float(starts[s]), float(ends[e])))
        if version_2_with_negative:
            candidates.append(SquadPrediction("", 0, 0, *null_logits))
        nbest, seen = [], set()
        for candidate in sorted(candidates, key=lambda c: c.score, reverse=True):
            if len(nbest) >= n_best_size:
                break
            if candidate.text in seen:
                continue
            seen.add(candidate.text)
            nbest.append(candidate)
        if version_2_with_negative and "" not in seen:
            nbest.append(SquadPrediction("", 0, 0, *null_logits))
        if not nbest:
            nbest.append(SquadPrediction("", 0, 0, 0.0, 0.0))
        probabilities = _softmax([c.score for c in nbest])
        nbest = [dataclasses.replace(c, probability=p) for c, p in zip(nbest, probabilities)]
        nbest_all[example.qas_id] = nbest
        best_non_null = next((c for c in nbest if c.text), None)
        if not version_2_with_negative:
            answers[example.qas_id] = nbest[0].text
            continue
        if best_non_null is None:
            null_diffs[example.qas_id] = math.inf
            answers[example.qas_id] = ""
            continue
        null_diffs[example.qas_id] = null_score - best_non_null.score
        answers[example.qas_id] = ("" if null_diffs[example.qas_id] > null_score_diff_threshold
                                   else best_non_null.text)
    return answers, nbest_all, null_diffs


def nbest_to_json(nbest: dict[str, list[SquadPrediction]]) -> dict[str, list[dict]]:
    """The n-best lists in run_squad.py's nbest_predictions.json layout."""
    return {qas_id: [{"text": c.text, "probability": c.probability, "start_logit": c.start_logit,
                      "end_logit": c.end_logit} for c in candidates]
            for qas_id, candidates in nbest.items()}
