"""The server's gRPC and REST APIs on a small SavedModel: outputs, formats, metadata, status, and
TF Serving's status codes for bad requests (after each of which the server still answers)."""

import base64
import json
import urllib.error

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.example import example_pb2
from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2,
                                     get_model_status_pb2, predict_pb2, regression_pb2)

from tests.serving.server_helpers import running_server
from tests.serving.toy_models import write_toy_version

X = np.array([[1, 2, 3], [4, 5, 6]], np.float32)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("toy")
    write_toy_version(str(base), 1)
    batching = base.parent / "batching.txt"
    batching.write_text("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 1000 }\n"
                        "num_batch_threads { value: 2 }\n")
    with running_server("--model_name", "toy", "--model_base_path", str(base),
                        "--enable_batching", "--batching_parameters_file", str(batching),
                        "--grpc_max_message_bytes", "1000000",
                        "--rest_api_max_body_bytes", "1000000") as (srv, stubs):
        stubs.grpc_port = srv.grpc_port
        yield stubs


def predict_request(model="toy", x=X, signature="", version=None, name="x"):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = version
    request.inputs[name].CopyFrom(tf.make_tensor_proto(x))
    return request


def example(x: float) -> example_pb2.Example:
    ex = example_pb2.Example()
    ex.features.feature["x"].float_list.value.append(x)
    return ex


def assert_still_serving(stubs):
    response = stubs.prediction.Predict(predict_request(), timeout=30)
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["total"]), [6, 15])


def test_grpc_predict(server):
    response = server.prediction.Predict(predict_request(), timeout=30)
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["y"]), 2 * X + 1)
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["total"]), [6, 15])
    assert (response.model_spec.name, response.model_spec.version.value,
            response.model_spec.signature_name) == ("toy", 1, "serving_default")
    request = predict_request()
    request.output_filter.append("total")
    assert list(server.prediction.Predict(request, timeout=30).outputs) == ["total"]


def test_rest_predict_row_and_columnar(server):
    status, body = server.rest("/v1/models/toy:predict", {"instances": X.tolist()})
    assert status == 200
    assert body == {"predictions": [{"total": 6.0, "y": [3.0, 5.0, 7.0]},
                                    {"total": 15.0, "y": [9.0, 11.0, 13.0]}]}
    status, body = server.rest("/v1/models/toy/versions/1:predict",
                               {"inputs": {"x": X.tolist()}})
    assert status == 200
    assert body == {"outputs": {"total": [6.0, 15.0],
                                "y": [[3.0, 5.0, 7.0], [9.0, 11.0, 13.0]]}}


def test_rest_strings_and_b64(server):
    status, body = server.rest("/v1/models/toy:predict", {
        "signature_name": "echo", "instances": ["ab", {"b64": base64.b64encode(b"c\xc3\xa9").decode()}]})
    assert status == 200
    assert body == {"predictions": [{"length": 2, "upper": "AB"}, {"length": 3, "upper": "Cé"}]}
    # One output: its name is left out. A serialized tf.Example travels as b64.
    serialized = base64.b64encode(example(2.0).SerializeToString()).decode()
    status, body = server.rest("/v1/models/toy:predict", {
        "signature_name": "regress", "instances": [{"b64": serialized}]})
    assert (status, body) == (200, {"predictions": [7.0]})


