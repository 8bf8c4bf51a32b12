"""Distilled students against ONNX Runtime int8, at equal threads (issue 38).

Takes the teacher and students that benchmarks/distillation.py trained and saved (its work
directory, one dataset and seed), and runs each model's test texts, raw text in and class ids
out, tokenization included, through three contenders:

  ours-export   our int8 export (export_model(quantize="int8", calibration_texts=<the 300
                training texts distillation.py calibrates with>)), run as TF Serving runs it:
                tf.compat.v1 loader + Session.run of serving_default
  ours-predict  in-process: BertClassifier.from_pretrained, quantize("int8",
                calibration_texts=<the same 300 texts>), predict(batch)
  ort-int8      the same model written as a Hugging Face folder (save_checkpoint(format="hf")),
                loaded by transformers' BertForSequenceClassification, exported to ONNX
                (torch.onnx.export, dynamic axes), fused by onnxruntime.transformers' BERT
                optimizer and quantized by quantize_dynamic (QInt8 weights: the usual path);
                batches tokenized by BertTokenizerFast from the folder and padded to their
                longest text, truncated at the model's length

in batches of 64 under two orders: ``arrival`` (the test set's order) and ``sorted`` (by
WordPiece count, counted by our tokenizer once: both sides get the same batches). Threads are
equal and stated: TensorFlow ``--threads`` intra-op and 1 inter-op thread, ONNX Runtime
``--threads`` intra-op threads, sequential execution and no spin-waiting (idle threads sleep,
so CPU time counts work). Each contender is its own process (ONNX Runtime's in the
benchmark-only venv benchmarks/.venvs/onnx); rounds are interleaved, the order rotated each
round; reported: the median over rounds of texts/s and texts per CPU-second of the process, and
each contender's test accuracy (the same model three ways: they should agree).

Usage (from the repository root, after benchmarks/distillation.py with --workdir DIR):
    python3.11 -m venv benchmarks/.venvs/onnx && benchmarks/.venvs/onnx/bin/pip install \\
        torch==2.13.0 onnxruntime onnx transformers
    python benchmarks/distillation_onnx.py --workdir DIR --dataset tweets --seed 0
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.int8 import ONNX_PYTHON, REPO_ROOT, ask, write_onnx  # noqa: E402

MODELS = ("teacher", "distilled-3", "distilled-2")
CONTENDERS = ("ours-export", "ours-predict", "ort-int8")
POLICIES = ("arrival", "sorted")
BATCH = 64  # as distillation.py's speed phase
CALIBRATION_TEXTS = 300  # as distillation.py: the same seed picks the same texts


# ----------------------------------------------------------------------------------- workers
def prepare(job: dict) -> dict:
    """Our side's files, once: each model's int8 export and Hugging Face folder; the texts'
    WordPiece counts and the models' packed length."""
    import keras_bert
    result = {}
    for name in job["models"]:
        path = os.path.join(job["models_dir"], name)
        model = keras_bert.BertClassifier.from_pretrained(path)
        out = os.path.join(job["out"], name)
        if not os.path.exists(os.path.join(out, "hf")):
            keras_bert.save_checkpoint(model, os.path.join(out, "hf"), format="hf")
        if not os.path.exists(os.path.join(out, "export")):
            keras_bert.export_model(model, os.path.join(out, "export"), "model", 1,
                                    quantize="int8", calibration_texts=job["calibration"])
        if "tokens" not in result:
            result["tokens"] = [len(model.tokenizer.tokenize(t)) for t in job["texts"]]
            result["seq_length"] = model.preprocessor.seq_length
    return result


def ours_export(job: dict):
    """Our int8 export through TF Serving's graph-mode loader (``run(batch) -> class ids``)."""
    from benchmarks.distillation import GraphModeExport  # TensorFlow's side only
    return GraphModeExport(os.path.join(job["directory"], "export", "model", "1"), job["threads"])


