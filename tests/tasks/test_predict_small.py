"""``predict`` on in-memory inputs (issue 21, item 5): small calls tokenize with a traced function
kept between calls and run in sorted chunks of 8 rows inside one traced call (issue 38); larger
inputs keep batches of batch_size.
Every path must give the outputs of Keras' predict on the task's tf.data pipeline (every row
padded to seq_length, in the caller's order), and tracing must not grow with the calls."""

import random

import keras
import numpy as np
import pytest

from keras_bert import (BertClassifier, BertEmbedder, BertMultipleChoice, BertPreprocessor,
                        BertQuestionAnswerer)
from tests.tasks.tiny_checkpoint import VOCAB, WORDS, tiny_encoder

SEQ_LENGTH = 32


def sentences(count: int, seed: int = 0) -> list[str]:
    """``count`` texts of 1 to 40 words (the longest are cut to SEQ_LENGTH tokens by the
    classifiers here, ``window_combination="first"``: the reference, Keras' predict on the
    padded pipeline, answers per row, not per text)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40)))
            for _ in range(count)]


def preprocessor():
    return BertPreprocessor(vocabulary=VOCAB, seq_length=SEQ_LENGTH)


def padded_predict(model, x):
    """The reference: Keras' predict on the task's tf.data pipeline, rows in the caller's order
    padded to seq_length."""
    return model.predict(model.make_dataset(x, batch_size=32), verbose=0)


def assert_same_outputs(outputs, expected, mask):
    """Equal to float tolerance; outputs with a sequence axis only where ``mask`` [rows, seq]
    is 1 (predict leaves zeros past a row's text)."""
    for got, want in zip(keras.tree.flatten(outputs), keras.tree.flatten(expected)):
        assert got.shape == want.shape
        if got.ndim >= 3:
            got, want = got[mask == 1], want[mask == 1]
        np.testing.assert_allclose(got, want, atol=1e-5)


# One model per kind for every count below: each count's path (one row, a chunk, a batch, several
# batches) must answer as the padded pipeline on a model that has run the others before.
@pytest.fixture(scope="module")
def classifier():
    return BertClassifier(tiny_encoder(), 3, preprocessor=preprocessor(),
                          window_combination="first")


@pytest.fixture(scope="module")
def embedder():
    return BertEmbedder(tiny_encoder(), preprocessor=preprocessor(), feature_layers=[-1, 0])


@pytest.fixture(scope="module")
def featured_classifier():
    return BertClassifier(
        tiny_encoder(), 2, preprocessor=preprocessor(), window_combination="first",
        numeric_features={"age": {"mean": 30.0, "variance": 100.0}},
        categorical_features={"country": {"vocabulary": ["fr", "us"]}})


@pytest.fixture(scope="module")
def chooser():
    return BertMultipleChoice(tiny_encoder(), num_choices=3, preprocessor=preprocessor())


@pytest.fixture(scope="module")
def question_answerer():
    return BertQuestionAnswerer(tiny_encoder(), preprocessor=preprocessor())


@pytest.mark.parametrize("count", [1, 2, 32, 100])
def test_texts_and_pairs_match_the_padded_pipeline(classifier, count):
    texts = sentences(count)
    assert_same_outputs(classifier.predict(texts, verbose=0), padded_predict(classifier, texts),
                        None)
    pairs = list(zip(texts, sentences(count, seed=1)))
    probabilities = classifier.predict(pairs, verbose=0)
    assert_same_outputs(probabilities, padded_predict(classifier, pairs), None)
    # A batch_size smaller than the input: batches of it, sorted over the whole input.
    np.testing.assert_allclose(classifier.predict(pairs, batch_size=5, verbose=0),
                               probabilities, atol=1e-5)


@pytest.mark.parametrize("count", [1, 32, 100])
def test_embedder_sequence_outputs_match_the_padded_pipeline(embedder, count):
    texts = sentences(count, seed=2)
    outputs = embedder.predict(texts, verbose=0)
    assert outputs["token_features"].shape == (count, SEQ_LENGTH, 128)
    mask = preprocessor()(np.array(texts))["input_mask"].numpy()
    assert_same_outputs(outputs, padded_predict(embedder, texts), mask)


@pytest.mark.parametrize("count", [2, 40])
def test_span_logits_score_padding_as_the_head_does_past_each_chunk(question_answerer, count):
    # SpanHead scores padding PADDING_LOGIT; predict pads a chunk's logits back to seq_length
    # with the same score (BertTask.sequence_padding), not 0, which could outscore the text.
    qa = question_answerer
    short = [" ".join(text.split()[:6]) for text in sentences(2 * count, seed=4)]
    ids = preprocessor()([np.array(short[:count]), np.array(short[count:])])
    ids = {name: value.numpy() for name, value in ids.items()}
    assert ids["input_mask"].sum(1).max() < SEQ_LENGTH - 8  # chunks shorter than seq_length
    outputs = qa.predict(ids, verbose=0)
    expected = qa(ids)  # every row padded to seq_length in one call
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(outputs[name], np.asarray(expected[name]), atol=1e-4)
        assert (outputs[name][ids["input_mask"] == 0] == -10000.0).all()


@pytest.mark.parametrize("count", [1, 2, 32, 100])
def test_features_and_choices_match_the_padded_pipeline(featured_classifier, chooser, count):
    rng = np.random.default_rng(count)
    data = {"text": sentences(count, seed=3),
            "age": [None if a < 5 else float(a) for a in rng.integers(0, 80, count)],
            "country": list(rng.choice(["fr", "us", "", "de"], count))}
    assert_same_outputs(featured_classifier.predict(data, verbose=0),
                        padded_predict(featured_classifier, data), None)

    examples = [(context, sentences(3, seed=index)) for index, context
                in enumerate(sentences(count, seed=4))]
    assert_same_outputs(chooser.predict(examples, verbose=0), padded_predict(chooser, examples),
                        None)


def test_rows_run_sorted_in_chunks_then_in_batches_of_batch_size(classifier, chooser,
                                                                   monkeypatch):
    # The module's models, after the tests above ran them; predict_on_batch is recorded (and
    # run_eagerly set) for this test only.
    calls = []
    predict_on_batch = classifier.predict_on_batch

    def recording(batch):
        calls.append(batch["input_mask"].sum(axis=-1))
        return predict_on_batch(batch)

    monkeypatch.setattr(classifier, "predict_on_batch", recording)
    classifier.predict(sentences(20), verbose=0)  # one batch: one traced call of its chunks
    assert calls == []
    assert len(classifier._pack_functions.chunked) == 1
    # Debugging: Keras' own call for each chunk of 8 rows.
    monkeypatch.setattr(classifier, "run_eagerly", True)
    classifier.predict(sentences(20), verbose=0)
    assert [len(lengths) for lengths in calls] == [8, 8, 4]
    classifier.run_eagerly = False
    calls.clear()
    classifier.predict(sentences(100), verbose=0)  # batches of 32, as before
    assert [len(lengths) for lengths in calls] == [32, 32, 32, 4]
    ordered = np.concatenate(calls)
    assert (np.diff(ordered) >= 0).all()  # sorted by length over the whole input
    with pytest.raises(ValueError, match="BertClassifier.predict got no examples"):
        classifier.predict([], verbose=0)

    # Choices have an axis more than the traced call takes: predict_on_batch runs each chunk.
    calls.clear()
    chooser_predict_on_batch = chooser.predict_on_batch

    def recording_choices(batch):
        calls.append(batch["input_mask"])
        return chooser_predict_on_batch(batch)

    monkeypatch.setattr(chooser, "predict_on_batch", recording_choices)
    chooser.predict([(context, sentences(3, seed=1)) for context in sentences(20)], verbose=0)
    assert [len(mask) for mask in calls] == [8, 8, 4]


def test_the_traced_call_follows_quantize():
    # Keras drops its predict function when the model's layers change (quantize, compile); the
    # kept small-input call is traced again with it, so an int8 model runs its int8 layers.
    classifier = BertClassifier(tiny_encoder(), 3, preprocessor=preprocessor(),
                                window_combination="first")
    texts = sentences(20)
    float32 = classifier.predict(texts, verbose=0)
    classifier.quantize("int8")
    int8 = classifier.predict(texts, verbose=0)
    assert not np.allclose(int8, float32, atol=1e-6)
    np.testing.assert_allclose(int8, padded_predict(classifier, texts), atol=1e-5)


def test_tracing_is_bounded_and_follows_the_vocabulary():
    classifier = BertClassifier(tiny_encoder(), 2, preprocessor=preprocessor())
    traces = []
    preprocess = classifier.pack_batch

    def counting(x):
        traces.append(x)
        return preprocess(x)

    classifier.pack_batch = counting
    for count in (1, 3, 8, 32, 33, 300, 1, 7):
        classifier.predict(sentences(count, seed=count), verbose=0)
    assert len(traces) == 1  # one trace for texts of any count and length
    small_call, = classifier._pack_functions.chunked.values()
    assert small_call.experimental_get_tracing_count() == 1  # and one of the small-input call
    pairs = list(zip(sentences(5), sentences(5, seed=1)))
    classifier.predict(pairs, verbose=0)
    classifier.predict(pairs[:2], verbose=0)
    assert len(traces) == 2  # and one more for pairs
    # The model itself: Keras' predict function relaxes its shapes after a few lengths.
    assert classifier.predict_function.experimental_get_tracing_count() <= 3

    # A new vocabulary: the kept function is dropped, and the new ids are used.
    before = classifier.predict(["the cat sat"], verbose=0)
    classifier.preprocessor.set_vocabulary(VOCAB[:5] + list(reversed(VOCAB[5:])))
    after = classifier.predict(["the cat sat"], verbose=0)
    np.testing.assert_allclose(after, padded_predict(classifier, ["the cat sat"]), atol=1e-5)
    assert not np.allclose(after, before)
