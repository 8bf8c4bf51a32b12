"""`keras-bert serve` serves an OpenVINO version (model.xml, from export_model(...,
format="openvino")) of a classifier beside its SavedModel with the same APIs: gRPC Predict and
GetModelMetadata, REST :predict, and `keras-bert predict --server` (a client written for the
SavedModel) all answer as for the SavedModel; bad requests are INVALID_ARGUMENT. A tagger's, a
multiple-choice model's and a question answerer's IR answer as their SavedModel's
serving_default, long texts too. Skipped where the ``openvino`` extra is not installed."""

import json
import os

import grpc
import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import get_model_metadata_pb2, predict_pb2

pytest.importorskip("openvino")
pytest.importorskip("openvino_tokenizers")
pytest.importorskip("nncf")

from keras_bert import (BertClassifier, BertEncoder, BertMultipleChoice,  # noqa: E402
                        BertPreprocessor, BertQuestionAnswerer, BertTokenClassifier)
from keras_bert.cli import main  # noqa: E402
from keras_bert.export import export_model  # noqa: E402
from keras_bert.export.signatures import TEXT_SIGNATURE, build_signatures  # noqa: E402
from tests.serving.server_helpers import running_server, write_model_config  # noqa: E402

TEXTS = ["What a great film!", "Angela Merkel visited Paris.", "Héllo wörld 中文", ""]
LABELS = ["negative", "positive"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@pytest.fixture(scope="module")
def served(minilm_dir, tmp_path_factory):
    keras.utils.set_random_seed(5)
    preprocessor = BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), seq_length=32)
    encoder = BertEncoder(vocab_size=30522, hidden_size=64, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=128,
                          max_position_embeddings=64)
    model = BertClassifier(encoder, 2, preprocessor=preprocessor, label_names=LABELS)
    tagger = BertTokenClassifier(encoder, TAGS, preprocessor=preprocessor)
    base = tmp_path_factory.mktemp("models")
    export_model(model, str(base), "saved_model")
    export_model(model, str(base), "openvino", format="openvino")
    export_model(tagger, str(base), "tagger_openvino", format="openvino")
    chooser = BertMultipleChoice(encoder, num_choices=2, preprocessor=preprocessor)
    export_model(chooser, str(base), "choice_openvino", format="openvino")
    answerer = BertQuestionAnswerer(encoder, preprocessor=preprocessor, doc_stride=8)
    export_model(answerer, str(base), "answerer_openvino", format="openvino", max_windows=3)
    names = ["saved_model", "openvino", "tagger_openvino", "choice_openvino", "answerer_openvino"]
    with running_server("--model_config_file", write_model_config(base, names)) as (server,
                                                                                   stubs):
        stubs.grpc_port = server.grpc_port
        stubs.tagger, stubs.chooser, stubs.preprocessor = tagger, chooser, preprocessor
        stubs.answerer = answerer
        yield stubs


def text_request(model: str, texts) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(np.array(texts, dtype=object),
                                                         dtype=tf.string))
    return request


def test_grpc_predict_answers_as_the_saved_model(served):
    answers = {}
    for model in ("saved_model", "openvino"):
        response = served.prediction.Predict(text_request(model, TEXTS), timeout=30)
        answers[model] = {name: tf.make_ndarray(proto) for name, proto in
                          response.outputs.items()}
    assert sorted(answers["openvino"]) == sorted(answers["saved_model"])
    np.testing.assert_allclose(answers["openvino"]["probabilities"],
                               answers["saved_model"]["probabilities"], atol=1e-4)
    for name in ("class_ids", "class_names"):
        np.testing.assert_array_equal(answers["openvino"][name], answers["saved_model"][name])


