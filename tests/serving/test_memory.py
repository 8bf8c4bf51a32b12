"""Memory over many version pushes: `keras-bert serve` (batching on, polling the base path, under
gRPC traffic) loads and retires a version 20 times and its RSS stays within 10% of what it was
after the first load and unload. Before retired versions were garbage-collected explicitly, each
load of MiniLM kept about 40 MB (a graph is a web of reference cycles that Python frees only in a
full collection, which a serving process hardly ever triggers): 20 loads would have grown RSS by
about 760 MB, several times the 10% allowed; a leak of 6 MB a load still shows. (It ran 50 loads,
17 minutes of CI's 2-core machine, for no more certainty.)

RSS is read once the server has logged the collection after every retirement, not after a fixed
sleep, which on a loaded CI machine can end before the last retired version is freed (a CI run
read +10.4% that way)."""

import os
import shutil
import subprocess
import sys
import threading
import time

import grpc
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from tests.helpers import wait_until
from tests.serving.exports import encoder_export
from tests.serving.server_helpers import free_port

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOADS = 20


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


@pytest.mark.slow
def test_rss_after_20_loads_and_unloads_stays_within_10_percent(minilm_dir, tmp_path):
    source = encoder_export(os.path.join(minilm_dir, "vocab.txt")).version_dir
    base = tmp_path / "encoder"
    shutil.copytree(source, base / "1")
    batching = tmp_path / "batching.txt"
    batching.write_text("max_batch_size { value: 16 } batch_timeout_micros { value: 1000 } "
                        "num_batch_threads { value: 2 }")
    port = free_port()
    log = open(tmp_path / "server.log", "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_bert.cli", "serve", "--port", str(port), "--model_name",
         "encoder", "--model_base_path", str(base), "--enable_batching",
         "--batching_parameters_file", str(batching), "--file_system_poll_wait_seconds", "0.2"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    stop = threading.Event()
    errors = []
    answered = [0, 0]  # requests each traffic thread has had answered

    def served_version(texts=("a short text",)) -> int:
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "encoder"
        request.inputs["text"].CopyFrom(tf.make_tensor_proto(list(texts)))
        return stub.Predict(request, timeout=60).model_spec.version.value

    def traffic(seed: int) -> None:
        count = 0
        while not stop.is_set():
            count += 1
            try:
                served_version(["words " * (1 + (seed + count) % 20)] * (1 + count % 4))
                answered[seed] += 1
            except grpc.RpcError as e:
                errors.append(e.code())

    def rss_once_freed(retirements: int) -> float:
        """RSS once the server has retired ``retirements`` versions and collected each."""
        deadline = time.monotonic() + 120
        while True:
            text = (tmp_path / "server.log").read_text()
            retired, collected = text.count("retired encoder version"), text.count(
                "garbage-collected")
            if retired >= retirements and collected >= retired:
                return rss_mb(process.pid)
            assert time.monotonic() < deadline, (
                f"{retired} retirements and {collected} collections logged, waited for "
                f"{retirements}:\n{text[-2000:]}")
            time.sleep(0.1)

    def switch_to(version: int) -> None:
        deadline = time.monotonic() + 120
        while served_version() != version:
            assert time.monotonic() < deadline, f"version {version} never served"
            time.sleep(0.05)

    clients = [threading.Thread(target=traffic, args=(seed,)) for seed in range(2)]
    try:
        assert "model server ready" in process.stdout.readline()
        for client in clients:
            client.start()
        # Traffic has run through the first version's kernels: each thread a full cycle of its
        # 20 text lengths.
        wait_until(lambda: min(answered) >= 20, 120,
                   lambda: f"requests answered {answered}, errors {errors[:5]}")
        rss_start = rss_mb(process.pid)
        for cycle in range(LOADS // 2):  # each cycle: version 2 comes (a load), and goes (1 again)
            shutil.copytree(source, base / ".incoming")
            os.rename(base / ".incoming", base / "2")
            switch_to(2)
            shutil.rmtree(base / "2")
            switch_to(1)
            if cycle == 0:
                rss_first = rss_once_freed(2)
        rss_last = rss_once_freed(LOADS)
    finally:
        stop.set()
        for client in clients:
            client.join(timeout=60)
        channel.close()
        process.terminate()
        process.wait(timeout=60)
        log.close()
    # The baseline is taken after the first push (a load beside the version serving, then its
    # unload): the allocator keeps the high-water mark of two versions loaded at once, a
    # one-time step (+5-9% here) that later pushes do not add to.
    print(f"RSS at start {rss_start:.0f} MB, after the first load and unload {rss_first:.0f} MB, "
          f"after {LOADS} loads and unloads {rss_last:.0f} MB "
          f"({100 * (rss_last / rss_first - 1):+.1f}%)")
    assert errors == []
    assert rss_last <= 1.10 * rss_first
