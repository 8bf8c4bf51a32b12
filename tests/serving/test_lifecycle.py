"""Version lifecycle as TF Serving runs it: a version that fails to load (half-copied, corrupt)
never takes down the one being served, is loaded again once its directory changes, and a deleted
version gives way to the next one down."""

import os
import shutil
import threading

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import get_model_status_pb2, predict_pb2

from tests.serving.server_helpers import running_server
from tests.serving.toy_models import write_toy_version

AVAILABLE, END = 30, 50


def served_version(stubs) -> int:
    """The version that answers a Predict for the latest, checked by its output (2x + version)."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "toy"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.zeros((1, 3), np.float32)))
    response = stubs.prediction.Predict(request, timeout=30)
    version = response.model_spec.version.value
    assert float(tf.make_ndarray(response.outputs["y"])[0, 0]) == version
    return version


def status(stubs) -> dict:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "toy"
    response = stubs.model.GetModelStatus(request, timeout=30)
    return {s.version: (s.state, s.status.error_message) for s in response.model_version_status}


def test_failed_versions_keep_the_served_one_and_are_retried(tmp_path):
    base, staging = tmp_path / "toy", tmp_path / "staging"
    write_toy_version(str(base), 1)
    complete_v2 = write_toy_version(str(staging), 2)
    with running_server("--model_name", "toy", "--model_base_path", str(base),
                        "--file_system_poll_wait_seconds", "0") as (server, stubs):
        poll = server.manager.poll
        assert served_version(stubs) == 1

        # A copy in progress: saved_model.pb arrived, variables/ not yet.
        os.makedirs(base / "2")
        shutil.copy(os.path.join(complete_v2, "saved_model.pb"), base / "2")
        poll()
        state, error = status(stubs)[2]
        assert state == END and error  # it failed to load...
        assert served_version(stubs) == 1  # ...and version 1 still answers
        assert status(stubs)[1][0] == AVAILABLE
        poll()
        assert status(stubs)[2][0] == END  # nothing changed: not loaded again on every poll

        # The copy finishes: the directory changed, so version 2 is loaded and replaces 1.
        shutil.copytree(os.path.join(complete_v2, "variables"), base / "2" / "variables")
        poll()
        assert served_version(stubs) == 2
        assert status(stubs)[1][0] == END and status(stubs)[2][0] == AVAILABLE

        # A corrupt version 3 changes nothing for clients.
        os.makedirs(base / "3")
        (base / "3" / "saved_model.pb").write_bytes(b"\x00not a SavedModel")
        poll()
        assert status(stubs)[3][0] == END and served_version(stubs) == 2

        # Version 3 deleted, then version 2 deleted: version 1 is the latest again and serves.
        shutil.rmtree(base / "3")
        poll()
        assert served_version(stubs) == 2
        shutil.rmtree(base / "2")
        poll()
        assert served_version(stubs) == 1
        assert status(stubs)[2][0] == END


def test_a_version_tf_serving_cannot_run_fails_here_too(tmp_path):
    """A SavedModel whose functions read a variable that graph mode does not restore (what
    tf.saved_model.save writes for a module tracking only a Keras 3 model's variables list) is
    served as TF Serving serves it: it loads, and its requests fail."""
    import keras

    class Wrapped(tf.Module):
        def __init__(self):
            super().__init__()
            self.layer = keras.layers.Dense(1, kernel_initializer="ones")
            self.layer.build((None, 3))

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
        def serve(self, x):
            return {"y": self.layer(x)}

    module = Wrapped()
    path = str(tmp_path / "keras" / "1")
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    loaded = tf.saved_model.load(path)  # the forgiving eager path runs it...
    assert loaded.signatures["serving_default"](x=tf.ones([1, 3]))["y"].numpy()[0, 0] == 3
    with running_server("--model_name", "keras", "--model_base_path",
                        str(tmp_path / "keras")) as (_, stubs):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "keras"
        request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.ones((1, 3), np.float32)))
        with pytest.raises(grpc.RpcError) as error:  # ...TF Serving's graph-mode path does not
            stubs.prediction.Predict(request, timeout=30)
        assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "Could not find variable" in error.value.details()


@pytest.mark.parametrize("batching", [False, True])
def test_a_request_given_to_a_retired_version_runs_on_its_successor(tmp_path, batching):
    """A request that looked up version 1 just before a switch retired it is not failed: it
    runs again on version 2."""
    base = tmp_path / "toy"
    write_toy_version(str(base), 1)
    flags = ["--enable_batching"] if batching else []
    with running_server("--model_name", "toy", "--model_base_path", str(base),
                        "--file_system_poll_wait_seconds", "0", *flags) as (server, stubs):
        manager = server.manager
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "toy"
        request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.zeros((1, 3), np.float32)))
        stale = manager.servable(request.model_spec)
        write_toy_version(str(base), 2)
        manager.poll()  # version 2 serves, version 1 is unloaded
        lookups = []
        original = manager.servable

        def servable_as_before_the_switch(model_spec):
            lookups.append(model_spec.name)
            return stale if len(lookups) == 1 else original(model_spec)
        manager.servable = servable_as_before_the_switch
        response = stubs.prediction.Predict(request, timeout=30)
        assert response.model_spec.version.value == 2 and len(lookups) == 2
        assert float(tf.make_ndarray(response.outputs["y"])[0, 0]) == 2


def test_a_retired_version_is_freed_off_the_request_path_once_traffic_pauses(tmp_path,
                                                                             monkeypatch):
    """Freeing a retired version (closing its session, collecting its graph) costs CPU and the
    GIL; it waits until the new version has answered and traffic pauses (or
    RETIRE_DEFER_MAX_S), so the first requests to the new version do not share the machine
    with it, and it runs on its own thread."""
    from keras_bert.serving import model_manager
    from keras_bert.serving.servable import Servable
    closed_by = []
    close = Servable.close
    monkeypatch.setattr(Servable, "close", lambda self: (
        closed_by.append((self.version, threading.current_thread().name)), close(self))[1])
    monkeypatch.setattr(model_manager, "RETIRE_DEFER_MAX_S", 60.0)
    monkeypatch.setattr(model_manager, "RETIRE_QUIET_S", 1.0)  # no pause in a busy loop here
    base = tmp_path / "toy"
    write_toy_version(str(base), 1)
    with running_server("--model_name", "toy", "--model_base_path", str(base),
                        "--file_system_poll_wait_seconds", "0") as (server, stubs):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "toy"
        request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.zeros((1, 3), np.float32)))
        retired = server.manager.servable(request.model_spec)
        write_toy_version(str(base), 2)
        server.manager.poll()
        assert status(stubs)[1][0] == END
        assert not retired.wait_closed(2.0)  # quiet, but version 2 has answered nothing yet
        for _ in range(300):  # unbroken traffic on version 2 (no pause of 1 s)
            assert server.core.predict(request).model_spec.version.value == 2
        assert closed_by == [] and not retired.wait_closed(0)
        assert retired.wait_closed(30)  # traffic paused
        assert closed_by == [(1, "retire-toy")]
