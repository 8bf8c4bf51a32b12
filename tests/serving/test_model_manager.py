"""Hot reload and version policies: new version directories are served without a restart, old
ones retire by the policy, config reloads and labels behave as in TF Serving."""

import os
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import get_model_status_pb2, model_management_pb2, predict_pb2
from tensorflow_serving.config import model_server_config_pb2

from tests.serving.server_helpers import running_server
from tests.serving.toy_models import write_toy_version

AVAILABLE, END = 30, 50


def predict(stubs, version=None, label=None):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "toy"
    if version is not None:
        request.model_spec.version.value = version
    if label is not None:
        request.model_spec.version_label = label
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.zeros((1, 3), np.float32)))
    response = stubs.prediction.Predict(request, timeout=30)
    return response.model_spec.version.value, float(tf.make_ndarray(response.outputs["y"])[0, 0])


def states(stubs) -> dict:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "toy"
    response = stubs.model.GetModelStatus(request, timeout=30)
    return {s.version: s.state for s in response.model_version_status}


def wait_for(condition, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def config_text(base, policy="", labels=""):
    return (f'model_config_list {{ config {{ name: "toy" base_path: "{base}" '
            f'model_platform: "tensorflow" {policy} {labels} }} }}')


def test_new_version_is_served_and_the_old_one_retires(tmp_path):
    base = tmp_path / "toy"
    write_toy_version(str(base), 1)
    with running_server("--model_name", "toy", "--model_base_path", str(base),
                        "--file_system_poll_wait_seconds", "0.2") as (_, stubs):
        assert predict(stubs) == (1, 1.0)
        os.makedirs(base / "3")  # incomplete: no saved_model.pb yet, so not a version
        write_toy_version(str(base), 2)
        wait_for(lambda: states(stubs).get(1) == END)
        assert states(stubs) == {1: END, 2: AVAILABLE}
        assert predict(stubs) == (2, 2.0)  # y = 2x + version
        code, details = stubs.grpc_error(stubs.prediction.Predict, _request(version=1))
        assert code == grpc.StatusCode.NOT_FOUND and "Specific(toy, 1)" in details


def _request(version):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "toy"
    request.model_spec.version.value = version
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.zeros((1, 3), np.float32)))
    return request


def test_policies_labels_and_config_reload(tmp_path):
    base = tmp_path / "toy"
    for version in (1, 2):
        write_toy_version(str(base), version)
    (base / "9").mkdir()
    (base / "9" / "saved_model.pb").write_bytes(b"not a SavedModel")  # fails to load
    config_file = tmp_path / "models.config"
    config_file.write_text(config_text(base, "model_version_policy { all {} }"))
    with running_server("--model_config_file", str(config_file),
                        "--file_system_poll_wait_seconds", "0") as (_, stubs):
        assert states(stubs) == {1: AVAILABLE, 2: AVAILABLE, 9: END}
        assert predict(stubs) == (2, 2.0) and predict(stubs, version=1) == (1, 1.0)
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = "toy"
        request.model_spec.version.value = 9
        [broken] = stubs.model.GetModelStatus(request, timeout=30).model_version_status
        assert broken.status.error_code != 0 and broken.status.error_message

        reload = model_management_pb2.ReloadConfigRequest()
        text_format.Parse(config_text(base, "model_version_policy { specific { versions: 1 } }",
                                      'version_labels { key: "stable" value: 1 }'),
                          reload.config)
        stubs.model.HandleReloadConfigRequest(reload, timeout=60)
        assert states(stubs) == {1: AVAILABLE, 2: END, 9: END}
        assert predict(stubs, label="stable") == (1, 1.0)
        status, body = stubs.rest("/v1/models/toy/labels/stable:predict",
                                  {"instances": [[0, 0, 0]]})
        assert (status, body["predictions"][0]["y"]) == (200, [1.0, 1.0, 1.0])
        code, _ = stubs.grpc_error(stubs.prediction.Predict, _label_request("canary"))
        assert code == grpc.StatusCode.INVALID_ARGUMENT  # unknown label, as TF Serving

        reload = model_management_pb2.ReloadConfigRequest()
        text_format.Parse(config_text(base, "model_version_policy { specific { versions: 1 } }",
                                      'version_labels { key: "canary" value: 2 }'),
                          reload.config)
        code, details = stubs.grpc_error(stubs.model.HandleReloadConfigRequest, reload)
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "not currently available" in details
        bad = model_management_pb2.ReloadConfigRequest()
        bad.config.model_config_list.config.add(name="toy", base_path="relative/path",
                                                model_platform="tensorflow")
        code, _ = stubs.grpc_error(stubs.model.HandleReloadConfigRequest, bad)
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert predict(stubs) == (1, 1.0)  # still serving


def _label_request(label):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "toy"
    request.model_spec.version_label = label
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.zeros((1, 3), np.float32)))
    return request


@pytest.mark.parametrize("policy, expected", [
    ("", [3]), ("model_version_policy { latest { num_versions: 2 } }", [2, 3]),
    ("model_version_policy { all {} }", [1, 2, 3]),
    ("model_version_policy { specific { versions: 1 versions: 3 versions: 5 } }", [1, 3])])
def test_aspired_versions(policy, expected):
    from keras_bert.serving.model_manager import aspired_versions
    config = model_server_config_pb2.ModelServerConfig()
    text_format.Parse(config_text("/models/toy", policy), config)
    assert aspired_versions(config.model_config_list.config[0], [1, 2, 3]) == expected
