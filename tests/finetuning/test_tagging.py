"""NER: word labels on first WordPieces, the way back to words and character spans, and a tiny
BertTokenClassifier that learns hand-made sentences and saves/reloads identically."""

import os

import keras
import numpy as np
import pytest

from keras_bert import BertPreprocessor, BertTokenClassifier
from keras_bert.data.tagging import align_words, entity_spans, stack_tagged, word_tags
from keras_bert.data.task_examples import DataError, TaggedSentence
from keras_bert.tokenization import BertTokenizer
from keras_bert.training.finetune_metrics import entity_scores
from tests.finetuning.tiny_checkpoint import VOCAB, tiny_encoder

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
    assert word_tags(probabilities, feature.word_starts, LABELS) == ["B-PER", "O", "O", "O", "O"]
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
