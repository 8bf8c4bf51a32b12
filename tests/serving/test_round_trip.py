"""Export, serve, query: through PredictionServiceStub, REST (row and columnar), the client and
`keras-bert predict`, the served outputs equal the Keras model's."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

from keras_bert.export.client import ServingClient, ServingError
from tests.serving.exports import TEXTS, encoder_export, keras_encoder_outputs
from tests.serving.server_helpers import running_server

TOLERANCE = dict(atol=2e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def served(minilm_dir):
    export = encoder_export(os.path.join(minilm_dir, "vocab.txt"))
    with running_server("--model_name", "bert", "--model_base_path",
                        os.path.join(export.export_base, "encoder"),
                        "--enable_batching") as (server, stubs):
        yield export, server, stubs, keras_encoder_outputs(export)


def test_grpc_prediction_service_stub(served):
    _, _, stubs, expected = served
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "bert"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(TEXTS))
    response = stubs.prediction.Predict(request, timeout=60)
    for name, key in (("sequence_output", "text_sequence_output"),
                      ("pooled_output", "pooled_output"), ("input_mask", "text_input_mask")):
        np.testing.assert_allclose(tf.make_ndarray(response.outputs[name]), expected[key],
                                   **TOLERANCE, err_msg=name)

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "bert"
    request.model_spec.signature_name = "serve_ids"
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        request.inputs[name].CopyFrom(tf.make_tensor_proto(expected[name]))
    response = stubs.prediction.Predict(request, timeout=60)
    np.testing.assert_allclose(tf.make_ndarray(response.outputs["encoder_outputs"]),
                               expected["encoder_outputs"], **TOLERANCE)


def test_rest_row_and_columnar(served):
    _, _, stubs, expected = served
    status, body = stubs.rest("/v1/models/bert:predict", {"instances": TEXTS})
    assert status == 200 and len(body["predictions"]) == len(TEXTS)
    pooled = np.array([row["pooled_output"] for row in body["predictions"]], np.float32)
    np.testing.assert_allclose(pooled, expected["pooled_output"], **TOLERANCE)
    status, body = stubs.rest("/v1/models/bert/versions/1:predict", {
        "signature_name": "serve_ids",
        "inputs": {k: expected[k].tolist() for k in ("input_word_ids", "input_mask",
                                                     "input_type_ids")}})
    assert status == 200
    np.testing.assert_allclose(np.array(body["outputs"]["sequence_output"], np.float32),
                               expected["sequence_output"], **TOLERANCE)


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_client(served, protocol):
    _, server, _, expected = served
    port = server.grpc_port if protocol == "grpc" else server.rest_port
    with ServingClient(f"127.0.0.1:{port}", protocol) as client:
        outputs = client.predict_text("bert", TEXTS)
        assert outputs["pooled_output"].dtype == np.float32
        np.testing.assert_allclose(outputs["sequence_output"],
                                   expected["text_sequence_output"], **TOLERANCE)
        assert outputs["input_mask"].dtype == np.int32
        with pytest.raises(ServingError) as error:
            client.predict_text("nope", TEXTS)
        assert error.value.code == "NOT_FOUND"


def test_keras_bert_predict_command(served, capsys):
    from keras_bert.cli import main
    _, server, _, expected = served
    assert main(["predict", "--server", f"127.0.0.1:{server.rest_port}", "--protocol", "rest",
                 "--model", "bert", "--outputs", "pooled_output", *TEXTS[:2]]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["text"] for line in lines] == TEXTS[:2]
    np.testing.assert_allclose([line["pooled_output"] for line in lines],
                               expected["pooled_output"][:2], **TOLERANCE)
    assert main(["predict", "--server", f"127.0.0.1:{server.grpc_port}", "--model", "bert",
                 "--version", "5", "hi"]) == 1
    assert "NOT_FOUND" in capsys.readouterr().err
    assert main(["predict", "--server", f"127.0.0.1:{server.grpc_port}", "--model", "bert",
                 "--outputs", "input_mask", TEXTS[2]]) == 0
    assert json.loads(capsys.readouterr().out)["input_mask"][:4] == [1, 1, 1, 0]