def test_a_served_tagger_answers_as_its_serving_default(served, capsys):
    """The served IR against the SavedModel's serving_default (the function the export saves,
    run here), at every text position, a long text's windows merged: the SavedModel pads to
    a multiple of 8, the IR to the request's longest text."""
    texts = TEXTS + [" ".join(TEXTS[:3]) * 3]  # the last: 3 windows of whole words
    response = served.prediction.Predict(text_request("tagger_openvino", texts), timeout=30)
    got = {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}
    want = {name: value.numpy() for name, value in build_signatures(
        served.tagger, served.preprocessor)[TEXT_SIGNATURE](text=tf.constant(texts)).items()}
    assert got["input_mask"][-1].sum() > 32  # every piece of the long text tagged
    assert sorted(got) == sorted(want)
    width = got["input_mask"].shape[1]
    assert not want["input_mask"][:, width:].any()
    text = got["input_mask"] > 0
    for name in ("tokens", "labels", "input_mask"):
        np.testing.assert_array_equal(got[name], want[name][:, :width], name)
    np.testing.assert_array_equal(got["word_starts"][text], want["word_starts"][:, :width][text])
    np.testing.assert_allclose(got["probabilities"][text],
                               want["probabilities"][:, :width][text], atol=1e-5)
    rc = main(["predict", "--server", f"127.0.0.1:{served.grpc_port}", "--model",
               "tagger_openvino", *TEXTS[:3]])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [row["text"] for row in rows] == TEXTS[:3]
    for row, tokens, labels, mask in zip(rows, got["tokens"], got["labels"],
                                         got["input_mask"]):  # padded to another width
        length = mask.sum()
        assert row["tokens"][:length] == [t.decode() for t in tokens[:length]]
        assert row["labels"][:length] == [t.decode() for t in labels[:length]]
        assert not any(row["tokens"][length:])


def test_rest_predict_answers_as_the_saved_model(served):
    bodies = {}
    for model in ("saved_model", "openvino"):
        status, bodies[model] = served.rest(f"/v1/models/{model}:predict",
                                            {"instances": TEXTS})
        assert status == 200, bodies[model]
    for got, want in zip(bodies["openvino"]["predictions"], bodies["saved_model"]["predictions"]):
        assert got["class_names"] == want["class_names"] and got["class_ids"] == want["class_ids"]
        np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=1e-4)


def test_metadata_describes_the_same_serving_default(served):
    signatures = {}
    for model in ("saved_model", "openvino"):
        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        request.model_spec.name = model
        response = served.prediction.GetModelMetadata(request, timeout=30)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signature_map)
        signatures[model] = signature_map.signature_def["serving_default"]
    ours, theirs = signatures["openvino"], signatures["saved_model"]
    assert ours.method_name == theirs.method_name
    for side in ("inputs", "outputs"):
        assert sorted(getattr(ours, side)) == sorted(getattr(theirs, side))
        for name, info in getattr(ours, side).items():
            assert info.dtype == getattr(theirs, side)[name].dtype, name
            assert info.tensor_shape == getattr(theirs, side)[name].tensor_shape, name


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_keras_bert_predict_reads_it_as_a_saved_model(served, protocol, capsys):
    outputs = {}
    port = served.rest_url.rsplit(":", 1)[1] if protocol == "rest" else served.grpc_port
    for model in ("saved_model", "openvino"):
        rc = main(["predict", "--server", f"127.0.0.1:{port}", "--protocol", protocol,
                   "--model", model, *TEXTS[:2]])
        captured = capsys.readouterr()
        assert rc == 0, captured.err
        outputs[model] = captured.out
    assert outputs["openvino"].count("\n") == outputs["saved_model"].count("\n")
    for label in LABELS:
        assert outputs["openvino"].count(label) == outputs["saved_model"].count(label)


def test_bad_requests_are_invalid_argument(served):
    for request in (text_request("openvino", []),
                    _int_request()):
        code, message = served.grpc_error(served.prediction.Predict, request)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, message
        assert "\n" not in message
    status, body = served.rest("/v1/models/openvino:predict", {"instances": []})
    assert status == 400, body
    status, body = served.rest("/v1/models/openvino:predict", {"instances": [1, 2]})
    assert status == 400, body
    response = served.prediction.Predict(text_request("openvino", TEXTS[:1]), timeout=30)
    assert response.outputs["class_names"].string_val  # still serving


