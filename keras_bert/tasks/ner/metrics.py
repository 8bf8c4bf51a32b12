"""conlleval's entity-level precision, recall and F1 (the CoNLL-2003 script, re-implemented and
checked against its numbers on hand-made cases)."""

from __future__ import annotations

import collections
from collections.abc import Sequence

from keras_bert.tasks.ner.alignment import chunk_ended, chunk_started, split_tag


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