class OursPredict:
    def __init__(self, job: dict):
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(job["threads"])
        tf.config.threading.set_inter_op_parallelism_threads(1)
        import keras_bert
        self.model = keras_bert.BertClassifier.from_pretrained(job["source"])
        self.model.quantize("int8", calibration_texts=job["calibration"])

    def run(self, batch: list[str]) -> list[int]:
        return self.model.predict(batch, batch_size=BATCH, verbose=0).argmax(-1).tolist()


class OrtInt8:
    def __init__(self, job: dict):
        import onnxruntime
        from transformers import BertTokenizerFast
        hf = os.path.join(job["directory"], "hf")
        path = os.path.join(job["directory"], "ort", "model-int8.onnx")
        if not os.path.exists(path):
            self._export(hf, os.path.dirname(path))
        self.tokenizer = BertTokenizerFast.from_pretrained(hf)
        self.seq_length = job["seq_length"]
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = job["threads"]
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(path, options,
                                                    providers=["CPUExecutionProvider"])

    @staticmethod
    def _export(hf: str, directory: str) -> None:
        import torch
        from transformers import BertForSequenceClassification
        model = BertForSequenceClassification.from_pretrained(
            hf, attn_implementation="eager").eval()

        class Positional(torch.nn.Module):  # the three inputs by position, the logits out
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask, token_type_ids):
                return self.model(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids).logits

        write_onnx(Positional().eval(), model.config, directory, "model",
                   {"logits": {0: "batch"}})

    def run(self, batch: list[str]) -> list[int]:
        encoded = self.tokenizer(batch, padding=True, truncation=True,
                                 max_length=self.seq_length, return_tensors="np")
        logits, = self.session.run(["logits"], {
            name: encoded[name].astype("int64")
            for name in ("input_ids", "attention_mask", "token_type_ids")})
        return logits.argmax(-1).tolist()


WORKERS = {"ours-export": ours_export, "ours-predict": OursPredict, "ort-int8": OrtInt8}


def worker_main(job_path: str) -> None:
    with open(job_path) as f:
        job = json.load(f)
    if job["contender"] == "prepare":
        result = prepare(job)
        with open(job["result"], "w") as f:
            json.dump(result, f)
        return
    worker = WORKERS[job["contender"]](job)
    texts, plans = job["texts"], job["plans"]
    for batch in plans["arrival"][:2]:  # warm-up: the first calls trace and build kernels
        worker.run([texts[i] for i in batch])
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        predictions = {}
        wall, cpu = time.perf_counter(), time.process_time()
        for batch in plans[line.strip()]:
            predictions.update(zip(batch, worker.run([texts[i] for i in batch])))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(json.dumps({"texts_per_s": len(texts) / wall, "texts_per_cpu_s": len(texts) / cpu,
                          "predictions": [predictions[i] for i in range(len(texts))]}),
              flush=True)


