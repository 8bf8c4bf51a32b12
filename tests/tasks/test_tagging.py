"""NER: word labels on first WordPieces, the way back to words and character spans, and a tiny
BertTokenClassifier that learns hand-made sentences and saves/reloads identically."""

import os

import keras
import numpy as np
import pytest

from keras_bert import BertPreprocessor, BertTokenClassifier
from keras_bert.tasks.ner.alignment import (align_words, align_words_windows, entity_spans,
                                     merge_window_tags, stack_tagged, window_word_ranges)
from keras_bert.errors import DataError
from keras_bert.tasks.input_examples import TaggedSentence
from keras_bert.tokenization import BertTokenizer
from keras_bert.tasks.ner.metrics import entity_scores
from tests.tasks.tiny_checkpoint import VOCAB, tiny_encoder

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
TOKENIZER = BertTokenizer(vocabulary=VOCAB)


def test_labels_go_on_first_pieces():
    words = ["Johns", "lived", "in", "Paris", "."]
    tags = ["B-PER", "O", "O", "B-LOC", "O"]
    feature = align_words(TOKENIZER, words, None, tags, LABELS, seq_length=10)
    tokens = TOKENIZER.convert_ids_to_tokens(feature.input_word_ids[:sum(feature.input_mask)])
    assert tokens == ["[CLS]", "john", "##s", "[UNK]", "in", "paris", ".", "[SEP]"]
    assert feature.word_starts == [1, 3, 4, 5, 6]
    #                 [CLS] john ##s [UNK] in paris . [SEP] [PAD] [PAD]
    assert feature.labels == [-1, 1, -1, 0, 0, 3, 0, -1, -1, -1]
    assert feature.input_mask == [1] * 8 + [0] * 2


def test_truncated_words_are_predicted_outside_and_unknown_tags_fail():
    words = ["john", "lives", "in", "paris", "city"]
    feature = align_words(TOKENIZER, words, None, None, LABELS, seq_length=5)
    assert feature.word_starts == [1, 2, 3, -1, -1]
    probabilities = np.zeros((5, len(LABELS)))
    probabilities[[1, 2, 3], [1, 0, 0]] = 1.0
    assert merge_window_tags([probabilities], [feature], LABELS) == ["B-PER", "O", "O", "O", "O"]
    sentence = TaggedSentence(["john", "paris"], ["B-PER", "B-GPE"], "train.txt", 40)
    with pytest.raises(DataError, match=r"train\.txt:41: unknown label 'B-GPE'"):
        align_words(TOKENIZER, sentence.words, None, sentence.tags, LABELS, 8, sentence.path,
                    sentence.line)


