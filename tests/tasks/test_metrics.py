"""Fine-tuning metrics against the official scripts' numbers on hand-made cases.

The expected values were produced by running SQuAD's evaluate-v1.1.py / evaluate-v2.0.py and CoNLL's
conlleval (perl) on exactly these inputs.
"""

import numpy as np
import pytest

from keras_bert.tasks.classification.metrics import classification_scores, regression_scores
from keras_bert.tasks.ner.metrics import entity_scores
from keras_bert.tasks.squad.metrics import exact_match, f1_score, normalize_answer, squad_scores

GOLD = {
    "a": ["Denver Broncos", "the Broncos"],
    "b": ["Santa Clara, California"],
    "c": ["1990s"],
    "d": [],
    "e": [],
    "f": ["an apple a day"],
    "g": ["the", "The end."],
    "h": ["New  York\tCity!"],
}
PREDICTIONS = {"a": "Broncos", "b": "Santa Clara", "c": "the 1990s.", "d": "", "e": "Paris",
               "f": "apple day a", "g": "", "h": "new york city"}


def test_normalization_and_pairs():
    assert normalize_answer("  The Eiffel-Tower, in  Paris!") == "eiffeltower in paris"
    assert normalize_answer("an\tApple") == "apple"
    assert exact_match("the 1990s.", "1990s") == 1.0
    assert f1_score("Santa Clara", "Santa Clara, California") == pytest.approx(0.8)
    # An empty answer against an article-only gold: SQuAD 1.1 gives F1 0, 2.0 gives 1.
    assert f1_score("", "the") == 0.0
    assert f1_score("", "the", version_2=True) == 1.0


def test_squad_v1_matches_official_script():
    gold = {k: v for k, v in GOLD.items() if v}
    assert squad_scores(gold, PREDICTIONS) == {"exact_match": 83.33333333333333, "f1": 80.0}


def test_squad_v2_matches_official_script():
    assert squad_scores(GOLD, PREDICTIONS, version_2=True) == {
        "exact": 62.5, "f1": 72.5, "total": 8,
        "HasAns_exact": 66.66666666666667, "HasAns_f1": 80.0, "HasAns_total": 6,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2}


def test_squad_v1_counts_missing_predictions_as_wrong():
    assert squad_scores({"a": ["x"], "b": ["y"]}, {"a": "x"}) == {"exact_match": 50.0,
                                                                   "f1": 50.0}


# word, gold, predicted: IOB1 (CoNLL-2003's scheme) and BIO mixed, with boundary and type errors.
CONLL = """
John B-PER B-PER
Smith I-PER I-PER
lives O O
in O O
New B-LOC B-LOC
York I-LOC B-LOC
. O O

EU I-ORG I-ORG
rejects O O
German I-MISC I-MISC
call O I-MISC
to O O
boycott O O
British I-MISC I-LOC
lamb O O

Peter B-PER I-PER
Blackburn I-PER I-PER
met O O
Mary B-PER B-PER
Ann I-PER B-PER
in O O
Paris B-LOC B-LOC

Bank I-ORG B-ORG
of I-ORG I-ORG
England I-ORG I-LOC
said O O
"""


def _sentences(text):
    blocks = [block.split("\n") for block in text.strip().split("\n\n")]
    rows = [[line.split() for line in block] for block in blocks]
    return [[r[1] for r in s] for s in rows], [[r[2] for r in s] for s in rows]


def test_entity_scores_match_conlleval():
    gold, predicted = _sentences(CONLL)
    scores = entity_scores(gold, predicted)
    # conlleval: "processed 26 tokens with 9 phrases; found: 12 phrases; correct: 4.
    # accuracy: 73.08%; precision: 33.33%; recall: 44.44%; FB1: 38.10"
    assert (scores["gold_entities"], scores["predicted_entities"],
            scores["correct_entities"]) == (9, 12, 4)
    assert scores["precision"] == pytest.approx(100 / 3)
    assert scores["recall"] == pytest.approx(400 / 9)
    assert scores["f1"] == pytest.approx(38.0952380952)
    assert scores["accuracy"] == pytest.approx(73.0769230769)
    per_type = {k: (round(v["precision"], 2), round(v["recall"], 2), round(v["f1"], 2),
                    v["predicted_entities"]) for k, v in scores["per_type"].items()}
    assert per_type == {"LOC": (20.0, 50.0, 28.57, 5), "MISC": (0.0, 0.0, 0.0, 1),
                        "ORG": (50.0, 50.0, 50.0, 2), "PER": (50.0, 66.67, 57.14, 4)}


def test_entity_scores_iobes_match_conlleval():
    gold = ["S-PER", "O", "B-LOC", "E-LOC", "S-LOC", "O", "B-ORG", "I-ORG", "E-ORG", "S-PER",
            "S-PER"]
    predicted = ["S-PER", "B-PER", "B-LOC", "I-LOC", "E-LOC", "O", "B-ORG", "E-ORG", "O",
                 "S-PER", "S-PER"]
    scores = entity_scores([gold], [predicted])
    # conlleval: 4 phrases, found 4, correct 2; accuracy 54.55%, precision = recall = 50%.
    assert (scores["gold_entities"], scores["predicted_entities"],
            scores["correct_entities"]) == (4, 4, 2)
    assert scores["f1"] == pytest.approx(50.0)
    assert scores["accuracy"] == pytest.approx(600 / 11)


def test_entity_scores_rejects_length_mismatch():
    with pytest.raises(ValueError, match="2 gold tags but 1 predicted"):
        entity_scores([["O", "O"]], [["O"]])


def test_classification_and_regression_scores():
    labels = [1, 1, 1, 0, 0, 0, 1, 0]
    predictions = [1, 1, 0, 0, 0, 1, 1, 0]
    scores = classification_scores(labels, predictions)
    assert scores["accuracy"] == 0.75
    assert scores["f1"] == pytest.approx(0.75)  # tp=3, fp=1, fn=1
    assert scores["matthews_corrcoef"] == pytest.approx(0.5)  # (9 - 1) / sqrt(4*4*4*4)
    assert "f1" not in classification_scores([0, 1, 2], [0, 2, 2])

    gold = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    predicted = np.array([0.5, 0.4, 2.5, 2.5, 4.5, 6.0])
    scores = regression_scores(gold, predicted)
    assert scores["pearson"] == pytest.approx(np.corrcoef(gold, predicted)[0, 1])
    # Ranks of predicted with the tie averaged: [2, 1, 3.5, 3.5, 5, 6].
    assert scores["spearman"] == pytest.approx(
        np.corrcoef([1, 2, 3, 4, 5, 6], [2, 1, 3.5, 3.5, 5, 6])[0, 1])
