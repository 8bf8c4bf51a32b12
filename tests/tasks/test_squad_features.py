"""SQuAD features and post-processing on hand-made examples: character offsets through whitespace,
punctuation and subwords, answers across windows, max context, unanswerable questions."""

import numpy as np
import pytest

from keras_bert.tasks.squad.reader import SquadAnswer, SquadExample
from keras_bert.tasks.squad.answers import postprocess_squad
from keras_bert.tasks.squad.features import is_max_context, make_squad_features, window_starts
from keras_bert.errors import DataError
from keras_bert.tokenization import BertTokenizer

WORDS = ("the quick brown fox den in 1990 ##s where is who what when a b c d e f g h i j k l m "
         "n o p q r s t u v w x y z").split()
TOKENIZER = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS,
                                      *"()',!?."])


def example(question, context, answer=None, start=None, qas_id="q", impossible=False):
    answers = () if answer is None else (SquadAnswer(answer, context.index(answer)
                                                     if start is None else start),)
    return SquadExample(qas_id, question, context, answers, impossible, "dev.json", 7)


def logits_for(features, choices, seq):
    """start/end logits [num_features, seq]: -100 everywhere but (feature, start, end, score)."""
    starts, ends = np.full((len(features), seq), -100.0), np.full((len(features), seq), -100.0)
    for feature, start, end, score in choices:
        starts[feature, start] = ends[feature, end] = score
    return starts, ends


def test_offsets_keep_the_original_whitespace_punctuation_and_case():
    context = "  The  (Quick)\tbrown fox's den,  in 1990s!  "
    examples = [example("where is the fox?", context, "(Quick)\tbrown", qas_id="span"),
                example("when?", context, "1990", qas_id="subword")]
    features = make_squad_features(examples, TOKENIZER, max_seq_length=32, max_query_length=8)
    assert len(features) == 2
    for feature, ex in zip(features, examples):
        answer = ex.answers[0]
        assert feature.token_spans[feature.start_position][0] == answer.start
        assert feature.token_spans[feature.end_position][1] == answer.end
    tokens = TOKENIZER.convert_ids_to_tokens(features[0].input_word_ids[
        features[0].start_position:features[0].end_position + 1])
    assert tokens == ["(", "quick", ")", "brown"]
    starts, ends = logits_for(features, [(i, f.start_position, f.end_position, 9.0)
                                         for i, f in enumerate(features)], 32)
    answers, nbest, null_diffs = postprocess_squad(examples, features, starts, ends)
    assert answers == {"span": "(Quick)\tbrown", "subword": "1990"}
    assert nbest["span"][0].probability > nbest["span"][1].probability
    assert null_diffs == {}


def test_windows_and_max_context():
    assert window_starts(20, 11, 4) == [(0, 11), (4, 11), (8, 11), (12, 8)]
    # google-research/bert's own example: 'bought' (7) has the most context in span C.
    spans = [(0, 5), (3, 5), (6, 5)]
    assert [is_max_context(spans, i, 7) for i in range(3)] == [False, False, True]


def test_answer_across_windows_round_trips():
    context = " ".join("abcdefghijklmnopqrstuvwxyz")  # 26 one-letter tokens
    ex = example("who is", context, "j k l m", qas_id="long")
    features = make_squad_features([ex], TOKENIZER, max_seq_length=16, doc_stride=4,
                                   max_query_length=8)
    # 16 - 2 question tokens - 3 = 11 context tokens per window, starting 4 apart.
    assert [f.window_index for f in features] == [0, 1, 2, 3, 4]
    prefix = 4  # [CLS] who is [SEP]
    # The answer (tokens 9..12) fits windows starting at 4 and 8; elsewhere the labels are 0.
    assert [(f.start_position, f.end_position) for f in features] == [
        (0, 0), (9 - 4 + prefix, 12 - 4 + prefix), (9 - 8 + prefix, 12 - 8 + prefix), (0, 0),
        (0, 0)]
    # Window 1 (tokens 4..14) has the most context for tokens 8..11. A decoy in window 0 at
    # token 10 ("k"), whose max context is window 1, is skipped; a longer, better-scoring span
    # from token 8 is skipped while it exceeds max_answer_length.
    starts, ends = np.full((5, 16), -100.0), np.full((5, 16), -100.0)
    starts[0, 10 + prefix] = ends[0, 10 + prefix] = 50.0
    starts[1, 9 - 4 + prefix], ends[1, 12 - 4 + prefix] = 8.0, 8.0
    starts[1, 8 - 4 + prefix] = 9.0
    answers, nbest, _ = postprocess_squad([ex], features, starts, ends, max_answer_length=4)
    assert answers == {"long": "j k l m"}
    assert answers["long"] == context[ex.answers[0].start:ex.answers[0].end]
    answers, _, _ = postprocess_squad([ex], features, starts, ends, max_answer_length=30)
    assert answers == {"long": "i j k l m"}


def test_unanswerable_questions_and_the_null_threshold():
    context = "the quick brown fox"
    impossible = example("who is", context, qas_id="none", impossible=True)
    features = make_squad_features([impossible], TOKENIZER, max_seq_length=16,
                                   max_query_length=8)
    assert [(f.start_position, f.end_position) for f in features] == [(0, 0)]
    starts, ends = logits_for(features, [(0, 0, 0, 5.0), (0, 5, 6, 3.0)], 16)
    answers, nbest, null_diffs = postprocess_squad([impossible], features, starts, ends,
                                                   version_2_with_negative=True)
    assert answers == {"none": ""}
    assert null_diffs["none"] == pytest.approx(10.0 - 6.0)
    assert {c.text for c in nbest["none"]} >= {"", "quick brown"}
    answers, _, _ = postprocess_squad([impossible], features, starts, ends,
                                      version_2_with_negative=True,
                                      null_score_diff_threshold=5.0)
    assert answers == {"none": "quick brown"}


def test_answer_without_tokens_fails_with_file_and_line():
    bad = example("who is", "the  fox", " ", start=3, qas_id="blank")
    with pytest.raises(DataError, match=r"dev\.json:7: question 'blank': answer ' ' has no "
                                        r"token"):
        make_squad_features([bad], TOKENIZER, max_seq_length=16, max_query_length=8)
    with pytest.raises(ValueError, match="must exceed max_query_length"):
        make_squad_features([bad], TOKENIZER, max_seq_length=10, max_query_length=8)