def test_entity_spans_follow_conlleval():
    assert entity_spans(["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "B-LOC"]) == [
        ("PER", 0, 1), ("LOC", 3, 4), ("LOC", 5, 5)]
    assert entity_spans(["I-PER", "I-LOC", "O"]) == [("PER", 0, 0), ("LOC", 1, 1)]


SENTENCES = [
    (["john", "lives", "in", "paris", "."], ["B-PER", "O", "O", "B-LOC", "O"]),
    (["mary", "went", "to", "london", "."], ["B-PER", "O", "O", "B-LOC", "O"]),
    (["john", "visited", "berlin", "city"], ["B-PER", "O", "B-LOC", "I-LOC"]),
    (["mary", "works", "in", "france", "."], ["B-PER", "O", "O", "B-LOC", "O"]),
]


@pytest.mark.slow
def test_token_classifier_learns_maps_back_and_round_trips(tmp_path):
    keras.utils.set_random_seed(1)
    tagger = BertTokenClassifier(tiny_encoder(), LABELS,
                                 preprocessor=BertPreprocessor(vocabulary=VOCAB, seq_length=16))
    train = [TaggedSentence(w, t, "train.txt", 1 + 6 * i) for i, (w, t) in
             enumerate(SENTENCES * 8)]
    tagger.compile(learning_rate=3e-3)
    history = tagger.fit(train, batch_size=8, epochs=6, verbose=0, bucket_lengths=[8, 16])
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    predicted = tagger.predict_tags([w for w, _ in SENTENCES])
    scores = entity_scores([t for _, t in SENTENCES], predicted)
    assert scores["f1"] == 100.0, predicted

    # Longer than seq_length (16): windows of whole words, each word tagged from the window
    # where it has the most context; nothing is lost to truncation.
    long_words = [w for w, _ in SENTENCES for w in w] * 2
    long_tags = [t for _, t in SENTENCES for t in t] * 2
    assert len(tagger.align_windows([long_words])[0]) > 3
    # Truncated at 14 pieces, only the first 4 of 16 entities could be found (F1 <= 40); the
    # tiny model only ever saw whole short sentences, so a window cut mid-sentence may miss one.
    assert entity_scores([long_tags], tagger.predict_tags([long_words]))["f1"] >= 85.0
    long_text = " ".join(long_words)
    assert len(tagger.predict_entities([long_text])[0]) >= 14

    text = "  Mary went\tto London.  "
    entities = tagger.predict_entities([text])[0]
    assert [(e["type"], e["text"]) for e in entities] == [("PER", "Mary"), ("LOC", "London")]
    assert all(text[e["start"]:e["end"]] == e["text"] for e in entities)

    path = os.path.join(tmp_path, "tagger.keras")
    tagger.save(path)
    reloaded = keras.saving.load_model(path)
    assert reloaded.label_names == LABELS
    x = stack_tagged(tagger.align([w for w, _ in SENTENCES]))[0]
    np.testing.assert_array_equal(reloaded.predict(x, verbose=0), tagger.predict(x, verbose=0))
    assert reloaded.predict_entities([text]) == [entities]


def test_window_word_ranges_cover_every_word_whole():
    assert window_word_ranges([2, 1, 3, 1, 2], budget=5, stride=2) == [(0, 2), (1, 4), (3, 5)]
    assert window_word_ranges([1] * 10, budget=4, stride=2) == [(0, 4), (2, 6), (4, 8), (6, 10)]
    assert window_word_ranges([1, 1], budget=4, stride=2) == [(0, 2)]
    assert window_word_ranges([9, 1], budget=4, stride=2) == [(0, 1), (1, 2)]  # a giant word
    for counts in ([1, 2, 3, 1, 1, 2, 4, 1, 1, 3], [2] * 25, [1, 4, 1, 4, 1, 4]):
        for budget, stride in ((4, 1), (6, 3), (8, 8)):
            ranges = window_word_ranges(counts, budget, stride)
            assert ranges[0][0] == 0 and ranges[-1][1] == len(counts)
            for (first, end), (next_first, _) in zip(ranges, ranges[1:]):
                assert first < next_first <= end  # progress, no gap
            assert all(sum(counts[f:e]) <= budget or e - f == 1 for f, e in ranges)


def test_long_sentences_become_windows_and_merge_by_max_context():
    words = ["john", "lives", "in", "paris", "city", "mary", "went", "to", "london", "."]
    tags = ["B-PER", "O", "O", "B-LOC", "I-LOC", "B-PER", "O", "O", "B-LOC", "O"]
    windows = align_words_windows(TOKENIZER, words, None, tags, LABELS, seq_length=6,
                                  window_stride=2, path="train.txt", line=1)
    assert len(windows) == 4  # 4 pieces per window, advancing 2 words
    assert [f.word_starts for f in windows[:2]] == [[1, 2, 3, 4] + [-1] * 6,
                                                    [-1, -1, 1, 2, 3, 4] + [-1] * 4]
    for feature in windows:  # every label sits on its word's piece
        for word, start in enumerate(feature.word_starts):
            if start >= 0:
                assert feature.labels[start] == LABELS.index(tags[word])
    assert align_words_windows(TOKENIZER, words[:3], None, None, LABELS, 6) == [
        align_words(TOKENIZER, words[:3], None, None, LABELS, 6)]
    with pytest.raises(DataError, match=r"train\.txt:6: unknown label 'B-GPE'"):
        align_words_windows(TOKENIZER, words, None, tags[:5] + ["B-GPE"] + tags[6:], LABELS, 6,
                            2, "train.txt", 1)

    # Each window predicts its own constant tag; a word takes the tag of the window where it is
    # most central: "paris" (word 3) is last in window 0 but second of four in window 1, "in"
    # (word 2) third in window 0 but first in window 1.
    probabilities = []
    for index, _ in enumerate(windows):
        p = np.zeros((6, len(LABELS)))
        p[:, index] = 1.0
        probabilities.append(p)
    merged = merge_window_tags(probabilities, windows, LABELS)
    assert merged[:4] == [LABELS[0], LABELS[0], LABELS[0], LABELS[1]]
    assert merged[-1] == LABELS[3]