def test_classify_and_regress(server):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "toy"
    request.model_spec.signature_name = "classify"
    request.input.example_list.examples.extend([example(0.0), example(2.0)])
    result = server.prediction.Classify(request, timeout=30).result
    labels = [[c.label for c in item.classes] for item in result.classifications]
    scores = [[c.score for c in item.classes] for item in result.classifications]
    assert labels == [["neg", "pos"], ["neg", "pos"]]
    np.testing.assert_allclose(scores, [[0.5, 0.5], [1 / (1 + np.exp(2)), 1 / (1 + np.exp(-2))]],
                               rtol=1e-6)
    status, body = server.rest("/v1/models/toy:classify", {
        "signature_name": "classify", "examples": [{"x": 2.0}]})
    assert status == 200 and body["result"][0][1][0] == "pos"
    assert body["result"][0][1][1] == pytest.approx(1 / (1 + np.exp(-2)), rel=1e-6)

    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "toy"
    request.model_spec.signature_name = "regress"
    context = request.input.example_list_with_context
    context.context.CopyFrom(example(-1.0))
    context.examples.add()  # x comes from the context
    values = [r.value for r in server.prediction.Regress(request, timeout=30).result.regressions]
    assert values == [-2.0]  # 3 * -1 + version 1
    status, body = server.rest("/v1/models/toy:regress", {
        "signature_name": "regress", "examples": [{"x": 1.0}, {"x": 0.5}]})
    assert (status, body) == (200, {"result": [4.0, 2.5]})
    # serving_default does not fit Classify: INVALID_ARGUMENT, as in TF Serving.
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "toy"
    request.input.example_list.examples.append(example(1.0))
    code, _ = server.grpc_error(server.prediction.Classify, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def test_metadata_and_status(server):
    request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    request.model_spec.name = "toy"
    response = server.prediction.GetModelMetadata(request, timeout=30)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signature_map)
    assert set(signature_map.signature_def) - {"__saved_model_init_op"} == {
        "serving_default", "echo", "pair", "classify", "regress"}
    assert set(signature_map.signature_def["serving_default"].outputs) == {"y", "total"}
    status, body = server.rest("/v1/models/toy/metadata")
    assert status == 200 and body["model_spec"]["version"] == "1"
    assert body["metadata"]["signature_def"]["signature_def"]["echo"]["inputs"]["text"][
        "dtype"] == "DT_STRING"

    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "toy"
    [version] = server.model.GetModelStatus(request, timeout=30).model_version_status
    assert (version.version, version.state) == (1, 30)  # AVAILABLE
    status, body = server.rest("/v1/models/toy")
    assert (status, body) == (200, {"model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK",
                                                          "error_message": ""}}]})


BAD_GRPC = {
    "wrong dtype": (predict_request(x=X.astype(np.int32)), grpc.StatusCode.INVALID_ARGUMENT),
    "unknown input": (predict_request(name="z"), grpc.StatusCode.INVALID_ARGUMENT),
    "unknown signature": (predict_request(signature="nope"), grpc.StatusCode.FAILED_PRECONDITION),
    "unknown model": (predict_request(model="nope"), grpc.StatusCode.NOT_FOUND),
    "unknown version": (predict_request(version=7), grpc.StatusCode.NOT_FOUND),
    "oversized batch": (predict_request(x=np.ones((9, 3), np.float32)),
                        grpc.StatusCode.INVALID_ARGUMENT),
    "wrong shape": (predict_request(x=np.ones((2, 4), np.float32)),
                    grpc.StatusCode.INVALID_ARGUMENT),
    "message too large": (predict_request(x=np.ones((100_000, 3), np.float32)),
                          grpc.StatusCode.RESOURCE_EXHAUSTED),
}


def _huge_declared_shape():
    """A 20-byte message declaring a [10^9, 3] tensor: its one value would be repeated."""
    request = predict_request()
    proto = request.inputs["x"]
    proto.ClearField("tensor_content")
    proto.float_val.append(1.0)
    proto.tensor_shape.dim[0].size = 10**9
    return request


BAD_GRPC["declared shape too large"] = (_huge_declared_shape(),
                                        grpc.StatusCode.RESOURCE_EXHAUSTED)


@pytest.mark.parametrize("case", sorted(BAD_GRPC))
def test_bad_grpc_requests(server, case):
    request, expected = BAD_GRPC[case]
    code, details = server.grpc_error(server.prediction.Predict, request)
    assert code == expected, details
    assert_still_serving(server)


