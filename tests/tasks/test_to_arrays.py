"""``to_arrays``, the public conversion of a task model's in-memory inputs: the forms each task
model documents, and the arrays and shapes it says they become."""

import numpy as np

from keras_bert import (BertClassifier, BertEmbedder, BertMultipleChoice, BertPreprocessor,
                        BertQuestionAnswerer, BertTokenClassifier)
from keras_bert.tasks.input_examples import MultipleChoiceExample, TaggedSentence, TextExample
from keras_bert.tasks.squad.reader import SquadAnswer, SquadExample
from keras_bert.tokenization import BertTokenizer
from tests.tasks.tiny_checkpoint import VOCAB, tiny_encoder

ENCODER = tiny_encoder()


def preprocessor(seq_length=16):
    return BertPreprocessor(vocabulary=VOCAB, seq_length=seq_length)


def test_classifier_texts_pairs_examples_and_packed_ids():
    classifier = BertClassifier(ENCODER, 2, preprocessor=preprocessor(), label_names=["no", "yes"])
    x, y = classifier.to_arrays(["a dog", "the cat"], ["yes", "no"])
    assert x.dtype == object and x.tolist() == ["a dog", "the cat"]
    assert y.dtype == np.int32 and y.tolist() == [1, 0]
    (texts, pairs), y = classifier.to_arrays([TextExample("a", "b", "no"),
                                              TextExample("c", "d", "yes")])
    assert texts.tolist() == ["a", "c"] and pairs.tolist() == ["b", "d"] and y.tolist() == [0, 1]
    packed = dict(BertTokenizer(vocabulary=VOCAB).encode_batch(["a dog"], seq_length=16))
    x, y = classifier.to_arrays(packed)
    assert set(x) == set(packed) and y is None
    regressor = BertClassifier(ENCODER, 1, preprocessor=preprocessor())
    _, scores = regressor.to_arrays(["a", "b"], [0.5, 4])
    assert scores.dtype == np.float32 and scores.shape == (2, 1)


def test_tagger_rows_are_windows_with_labels_on_first_pieces():
    tagger = BertTokenClassifier(ENCODER, ["O", "B-PER"], preprocessor=preprocessor(8),
                                 window_stride=2)
    long = TaggedSentence(["john", "lives", "in", "paris", "and", "mary", "in", "london"],
                          ["B-PER", "O", "O", "O", "O", "B-PER", "O", "O"])
    x, y = tagger.to_arrays([TaggedSentence(["john", "sat"], ["B-PER", "O"]), long])
    windows = len(tagger.align([long])) + 1
    assert windows > 2  # the long sentence is cut into windows of 8 pieces
    assert x["input_word_ids"].shape == (windows, 8) and x["input_word_ids"].dtype == np.int32
    assert y.shape == (windows, 8) and y.dtype == np.int32
    assert y[0].tolist() == [-1, 1, 0, -1, -1, -1, -1, -1]  # [CLS] john sat [SEP] [PAD]...
    _, unlabelled = tagger.to_arrays(["john sat down"])
    assert unlabelled is None


def test_question_answerer_windows_and_span_labels():
    context = "john lives in paris . mary works in london ."
    qa = BertQuestionAnswerer(ENCODER, preprocessor=preprocessor(), doc_stride=6,
                              max_query_length=8)
    example = SquadExample("q", "where does john live ?", context,
                           (SquadAnswer("paris", context.index("paris")),))
    x, y = qa.to_arrays([example])
    assert x["input_word_ids"].shape == (2, 16)  # two windows of the context
    assert set(y) == {"start_logits", "end_logits"} and y["start_logits"].shape == (2,)
    assert y["start_logits"][1] == 0  # the second window does not hold the answer: [CLS]
    _, unanswered = qa.to_arrays([("where does john live ?", context)])
    assert unanswered is None


def test_multiple_choice_contexts_and_choices():
    model = BertMultipleChoice(ENCODER, 3, preprocessor=preprocessor())
    (contexts, choices), y = model.to_arrays(
        [MultipleChoiceExample("john sat", ["down", "up", "away"], 2),
         MultipleChoiceExample("a dog", ["ran", "sat", "ate"], 0)])
    assert contexts.shape == (2,) and choices.shape == (2, 3) and choices[1, 2] == "ate"
    assert y.dtype == np.int32 and y.tolist() == [2, 0]


def test_embedder_texts_and_pairs():
    embedder = BertEmbedder(ENCODER, preprocessor=preprocessor(), feature_layers=[-1])
    assert embedder.to_arrays("one text")[0].tolist() == ["one text"]
    (texts, pairs), y = embedder.to_arrays([("a", "b"), ("c", "d")])
    assert texts.tolist() == ["a", "c"] and pairs.tolist() == ["b", "d"] and y is None
