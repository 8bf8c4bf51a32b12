"""Task models on a tiny random BERT: raw text in fit/predict (Python lists, pairs, examples),
length bucketing, label names, and `.keras` save/reload with identical predictions."""

import os

import keras
import numpy as np
import pytest

from keras_bert import (BertClassifier, BertEmbedder, BertMultipleChoice, BertPreprocessor,
                        BertQuestionAnswerer)
from keras_bert.tasks.squad.reader import SquadAnswer, SquadExample
from keras_bert.errors import DataError
from keras_bert.tasks.input_examples import TextExample
from keras_bert.tokenization import BertTokenizer
from tests.tasks.tiny_checkpoint import VOCAB, tiny_encoder


def preprocessor(seq_length=16):
    return BertPreprocessor(vocabulary=VOCAB, seq_length=seq_length)


def reload(model, tmp_path):
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    return keras.saving.load_model(path)


def test_classifier_predicts_raw_text_and_round_trips(tmp_path):
    classifier = BertClassifier(tiny_encoder(), 2, preprocessor=preprocessor(),
                                label_names=["negative", "positive"])
    probabilities = classifier.predict(["the movie was good", "a terrible film"], verbose=0)
    assert probabilities.shape == (2, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
    pairs = [("the movie", "was good"), ("a film", "was awful")]
    pair_probabilities = classifier.predict(pairs, verbose=0)
    # The same pairs packed by the Python tokenizer (ids a user may already have).
    packed = BertTokenizer(vocabulary=VOCAB).encode_batch(
        [a for a, _ in pairs], [b for _, b in pairs], seq_length=16)
    np.testing.assert_allclose(classifier.predict(dict(packed), verbose=0), pair_probabilities,
                               atol=1e-6)
    assert not np.allclose(pair_probabilities, probabilities)

    reloaded = reload(classifier, tmp_path)
    assert isinstance(reloaded, BertClassifier) and reloaded.label_names == ["negative",
                                                                             "positive"]
    np.testing.assert_array_equal(
        reloaded.predict(["the movie was good", "a terrible film"], verbose=0), probabilities)
    np.testing.assert_array_equal(reloaded.predict(pairs, verbose=0), pair_probabilities)
    assert reloaded.predict_labels(["the movie was good"]) == \
        classifier.predict_labels(["the movie was good"])


def test_classifier_rejects_bad_labels_and_texts():
    classifier = BertClassifier(tiny_encoder(), 2, preprocessor=preprocessor(),
                                label_names=["no", "yes"])
    with pytest.raises(DataError, match=r"dev\.tsv:4: unknown label 'maybe'"):
        classifier.make_dataset([TextExample("good", None, "maybe", "dev.tsv", 4)])
    with pytest.raises(ValueError, match=r"text\[1\] is None; every text must be a string"):
        classifier.make_dataset(["good", None])
    classifier.make_dataset(["good", ""])  # "" is valid text, as when served (issue 14)
    with pytest.raises(ValueError, match="label 2 is outside 0..1"):
        classifier.make_dataset(["good"], [2])


def test_regression_scores_pairs():
    regressor = BertClassifier(tiny_encoder(), 1, preprocessor=preprocessor())
    examples = [TextExample("a man sat", "a man sat down", 4.5),
                TextExample("a dog ran", "the city river", 0.5)]
    _, y = next(iter(regressor.make_dataset(examples, batch_size=2)))
    assert y.numpy().tolist() == [[4.5], [0.5]]  # the examples' scores are the targets
    assert regressor.predict(examples, verbose=0).shape == (2, 1)
    assert regressor.get_config()["activation"] is None


def test_bucketed_batches_match_unbucketed_outputs():
    classifier = BertClassifier(tiny_encoder(), 3, preprocessor=preprocessor(32))
    texts = ["good", "the movie was really very good and nice", "bad film", "a meal"]
    padded = classifier.predict(texts, verbose=0)
    bucketed = classifier.make_dataset(texts, batch_size=2, bucket_lengths=[4, 8, 32])
    # Ordered by bucket ([CLS] good [SEP]: 3, bad film and a meal: 4, all in bucket 4; the long
    # text: 10, bucket 32) and cut into batches, each padded to the bucket of its longest row:
    # [good, bad film] to 4, [a meal, the long text] to 32.
    assert [tuple(b["input_word_ids"].shape) for b in bucketed] == [(2, 4), (2, 32)]
    # Padding does not change the outputs: each bucket's rows equal the fully padded ones.
    rows = {}
    for batch in bucketed:
        for row, ids in zip(classifier.predict(batch, verbose=0), batch["input_word_ids"].numpy()):
            rows[tuple(ids[ids > 0])] = row
    tokenizer = BertTokenizer(vocabulary=VOCAB)
    for text, expected in zip(texts, padded):
        key = tuple(tokenizer.encode(text)["input_word_ids"])
        np.testing.assert_allclose(rows[key], expected, atol=1e-5)


@pytest.mark.slow
def test_multiple_choice_fits_and_round_trips(tmp_path):
    model = BertMultipleChoice(tiny_encoder(), num_choices=3, preprocessor=preprocessor())
    data = [("john sat", ["down", "the river", "a cat"]), ("the dog ran", ["away", "up", "no"])]
    model.compile(learning_rate=1e-3)
    model.fit(data * 4, [0, 0] * 4, batch_size=4, epochs=1, verbose=0)
    probabilities = model.predict(data, verbose=0)
    assert probabilities.shape == (2, 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(reload(model, tmp_path).predict(data, verbose=0),
                                  probabilities)
    # The same examples as text arrays (contexts [n], choices [n, 3]) and as packed ids.
    contexts = np.array([context for context, _ in data])
    choices = np.array([choice for _, choice in data])
    np.testing.assert_array_equal(model.predict((contexts, choices), verbose=0), probabilities)
    packed = BertTokenizer(vocabulary=VOCAB).encode_batch(
        list(np.repeat(contexts, 3)), list(choices.reshape(-1)), seq_length=16)
    packed = {name: np.asarray(ids).reshape(2, 3, 16) for name, ids in packed.items()}
    np.testing.assert_allclose(model.predict(packed, verbose=0), probabilities, atol=1e-6)
    with pytest.raises(ValueError, match="has 2 choices; this model takes 3"):
        model.predict([("a", ["b", "c"])])


def test_question_answerer_loss_answers_and_round_trip(tmp_path):
    context = "john lives in paris . mary works in london ."
    examples = [SquadExample("q1", "where does john live ?", context,
                             (SquadAnswer("paris", context.index("paris")),)),
                SquadExample("q2", "who works in london ?", context, (SquadAnswer("mary", 21),))]
    qa = BertQuestionAnswerer(tiny_encoder(), preprocessor=preprocessor(16), doc_stride=6,
                              max_query_length=8)
    # 11 context tokens, 16 - 5 question tokens - 3 = 8 per window: windows at 0 and 6.
    assert [f.window_index for f in qa.make_features(examples)] == [0, 1, 0, 1]
    qa.compile()
    start, end = examples[0].answers[0].start, examples[0].answers[0].end
    features = qa.make_features(examples[:1])
    # The loss is the mean of the start and end cross-entropies (run_squad.py's).
    x, y = next(iter(qa.make_dataset(examples[:1], batch_size=8)))  # both windows
    y = {name: positions.numpy() for name, positions in y.items()}
    logits = qa.predict(x, verbose=0)
    expected = 0.0
    for name, positions in (("start_logits", y["start_logits"]), ("end_logits", y["end_logits"])):
        log_probs = logits[name] - np.log(np.exp(logits[name]).sum(-1, keepdims=True))
        expected += 0.5 * -np.mean(log_probs[np.arange(len(positions)), positions])
    assert qa.evaluate(x, y, verbose=0, return_dict=True)["loss"] == pytest.approx(expected,
                                                                                   rel=1e-4)
    assert features[0].token_spans[y["start_logits"][0]] == (start, end)
    answers, nbest, _ = qa.predict_answers(examples)
    assert set(answers) == {"q1", "q2"} and all(a in context for a in answers.values())
    reloaded = reload(qa, tmp_path)
    assert (reloaded.doc_stride, reloaded.max_query_length) == (6, 8)
    assert reloaded.predict_answers(examples)[0] == answers


def test_embedder_raw_text_matches_packed_ids_and_round_trips(tmp_path):
    embedder = BertEmbedder(tiny_encoder(), preprocessor=preprocessor(), pooling="cls",
                            normalize=True, feature_layers=[-1, 0])
    texts = ["the cat sat down", "a dog"]
    embeddings = embedder.embed(texts)
    packed = BertTokenizer(vocabulary=VOCAB).encode_batch(texts, seq_length=16)
    outputs = embedder.predict(packed, verbose=0)
    np.testing.assert_allclose(outputs["embedding"], embeddings, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, rtol=1e-5)
    assert outputs["token_features"].shape == (2, 16, 128)
    np.testing.assert_array_equal(reload(embedder, tmp_path).embed(texts), embeddings)
    with pytest.raises(ValueError, match="feature_layers"):
        BertEmbedder(tiny_encoder(), feature_layers=[5])
