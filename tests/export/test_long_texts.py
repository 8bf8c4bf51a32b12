"""Exports of texts longer than the model (issue 52): a classifier's raw-text serving_default and
classify signature split each text into windows in the graph, run all the batch's windows and
answer one row per text, equal to ``predict``, through TensorFlow's graph-mode loader (the path
TF Serving takes); ``max_windows`` refuses a longer text naming the limit."""

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.example import example_pb2

from keras_bert import BertClassifier, BertPreprocessor
from keras_bert.export import export_model
from tests.serving.graph_mode import GraphModeModel
from tests.tasks.tiny_checkpoint import VOCAB, WORDS, tiny_encoder

SEQ_LENGTH = 8  # windows of 6 WordPieces
STRIDE = 3
TEXTS = ["the cat sat", " ".join(WORDS[:12]), "", " ".join(WORDS[20:47]), "a good movie"]


def classifier(num_classes=3, **kwargs):
    preprocessor = BertPreprocessor(vocabulary=VOCAB, seq_length=SEQ_LENGTH)
    return BertClassifier(tiny_encoder(), num_classes, preprocessor=preprocessor,
                          window_stride=STRIDE, **kwargs)


def example(text):
    proto = example_pb2.Example()
    proto.features.feature["text"].bytes_list.value.append(text.encode())
    return proto.SerializeToString()


@pytest.fixture(scope="module")
def model():
    """The classifier of the text and the pair exports below."""
    return classifier(label_names=["neg", "neu", "pos"])


@pytest.fixture(scope="module")
def served(model, tmp_path_factory):
    """The model, its export loaded as TF Serving loads it, and its ``predict`` on TEXTS."""
    path = export_model(model, str(tmp_path_factory.mktemp("long")), "clf", max_windows=8)
    return model, GraphModeModel(path), model.predict(TEXTS, verbose=0)


def test_serving_default_answers_one_row_per_text_as_predict(served):
    model, graph, expected = served
    outputs = graph.run("serving_default", text=np.array(TEXTS, object))
    assert outputs["probabilities"].shape == (len(TEXTS), 3)
    np.testing.assert_allclose(outputs["probabilities"], expected, atol=1e-5)
    assert [n.decode() for n in outputs["class_names"]] == model.predict_labels(TEXTS)
    # One long text alone, and a batch of short ones: the same rows.
    alone = graph.run("serving_default", text=np.array(TEXTS[1:2], object))
    np.testing.assert_allclose(alone["probabilities"], expected[1:2], atol=1e-5)


def test_classify_reads_long_texts_as_windows_too(served):
    _, graph, expected = served
    outputs = graph.run("classify", inputs=np.array([example(t) for t in TEXTS], object))
    np.testing.assert_allclose(outputs["scores"], expected, atol=1e-5)


def test_a_text_past_max_windows_is_refused_naming_the_limit(served):
    _, graph, _ = served
    too_long = " ".join(WORDS[:30])  # 30 pieces: 9 windows of 6 at stride 3
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_windows=8"):
        graph.run("serving_default", text=np.array(["the cat", too_long], object))


def test_regression_without_dynamic_padding(tmp_path):
    model = classifier(num_classes=1)
    graph = GraphModeModel(export_model(model, str(tmp_path), "sts", dynamic_padding=False))
    outputs = graph.run("serving_default", text=np.array(TEXTS, object))
    np.testing.assert_allclose(outputs["score"], model.predict(TEXTS, verbose=0)[:, 0],
                               atol=1e-5)


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_windows=-1), "max_windows must be a whole number"),
    (dict(max_windows=2, window_combination="first"), "reads every text as one window"),
])
def test_bad_max_windows_is_refused_before_writing(tmp_path, kwargs, message):
    max_windows = kwargs.pop("max_windows")
    with pytest.raises(ValueError, match=message):
        export_model(classifier(**kwargs), str(tmp_path), "clf", max_windows=max_windows)
    assert not os.listdir(tmp_path) or not os.listdir(tmp_path / "clf")


def test_the_window_limit_defaults_to_the_config_and_0_lifts_it(model):
    from keras_bert.config import DEFAULT_MAX_WINDOWS
    from keras_bert.export.signatures import resolve_max_windows
    assert resolve_max_windows(model, None) == DEFAULT_MAX_WINDOWS
    assert resolve_max_windows(model, 5) == 5
    assert resolve_max_windows(model, 0) is None
    # A model that reads one window per text takes no limit, and needs none by default.
    assert resolve_max_windows(classifier(window_combination="first"), None) is None


# A pair's first text in every window of its second: long second texts, a long first text, a
# pair that fits, an empty second text (a single text, cut) and an empty pair.
PAIRS = [("the cat", " ".join(WORDS[20:27])), (" ".join(WORDS[:5]), " ".join(WORDS[20:40])),
         ("the cat", "a dog"), (" ".join(WORDS[:12]), ""), ("", ""), ("a", " ".join(WORDS[30:60]))]


def pair_example(text, text_pair):
    proto = example_pb2.Example.FromString(example(text))
    proto.features.feature["text_pair"].bytes_list.value.append(text_pair.encode())
    return proto.SerializeToString()


@pytest.fixture(scope="module")
def served_pairs(model, tmp_path_factory):
    path = export_model(model, str(tmp_path_factory.mktemp("pairs")), "nli", text_pair=True,
                        max_windows=30)
    return model, GraphModeModel(path)


def test_pairs_are_windowed_in_the_graph_as_predict_reads_them(served_pairs):
    model, graph = served_pairs
    expected = model.predict(PAIRS, verbose=0)
    assert expected.shape == (len(PAIRS), 3)
    texts, text_pairs = (np.array(column, object) for column in zip(*PAIRS))
    outputs = graph.run("serving_default", text=texts, text_pair=text_pairs)
    np.testing.assert_allclose(outputs["probabilities"], expected, atol=1e-5)
    assert [n.decode() for n in outputs["class_names"]] == model.predict_labels(PAIRS)
    classified = graph.run("classify", inputs=np.array([pair_example(*p) for p in PAIRS], object))
    np.testing.assert_allclose(classified["scores"], expected, atol=1e-5)


def test_a_pair_past_max_windows_is_refused_naming_the_limit(served_pairs):
    _, graph = served_pairs
    # The second text's windows are 5 - 1 = 4 pieces at stride 3: 100 pieces are 33 windows.
    too_long = " ".join((WORDS * 2)[:100])
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_windows=30"):
        graph.run("serving_default", text=np.array(["the cat", "a"], object),
                  text_pair=np.array(["a dog", too_long], object))