def test_inputs_of_different_row_counts_are_refused_in_tf_servings_words(server):
    """Not broadcast, not cut: refused before the model runs, as TF Serving's batching refuses
    them (what a question answerer gets for 3 questions and 1 context)."""
    request = predict_request(x=np.array([1, 2, 3], np.float32), signature="pair", name="a")
    request.inputs["b"].CopyFrom(tf.make_tensor_proto(np.array([1], np.float32)))
    code, details = server.grpc_error(server.prediction.Predict, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert details == ("Batching session Run() input tensors must have equal 0th-dimension "
                       "size; got a: 3, b: 1")
    request.inputs["b"].CopyFrom(tf.make_tensor_proto(np.array([1, 1, 1], np.float32)))
    response = server.prediction.Predict(request, timeout=30)
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["sum"]), [2, 3, 4])
    assert_still_serving(server)


def test_garbage_grpc_bytes(server):
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    raw = channel.unary_unary("/tensorflow.serving.PredictionService/Predict",
                              request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.RpcError) as error:
        raw(b"\xff\xfe garbage \x00\x01", timeout=30)
    assert error.value.code() == grpc.StatusCode.INTERNAL  # the request does not parse
    channel.close()
    assert_still_serving(server)


BAD_REST = {
    "wrong dtype": ("/v1/models/toy:predict", {"instances": [["a", "b", "c"]]}, 400),
    "unknown input": ("/v1/models/toy:predict", {"instances": [{"z": [1, 2, 3]}]}, 400),
    "unknown signature": ("/v1/models/toy:predict", {"signature_name": "nope",
                                                     "instances": [[1, 2, 3]]}, 400),
    "unknown model": ("/v1/models/nope:predict", {"instances": [[1, 2, 3]]}, 404),
    "unknown version": ("/v1/models/toy/versions/7:predict", {"instances": [[1, 2, 3]]}, 404),
    "empty batch": ("/v1/models/toy:predict", {"instances": []}, 400),
    "oversized batch": ("/v1/models/toy:predict", {"instances": [[1, 2, 3]] * 9}, 400),
    "ragged": ("/v1/models/toy:predict", {"instances": [[1, 2, 3], [1, 2]]}, 400),
    "garbage": ("/v1/models/toy:predict", b"\xff\xfe{garbage", 400),
    "not an object": ("/v1/models/toy:predict", [1, 2, 3], 400),
    "both formats": ("/v1/models/toy:predict", {"instances": [[1, 2, 3]], "inputs": [[1, 2, 3]]},
                     400),
    "body too large": ("/v1/models/toy:predict", b" " * 1_500_000, 429),
    "nested too deeply": ("/v1/models/toy:predict", b'{"instances": ' + b"[" * 100_000, 400),
    "malformed path": ("/v1/modelz/toy:predict", {"instances": [[1, 2, 3]]}, 400),
    "lone surrogate": ("/v1/models/toy:predict",
                       b'{"signature_name": "echo", "instances": ["\\ud800"]}', 400),
}


@pytest.mark.parametrize("case", sorted(BAD_REST))
def test_bad_rest_requests(server, case):
    path, body, expected = BAD_REST[case]
    status, answer = server.rest(path, body)
    assert status == expected, answer
    assert set(answer) == {"error"} and answer["error"]
    status, answer = server.rest("/v1/models/toy:predict", {"instances": X.tolist()})
    assert status == 200 and answer["predictions"][1]["total"] == 15.0


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_unknown_http_method_gets_a_json_error(server, method):
    import urllib.request
    request = urllib.request.Request(server.rest_url + "/v1/models/toy", data=b"{}",
                                     method=method)
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=30)
    assert error.value.code == 501
    assert "error" in json.loads(error.value.read())
    assert_still_serving(server)