def test_long_texts_are_read_as_windows(served):
    """(Beyond max_windows: the question answerer's test, on its contexts.)"""
    long_text = " ".join(TEXTS[:3]) * 8  # 5 windows of 30 WordPieces, 15 apart
    answers = {}
    for model in ("saved_model", "openvino"):
        response = served.prediction.Predict(text_request(model, [long_text, TEXTS[0]]),
                                             timeout=30)
        answers[model] = tf.make_ndarray(response.outputs["probabilities"])
    np.testing.assert_allclose(answers["openvino"], answers["saved_model"], atol=1e-5)


def test_a_served_multiple_choice_ir_answers_as_its_serving_default(served):
    texts, choices = TEXTS[:3], [["yes", "no"], ["Berlin", "Paris"], ["中文", "wörld"]]
    request = text_request("choice_openvino", texts)
    request.inputs["choices"].CopyFrom(tf.make_tensor_proto(np.array(choices, dtype=object),
                                                            dtype=tf.string))
    response = served.prediction.Predict(request, timeout=30)
    got = {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}
    want = build_signatures(served.chooser, served.preprocessor)[TEXT_SIGNATURE](
        text=tf.constant(texts), choices=tf.constant(choices))
    assert sorted(got) == sorted(want)
    np.testing.assert_allclose(got["probabilities"], want["probabilities"].numpy(), atol=1e-5)
    np.testing.assert_array_equal(got["choice_text"], want["choice_text"].numpy())


def test_a_served_question_answerer_ir_answers_as_its_serving_default(served, capsys):
    """A long context read as windows (3 of them at seq_length 32); beyond max_windows=3,
    refused naming the limit, and the next request answered; ``keras-bert predict --server``
    prints the answer."""
    questions = ["Who visited Paris?", "Where?", "What?"]
    contexts = [" ".join(TEXTS[:3]) * 2, TEXTS[1], ""]
    request = text_request("answerer_openvino", questions)
    request.inputs["text_pair"].CopyFrom(tf.make_tensor_proto(np.array(contexts, dtype=object),
                                                              dtype=tf.string))
    response = served.prediction.Predict(request, timeout=30)
    got = {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}
    want = {name: value.numpy() for name, value in build_signatures(
        served.answerer, served.preprocessor)[TEXT_SIGNATURE](
        text=tf.constant(questions), text_pair=tf.constant(contexts)).items()}
    assert sorted(got) == sorted(want)
    np.testing.assert_array_equal(got["answer_text"], want["answer_text"])
    for name in ("answer_start", "answer_end"):
        np.testing.assert_array_equal(got[name], want[name], name)
    np.testing.assert_allclose(got["answer_score"], want["answer_score"], rtol=1e-5)
    assert got["answer_text"][0] and got["answer_text"][2] == b""
    request.inputs["text_pair"].CopyFrom(tf.make_tensor_proto(
        np.array([contexts[0] * 3] + contexts[1:], dtype=object), dtype=tf.string))
    code, message = served.grpc_error(served.prediction.Predict, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT, message
    assert message == ("a text is longer than max_windows=3 windows; send shorter texts, or "
                       "export with a larger --max_windows (0: no limit)")
    request = text_request("answerer_openvino", questions)  # three questions, one context
    request.inputs["text_pair"].CopyFrom(tf.make_tensor_proto(np.array(contexts[:1],
                                                                       dtype=object)))
    code, message = served.grpc_error(served.prediction.Predict, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT, message
    assert message == ("Batching session Run() input tensors must have equal 0th-dimension "
                       "size; got text: 3, text_pair: 1")  # TF Serving's words
    rc = main(["predict", "--server", f"127.0.0.1:{served.grpc_port}", "--model",
               "answerer_openvino", questions[1], "--text_pair", contexts[1]])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert json.loads(captured.out)["answer_text"] == got["answer_text"][1].decode()


def _int_request() -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "openvino"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(np.array([1, 2], np.int32)))
    return request
