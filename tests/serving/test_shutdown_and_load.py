"""Graceful SIGTERM (in-flight requests finish, the process exits 0), a load of 32 concurrent
clients (zero errors, no leaked threads, bounded memory), and `keras-bert serve` given a base path
that does not exist (said once; it waits for a version, or exits non-zero without polling)."""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from tests.helpers import wait_until
from tests.serving.server_helpers import free_port, running_server
from tests.serving.toy_models import write_toy_version

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# `keras-bert serve` with the batching module's DEBUG lines on: each queued request is logged.
SERVE_LOGGING_QUEUED_REQUESTS = (
    "import logging, sys\n"
    "from keras_bert import cli\n"
    "logging.getLogger('keras_bert.serving.batching').setLevel(logging.DEBUG)\n"
    "sys.exit(cli.main(sys.argv[1:]))\n")


def request_for(x: np.ndarray) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "toy"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(x))
    return request


@pytest.mark.slow
def test_sigterm_drains_in_flight_requests_and_exits_0(tmp_path):
    base = tmp_path / "toy"
    write_toy_version(str(base), 1)
    batching = tmp_path / "batching.txt"
    # A request would wait an hour for its batch to fill: it is in flight when SIGTERM comes.
    batching.write_text("max_batch_size { value: 8 } batch_timeout_micros { value: 3600000000 }")
    port = free_port()
    log_path = tmp_path / "server.log"
    log = open(log_path, "w")
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE_LOGGING_QUEUED_REQUESTS, "serve", "--port", str(port),
         "--model_name", "toy", "--model_base_path", str(base), "--enable_batching",
         "--batching_parameters_file", str(batching), "--file_system_poll_wait_seconds", "0"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    try:
        assert "model server ready" in process.stdout.readline(), log_path.read_text()
        stub = prediction_service_pb2_grpc.PredictionServiceStub(
            grpc.insecure_channel(f"127.0.0.1:{port}"))
        x = np.array([[1, 2, 3]], np.float32)
        future = stub.Predict.future(request_for(x), timeout=60)
        wait_until(lambda: "queued a request of 1 rows" in log_path.read_text(), 30,
                   lambda: f"the request was never queued:\n{log_path.read_text()[-3000:]}")
        assert not future.done()  # queued for its batch
        start = time.monotonic()
        process.send_signal(signal.SIGTERM)
        response = future.result()
        np.testing.assert_array_equal(tf.make_ndarray(response.outputs["y"]), 2 * x + 1)
        assert process.wait(timeout=60) == 0
        assert time.monotonic() - start < 60  # it did not wait out the hour-long batch timeout
        try:
            stub.Predict(request_for(x), timeout=5)
            raise AssertionError("the server answered after shutting down")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        log.close()