def test_empty_batch_runs_as_zero_rows(server):
    response = server.prediction.Predict(predict_request(x=np.zeros((0, 3), np.float32)),
                                         timeout=30)
    assert tf.make_ndarray(response.outputs["y"]).shape == (0, 3)
    request = predict_request(x=np.zeros((0,), dtype=object), signature="echo", name="text")
    response = server.prediction.Predict(request, timeout=30)
    assert tf.make_ndarray(response.outputs["length"]).shape == (0,)
    assert tf.make_ndarray(response.outputs["upper"]).shape == (0,)


def test_grpc_port_in_use_is_a_one_line_error(server, tmp_path, capsys):
    from keras_bert.serving.server import main
    base = tmp_path / "toy"
    write_toy_version(str(base), 1)
    assert main(["--port", str(server.grpc_port), "--model_name", "toy",
                 "--model_base_path", str(base)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "in use" in err and "Traceback" not in err


def test_large_unbatched_requests_run_in_bounded_parts(tmp_path):
    base = tmp_path / "toy"
    write_toy_version(str(base), 1)
    x = np.arange(21, dtype=np.float32).reshape(7, 3)
    with running_server("--model_name", "toy", "--model_base_path", str(base),
                        "--max_rows_per_call", "2") as (srv, stubs):
        calls = []
        servable = srv.manager.servable(predict_request().model_spec)
        original = servable._call
        servable._call = lambda key, inputs: calls.append(len(inputs["x"])) or original(
            key, inputs)
        response = stubs.prediction.Predict(predict_request(x=x), timeout=30)
    assert calls == [2, 2, 2, 1]
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["y"]), 2 * x + 1)
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["total"]), x.sum(1))


def test_parts_with_different_sequence_lengths_are_padded_to_the_longest():
    from keras_bert.serving.servable import concatenate_padded
    joined = concatenate_padded([np.ones((2, 3), np.float32), np.full((1, 5), 2, np.float32)])
    np.testing.assert_array_equal(joined, [[1, 1, 1, 0, 0], [1, 1, 1, 0, 0], [2, 2, 2, 2, 2]])
    text = concatenate_padded([np.array([[b"a"]], object), np.array([[b"b", b"c"]], object)])
    assert text.tolist() == [[b"a", b""], [b"b", b"c"]]


def test_tensorflow_parallelism_flags_set_every_model_session(tmp_path):
    """tensorflow_model_server's three thread flags, with its rules: intra-op or inter-op win
    over session parallelism, which sets both."""
    base = tmp_path / "toy"
    write_toy_version(str(base), 1)
    for flags, threads in ((["--tensorflow_intra_op_parallelism", "1",
                             "--tensorflow_inter_op_parallelism", "3"], (1, 3)),
                           (["--tensorflow_session_parallelism", "2"], (2, 2)),
                           (["--tensorflow_session_parallelism", "2",
                             "--tensorflow_intra_op_parallelism", "1"], (1, 0)),
                           ([], (0, 0))):
        with running_server("--model_name", "toy", "--model_base_path", str(base),
                            *flags) as (srv, stubs):
            config = srv.manager.servable(predict_request().model_spec)._session._config
            assert (config.intra_op_parallelism_threads,
                    config.inter_op_parallelism_threads) == threads, flags
            assert_still_serving(stubs)


@pytest.mark.parametrize("flags, message", [
    (["--tensorflow_session_parallelism", "1", "--tensorflow_intra_op_parallelism", "1",
      "--tensorflow_inter_op_parallelism", "1"], "You cannot configure all"),
    (["--tensorflow_intra_op_parallelism", "-1"], "--tensorflow_intra_op_parallelism must be >= 0"),
])
def test_parallelism_flags_tensorflow_model_server_refuses_are_refused(tmp_path, flags, message):
    from keras_bert.serving.server import ModelServer, build_flag_parser
    args = build_flag_parser().parse_args(["--model_base_path", str(tmp_path), *flags])
    with pytest.raises(ValueError, match=message):
        ModelServer(args)