# ------------------------------------------------------------------------------ orchestrator
def start(contender: str, job: dict, workdir: str, stem: str) -> subprocess.Popen:
    job_path = os.path.join(workdir, f"{stem}.job.json")
    with open(job_path, "w") as f:
        json.dump(dict(job, contender=contender), f)
    python = ONNX_PYTHON if contender.startswith("ort") else sys.executable
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": REPO_ROOT,
                   "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": str(job["threads"])}
    log = open(os.path.join(workdir, f"{stem}.log"), "w")
    return subprocess.Popen([python, os.path.abspath(__file__), "--worker", job_path],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                            env=environment, cwd=REPO_ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir",
                        help="benchmarks/distillation.py's work directory (its saved models)")
    parser.add_argument("--dataset", default="tweets")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=CONTENDERS)
    parser.add_argument("--threads", type=int, default=1,
                        help="intra-op threads on both sides (default: %(default)s, as "
                             "distillation.py's speed phase)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(args.worker)
        return
    if not args.workdir:
        parser.error("--workdir is required: benchmarks/distillation.py's work directory")
    data_path = os.path.join(args.workdir, f"{args.dataset}.data.json")
    if not os.path.exists(data_path):
        parser.error(f"{data_path} does not exist: run benchmarks/distillation.py --datasets "
                     f"{args.dataset} --workdir {args.workdir} first")
    with open(data_path, encoding="utf-8") as f:
        data = json.load(f)
    texts, labels = data["test_texts"], data["test_labels"]
    calibration = random.Random(args.seed).sample(
        data["train_texts"], min(CALIBRATION_TEXTS, len(data["train_texts"])))
    out = os.path.join(args.workdir, f"onnx-{args.dataset}-{args.seed}")
    os.makedirs(out, exist_ok=True)
    prepared_path = os.path.join(out, "prepared.json")
    job = {"models": args.models, "texts": texts, "calibration": calibration, "out": out,
           "models_dir": os.path.join(args.workdir, f"models-{args.dataset}-{args.seed}"),
           "result": prepared_path, "threads": args.threads}
    code = start("prepare", job, out, "prepare").wait()
    if code:
        raise SystemExit(f"preparing the models failed ({code}): see {out}/prepare.log")
    with open(prepared_path) as f:
        prepared = json.load(f)
    order = sorted(range(len(texts)), key=prepared["tokens"].__getitem__)
    plans = {policy: [indices[i:i + BATCH] for i in range(0, len(indices), BATCH)]
             for policy, indices in (("arrival", list(range(len(texts)))), ("sorted", order))}
    workers = {}
    for model in args.models:  # one at a time: exports and ONNX files are built once
        for contender in args.contenders:
            worker_job = {"texts": texts, "plans": plans, "threads": args.threads,
                          "seq_length": prepared["seq_length"], "calibration": calibration,
                          "directory": os.path.join(out, model),
                          "source": os.path.join(job["models_dir"], model)}
            workers[model, contender] = start(contender, worker_job, out, f"{model}-{contender}")
            ask(workers[model, contender])
    keys = list(workers)
    results = {(k, p): [] for k in keys for p in POLICIES}
    for round_index in range(args.rounds):
        rotated = keys[round_index % len(keys):] + keys[:round_index % len(keys)]
        for policy in POLICIES:
            for key in rotated:
                results[key, policy].append(ask(workers[key], policy))
    for worker in workers.values():
        worker.stdin.close()
        worker.wait()
    report(results, labels, args)


def report(results: dict, labels: list[int], args: argparse.Namespace) -> None:
    summary = {}
    for (key, policy), rounds in results.items():
        predictions = rounds[-1]["predictions"]
        summary[key, policy] = {
            "texts_per_s": statistics.median(r["texts_per_s"] for r in rounds),
            "texts_per_cpu_s": statistics.median(r["texts_per_cpu_s"] for r in rounds),
            "accuracy": sum(p == y for p, y in zip(predictions, labels)) / len(labels)}
    load = os.getloadavg()
    print(f"{args.dataset}, seed {args.seed}: {len(labels)} test texts, batch {BATCH}, "
          f"{args.threads} intra-op thread(s) each side, {args.rounds} rounds, load average "
          f"{load[0]:.1f}")
    print("| model | contender | order | texts/s | texts per CPU-s | x ort-int8 (CPU) | "
          "x ort-int8 (wall) | accuracy % |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for model in args.models:
        for policy in POLICIES:
            ort = summary.get(((model, "ort-int8"), policy))
            for contender in args.contenders:
                row = summary[(model, contender), policy]
                ratios = ((f"{row['texts_per_cpu_s'] / ort['texts_per_cpu_s']:.2f}",
                           f"{row['texts_per_s'] / ort['texts_per_s']:.2f}") if ort
                          else ("", ""))
                print(f"| {model} | {contender} | {policy} | {row['texts_per_s']:.0f} | "
                      f"{row['texts_per_cpu_s']:.0f} | {ratios[0]} | {ratios[1]} | "
                      f"{100 * row['accuracy']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": {k: v for k, v in vars(args).items() if k != "worker"},
                       "load_average": load,
                       "results": {f"{m}/{c}/{p}": v for ((m, c), p), v in summary.items()}},
                      f, indent=1)


if __name__ == "__main__":
    main()
