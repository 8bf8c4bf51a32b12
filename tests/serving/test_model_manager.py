"""Hot reload and version policies: new version directories are served without a restart, old
ones retire by the policy, config reloads and labels behave as in TF Serving; a base path with
no version holds the start-up back (said once), as tensorflow_model_server's does."""

import logging
import os
import socket
import threading
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import (get_model_status_pb2, model_management_pb2, predict_pb2,
                                     prediction_service_pb2_grpc)
from tensorflow_serving.config import model_server_config_pb2

from keras_bert.serving.errors import ServingError
from keras_bert.serving.server import ModelServer, build_flag_parser
from tests.serving.server_helpers import free_port, running_server, write_model_config
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


def wait_for(condition, timeout_s=120.0):  # generous: a loaded 2-core machine stalls loads
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


def _refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _said(caplog, text: str) -> int:
    return sum(text in record.getMessage() for record in caplog.records)


def test_a_missing_base_path_is_said_once_and_start_up_waits_for_a_version(tmp_path, caplog):
    """Two models, one of whose base path does not exist yet: its problem is logged once (not
    on every poll), nothing listens, and the server starts once the path appears with a
    version, as tensorflow_model_server waits for each model's first load before its ports
    open."""
    caplog.set_level(logging.INFO, logger="keras_bert.serving.model_manager")
    write_toy_version(str(tmp_path / "toy"), 1)
    late = tmp_path / "late"
    port, rest_port = free_port(), free_port()
    server = ModelServer(build_flag_parser().parse_args([
        "--port", str(port), "--rest_api_port", str(rest_port), "--model_config_file",
        write_model_config(tmp_path, ["toy", "late"]),
        "--file_system_poll_wait_seconds", "0.05"]))
    stop, started = threading.Event(), []
    starter = threading.Thread(target=lambda: started.append(server.start(stop)))
    starter.start()
    try:
        wait_for(lambda: _said(caplog, "not listening yet"))
        assert _said(caplog, "waiting for a first version of model late (looking every")
        assert _refused(port) and _refused(rest_port) and not started
        # Saving takes many polls' time, all of them with the base path still missing.
        staged = write_toy_version(str(tmp_path / "staging"), 1)
        late.mkdir()
        wait_for(lambda: _said(caplog, f"model late: no version under base path {late}"))
        assert not started
        os.rename(staged, late / "1")
        starter.join(timeout=60)
        assert started == [True]
        assert _said(caplog, f"model late: base path {late} does not exist") == 1
        assert _said(caplog, "no version under base path") == 1
        assert _said(caplog, f"model late: found version(s) 1 under base path {late}") == 1
        assert _said(caplog, "not listening yet") == 1
        request = _request(version=1)
        request.model_spec.name = "late"
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
                request, timeout=30)
        assert response.model_spec.version.value == 1

        # Once serving, a base path that disappears changes nothing (TF Serving aspires
        # nothing for it) and is said once.
        # Moved away in one step: rmtree removes the version before the folder, so a poll
        # between the two saw "no version" first (a fast-lane run under load did).
        os.rename(tmp_path / "toy", tmp_path / "toy_removed")
        wait_for(lambda: _said(caplog, f"model toy: base path {tmp_path / 'toy'} does not "
                                       "exist; version(s) 1 keep serving"))
        assert server.manager.servable(request.model_spec).version == 1
    finally:
        stop.set()
        starter.join(timeout=60)
        server.stop(5)


def _start_error(*flags: str) -> ServingError:
    server = ModelServer(build_flag_parser().parse_args(["--port", str(free_port()), *flags]))
    try:
        with pytest.raises(ServingError) as error:
            server.start()
        assert server.grpc_port == 0  # nothing was listening
        return error.value
    finally:
        server.stop(0)


def test_start_up_fails_where_no_version_can_come(tmp_path, caplog):
    """Without polling (--file_system_poll_wait_seconds 0) a missing base path can never get
    a version: start-up fails at once (tensorflow_model_server would wait forever). A model
    whose only version fails to load fails start-up, as TF Serving's "did not become
    available"."""
    caplog.set_level(logging.INFO, logger="keras_bert.serving.model_manager")
    missing = tmp_path / "does" / "not" / "exist"
    error = _start_error("--model_name", "m", "--model_base_path", str(missing),
                         "--file_system_poll_wait_seconds", "0")
    assert error.code == grpc.StatusCode.NOT_FOUND and "model m has no version" in str(error)
    assert _said(caplog, f"model m: base path {missing} does not exist") == 1

    version_dir = write_toy_version(str(tmp_path / "toy"), 1)
    error = _start_error("--model_name", "m", "--model_base_path", version_dir,
                         "--file_system_poll_wait_seconds", "0")
    assert "model m has no version" in str(error)
    assert _said(caplog, f"model m: base path {version_dir} is a SavedModel itself") == 1

    broken = tmp_path / "broken"
    (broken / "1").mkdir(parents=True)
    (broken / "1" / "saved_model.pb").write_bytes(b"not a SavedModel")
    error = _start_error("--model_name", "m", "--model_base_path", str(broken))
    assert error.code == grpc.StatusCode.UNKNOWN
    assert "model m did not become available: version 1 failed to load" in str(error)
