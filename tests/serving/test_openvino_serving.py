"""`keras-bert serve` serves an OpenVINO version (model.xml, from export_model(...,
format="openvino")) of a classifier beside its SavedModel with the same APIs: gRPC Predict and
GetModelMetadata, REST :predict, and `keras-bert predict --server` (a client written for the
SavedModel) all answer as for the SavedModel, long texts too; bad requests and a text beyond
max_windows are INVALID_ARGUMENT. The other tasks' IRs served:
test_openvino_tasks_served.py (slow). Skipped where the ``openvino`` extra is not installed."""

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

from keras_bert import BertClassifier, BertEncoder, BertPreprocessor  # noqa: E402
from keras_bert.cli import main  # noqa: E402
from keras_bert.export import export_model  # noqa: E402
from tests.serving.server_helpers import running_server, write_model_config  # noqa: E402

TEXTS = ["What a great film!", "Angela Merkel visited Paris.", "Héllo wörld 中文", ""]
LABELS = ["negative", "positive"]


# The classifier's IR reads a text as at most MAX_WINDOWS windows (the SavedModel: 512).
MAX_WINDOWS = 8


def tiny_encoder() -> BertEncoder:
    keras.utils.set_random_seed(5)
    return BertEncoder(vocab_size=30522, hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=128, max_position_embeddings=64)


@pytest.fixture(scope="module")
def served(minilm_dir, tmp_path_factory):
    preprocessor = BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), seq_length=32)
    model = BertClassifier(tiny_encoder(), 2, preprocessor=preprocessor, label_names=LABELS)
    base = tmp_path_factory.mktemp("models")
    export_model(model, str(base), "saved_model")
    export_model(model, str(base), "openvino", format="openvino", max_windows=MAX_WINDOWS)
    with running_server("--model_config_file",
                        write_model_config(base, ["saved_model", "openvino"])) as (server,
                                                                                   stubs):
        stubs.grpc_port = server.grpc_port
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


def test_long_texts_are_read_as_windows_and_beyond_max_windows_refused(served):
    long_text = " ".join(TEXTS[:3]) * 8  # 120 WordPieces: 7 windows of 30, 15 apart
    answers = {}
    for model in ("saved_model", "openvino"):
        response = served.prediction.Predict(text_request(model, [long_text, TEXTS[0]]),
                                             timeout=30)
        answers[model] = tf.make_ndarray(response.outputs["probabilities"])
    np.testing.assert_allclose(answers["openvino"], answers["saved_model"], atol=1e-5)
    code, message = served.grpc_error(  # twice as long: 15 windows, beyond MAX_WINDOWS
        served.prediction.Predict, text_request("openvino", [TEXTS[0], long_text * 2]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, message
    assert message == (f"a text is longer than max_windows={MAX_WINDOWS} windows; send shorter "
                       "texts, or export with a larger --max_windows (0: no limit)")
    response = served.prediction.Predict(text_request("openvino", TEXTS[:1]), timeout=30)
    assert response.outputs["class_names"].string_val  # and the next request is answered


def _int_request() -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "openvino"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(np.array([1, 2], np.int32)))
    return request