class ServeProcess:
    """`keras-bert serve` with ``flags``; its stdout and stderr (the log) are collected line by
    line on a thread, so a test can wait for a line with a deadline."""

    def __init__(self, *flags: str):
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "keras_bert.cli", "serve", *flags], cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout),
                                        daemon=True)
        self._reader.start()

    def said(self, text: str) -> int:
        """How many output lines so far contain ``text``."""
        return sum(text in line for line in list(self.lines))

    def wait_for(self, text: str, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.said(text):
            assert self.process.poll() is None or self._reader.is_alive(), "".join(self.lines)
            assert time.monotonic() < deadline, f"no {text!r} in:\n" + "".join(self.lines)
            time.sleep(0.05)

    def close(self) -> int:
        """Stops it (SIGTERM) if still running; its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._reader.join(timeout=10)


@pytest.mark.slow
def test_serve_waits_for_a_base_path_that_does_not_exist_yet(tmp_path):
    """The mistyped-path case of issue 41: the missing base path is said once, not every poll;
    nothing listens and "ready" is not printed until a version appears (as
    tensorflow_model_server, whose ports open after each model's first load)."""
    base = tmp_path / "late"
    port = free_port()
    server = ServeProcess("--port", str(port), "--model_name", "toy", "--model_base_path",
                          str(base), "--file_system_poll_wait_seconds", "0.05")
    try:
        server.wait_for("not listening yet: waiting for a first version of model toy")
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0
        staged = write_toy_version(str(tmp_path / "staging"), 1)  # many polls' time
        base.mkdir()
        os.rename(staged, base / "1")
        server.wait_for("model server ready")
        stub = prediction_service_pb2_grpc.PredictionServiceStub(
            grpc.insecure_channel(f"127.0.0.1:{port}"))
        x = np.array([[1, 2, 3]], np.float32)
        np.testing.assert_array_equal(
            tf.make_ndarray(stub.Predict(request_for(x), timeout=60).outputs["y"]), 2 * x + 1)
    finally:
        assert server.close() == 0
    output = "".join(server.lines)
    assert server.said(f"model toy: base path {base} does not exist") == 1, output
    assert server.said(str(base)) <= 3, output  # missing; found, perhaps empty first
    assert server.said("model server ready") == 1
    assert output.index("found version(s) 1") < output.index("model server ready")


@pytest.mark.slow
def test_serve_without_polling_exits_non_zero_on_a_missing_base_path(tmp_path):
    missing = tmp_path / "does" / "not" / "exist"
    server = ServeProcess("--port", str(free_port()), "--model_name", "m", "--model_base_path",
                          str(missing), "--file_system_poll_wait_seconds", "0")
    try:
        assert server.process.wait(timeout=120) == 2
    finally:
        server.close()
    output = "".join(server.lines)
    assert server.said(f"model m: base path {missing} does not exist") == 1, output
    assert server.said("model server: error: model m has no version") == 1, output
    assert "model server ready" not in output


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.slow
def test_32_concurrent_clients(tmp_path):
    base = tmp_path / "toy"
    write_toy_version(str(base), 1)
    batching = tmp_path / "batching.txt"
    batching.write_text("max_batch_size { value: 32 } batch_timeout_micros { value: 1000 } "
                        "num_batch_threads { value: 2 } max_enqueued_batches { value: 64 }")
    threads_before = threading.active_count()
    clients, requests_per_client = 32, 64
    errors, answered = [], [0]
    lock = threading.Lock()
    with running_server("--model_name", "toy", "--model_base_path", str(base),
                        "--enable_batching", "--batching_parameters_file", str(batching),
                        "--file_system_poll_wait_seconds", "0") as (server, stubs):
        channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        rss_before = _rss_mb()

        def client(index: int) -> None:
            rng = np.random.default_rng(index)
            rest = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=60)
            try:
                for _ in range(requests_per_client):
                    x = rng.normal(size=(int(rng.integers(1, 5)), 3)).astype(np.float32)
                    if index % 2:
                        y = tf.make_ndarray(stub.Predict(request_for(x), timeout=60).outputs["y"])
                    else:
                        rest.request("POST", "/v1/models/toy:predict",
                                     json.dumps({"inputs": {"x": x.tolist()}}))
                        reply = rest.getresponse()
                        body = json.loads(reply.read())
                        assert reply.status == 200, body
                        y = np.array(body["outputs"]["y"], np.float32)
                    np.testing.assert_allclose(y, 2 * x + 1, rtol=1e-6)
                    with lock:
                        answered[0] += 1
            except Exception as e:  # collected, so one failure does not hide the rest
                errors.append(repr(e))
            finally:
                rest.close()

        start = time.monotonic()
        workers = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=300)
        elapsed = time.monotonic() - start
        rss_growth = _rss_mb() - rss_before
        channel.close()
    print(f"{answered[0]} requests in {elapsed:.1f} s ({answered[0] / elapsed:.0f}/s), "
          f"RSS +{rss_growth:.0f} MB")
    assert errors == []
    assert answered[0] == clients * requests_per_client
    assert rss_growth < 150
    deadline = time.monotonic() + 10
    while threading.active_count() > threads_before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert threading.active_count() == threads_before, [t.name for t in threading.enumerate()]
