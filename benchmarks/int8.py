"""int8 exports against float32, bf16 and ONNX Runtime on real sentences (issue 21).

Every contender turns batches of raw text into a BERT-base classifier's or encoder's output, on
2 threads, tokenization included:

  ours-fp32   our export (BertClassifier, random weights, 3 classes), serving_default run as TF
              Serving runs it: tf.compat.v1 loader + Session.run, raw text in
  ours-bf16   the same exported with mixed_precision="bf16"
  ours-int8   the same exported with quantize="int8"
  ours-int8cal  the same exported with quantize="int8" and calibration_texts (300 other
              sentences of the corpus: static input ranges, models/int8_calibration)
  ours-ovfp32 the same classifier exported with format="openvino" (our tokenizer inside the
              IR, raw text in), run by OpenVINO with the ov-* settings below
  ours-ovint8 the same with quantize="int8" (NNCF on the calibration sentences)
  ort-fp32    ONNX Runtime: transformers.BertModel (random weights) exported to ONNX with dynamic
              axes, transformer-optimized; batches tokenized by BertTokenizerFast and padded to
              their longest text
  ort-int8    the same after onnxruntime.quantization.quantize_dynamic (QInt8 weights)
  ov-fp32     OpenVINO reading the same BertModel's ONNX file (before ONNX Runtime's fusions,
              which OpenVINO does not read), INFERENCE_NUM_THREADS=2, NUM_STREAMS=1,
              INFERENCE_PRECISION_HINT=f32 (no silent bf16); BertTokenizerFast per batch
  ov-int8     the same after NNCF post-training quantization (model_type TRANSFORMER) on the
              calibration sentences (300 others of the corpus, as ours-int8cal)
  base-*      with --baseline-root DIR: each ours-* contender with the keras_bert of another
              checkout (before/after comparisons in one run; its exports in WORKDIR/base)

under two batching policies: ``arrival`` (batches of 32 in the texts' order) and ``sorted``
(texts sorted by WordPiece count first, by our Python tokenizer: the same batches for every
contender). TensorFlow gets 2 intra-op threads (and --inter_op_threads), ONNX Runtime 2
intra-op threads and sequential execution. Each contender is its own process (the ONNX Runtime
ones in benchmarks/.venvs/onnx, with its threads' spin-waiting off); this orchestrator imports
neither TensorFlow nor ONNX Runtime. Rounds are interleaved, the order rotated each round;
reported: the median over rounds of texts/s and of texts per CPU-second of the worker process
(user + system), which other load on the machine disturbs less.

Usage (from the repository root):
    python3 ../shared/bench/make_corpus.py --out benchmarks/data/bench_corpus.txt --target-bytes 2000000
    python3.11 -m venv benchmarks/.venvs/onnx && benchmarks/.venvs/onnx/bin/pip install \\
        torch==2.13.0 onnxruntime onnx transformers openvino nncf
    python benchmarks/int8.py --corpus benchmarks/data/bench_corpus.txt --vocab VOCAB.txt \\
        --rounds 3 --json benchmarks/data/int8.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ONNX_PYTHON = os.path.join(REPO_ROOT, "benchmarks", ".venvs", "onnx", "bin", "python")
CONTENDERS = ("ours-fp32", "ours-bf16", "ours-int8", "ours-int8cal", "ours-ovfp32",
              "ours-ovint8", "ort-fp32", "ort-int8", "ov-fp32", "ov-int8")
# The contenders that run in benchmarks/.venvs/onnx (torch, transformers, ONNX Runtime, OpenVINO).
PEER_FAMILIES = ("ort", "ov")
CALIBRATION_TEXTS = 300  # ours-int8cal: other sentences of the corpus than the ones timed
POLICIES = ("arrival", "sorted")
BATCH_SIZE = 32
SEQ_LENGTH = 128
THREADS = 2


def real_sentences(corpus: str, count: int, seed: int = 0) -> list[str]:
    """``count`` distinct sentences of 5-25 words from a one-sentence-per-line corpus, shuffled."""
    with open(corpus, encoding="utf-8") as f:
        sentences = sorted({line.strip() for line in f if 5 <= len(line.split()) <= 25})
    random.Random(seed).shuffle(sentences)
    return sentences[:count]


def wordpiece_sorted(texts: list[str], vocab: str) -> list[str]:
    """``texts`` sorted by WordPiece count (our Python tokenizer, Google's), stably: the
    ``sorted`` policy's order, the same batches for every contender."""
    sys.path.insert(0, REPO_ROOT)
    from keras_bert.tokenization.tokenizer import BertTokenizer  # pure Python, no TensorFlow
    tokenizer = BertTokenizer(vocab, lower_case=True)
    return sorted(texts, key=lambda text: len(tokenizer.tokenize(text)))


def batches(texts: list[str]) -> list[list[str]]:
    return [texts[i:i + BATCH_SIZE] for i in range(0, len(texts), BATCH_SIZE)]


def directory_megabytes(path: str) -> float:
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names) / 1e6


def write_onnx(module, config, directory: str, stem: str, outputs: dict) -> None:
    """Writes DIRECTORY/STEM-fp32.onnx and STEM-int8.onnx from a torch module that takes
    input_ids, attention_mask and token_type_ids by position: torch.onnx.export with dynamic
    batch and sequence axes, onnxruntime.transformers' BERT optimizer (fused attention and
    layer norms), then quantize_dynamic with QInt8 weights (the usual path). ``outputs``:
    {output name: its dynamic axes}; ``config``: the transformers config (heads, width)."""
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    os.makedirs(directory, exist_ok=True)
    ids = torch.ones(2, 16, dtype=torch.int64)
    raw = os.path.join(directory, f"{stem}-raw.onnx")
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(module, (ids, ids, torch.zeros_like(ids)), raw,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=list(outputs),
                          dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                        "token_type_ids": axes, **outputs},
                          opset_version=17, dynamo=False)
    fused = optimizer.optimize_model(raw, model_type="bert",
                                     num_heads=config.num_attention_heads,
                                     hidden_size=config.hidden_size)
    fp32 = os.path.join(directory, f"{stem}-fp32.onnx")
    fused.save_model_to_file(fp32)
    # The fused ops of the optimizer (Attention, SkipLayerNormalization) have no shape
    # inference in onnx; their outputs are float32.
    quantize_dynamic(fp32, os.path.join(directory, f"{stem}-int8.onnx"),
                     weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


# ----------------------------------------------------------------------------------- workers
class OursWorker:
    """Our export of a BERT-base classifier, run by TensorFlow's graph-mode loader."""

    def __init__(self, kind: str, workdir: str, vocab: str, inter_op_threads: int):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (the preprocessor's ops)
        self.tf = tf
        base = os.path.join(workdir, "base" if os.environ.get("KERAS_BERT_BASELINE") else "ours")
        path = os.path.join(base, kind, "1")
        if not os.path.exists(path):
            self._export(kind, base, vocab)
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=THREADS,
                                          inter_op_parallelism_threads=inter_op_threads)
        self.session = tf.compat.v1.Session(graph=tf.Graph(), config=config)
        with self.session.graph.as_default():
            meta_graph = tf.compat.v1.saved_model.loader.load(self.session, ["serve"], path)
        signature = meta_graph.signature_def["serving_default"]
        self.input = signature.inputs["text"].name
        self.output = signature.outputs["probabilities"].name
        self.megabytes = directory_megabytes(path)

    @staticmethod
    def _export(kind: str, base: str, vocab: str) -> None:
        import keras
        from keras_bert import BertClassifier, BertEncoder, BertPreprocessor
        from keras_bert.export import export_model
        keras.utils.set_random_seed(0)
        encoder = BertEncoder.from_architecture("bert_base_uncased")
        model = BertClassifier(encoder, 3,
                               preprocessor=BertPreprocessor(vocab, True, SEQ_LENGTH))
        calibration = None
        if kind in ("int8cal", "ovint8"):
            with open(os.path.join(os.path.dirname(base), "calibration.json")) as f:
                calibration = json.load(f)
        if kind.startswith("ov"):
            export_model(model, base, kind, 1, format="openvino",
                         quantize="int8" if kind == "ovint8" else None,
                         calibration_texts=calibration)
            return
        export_model(model, base, kind, 1, mixed_precision="bf16" if kind == "bf16" else None,
                     quantize="int8" if kind.startswith("int8") else None,
                     calibration_texts=calibration)

    def run(self, batch: list[str]) -> None:
        import numpy as np
        self.session.run(self.output, {self.input: np.array([t.encode() for t in batch], object)})


class OursOpenVinoWorker:
    """Our OpenVINO export of the same classifier (raw text in), run by OpenVINO."""

    def __init__(self, kind: str, workdir: str, vocab: str):
        import numpy as np
        import openvino
        import openvino_tokenizers  # noqa: F401  (the tokenizer's ops)
        self.np = np
        base = os.path.join(workdir,
                            "base" if os.environ.get("KERAS_BERT_BASELINE") else "ours")
        path = os.path.join(base, kind, "1")
        if not os.path.exists(path):
            OursWorker._export(kind, base, vocab)
        self.model = openvino.Core().compile_model(
            os.path.join(path, "model.xml"), "CPU",
            {"INFERENCE_NUM_THREADS": THREADS, "NUM_STREAMS": 1,
             "INFERENCE_PRECISION_HINT": "f32"})
        self.request = self.model.create_infer_request()
        self.megabytes = directory_megabytes(path)

    def run(self, batch: list[str]) -> None:
        self.request.infer({"text": self.np.array([t.encode() for t in batch], self.np.bytes_)})


class OrtWorker:
    """ONNX Runtime on an HF BertModel (BERT-base, random weights), float32 or int8."""

    def __init__(self, kind: str, workdir: str, vocab: str):
        import onnxruntime
        from transformers import BertTokenizerFast
        path = os.path.join(workdir, "ort", f"bert-{kind}.onnx")
        if not os.path.exists(path):
            self._export(os.path.join(workdir, "ort"))
        self.tokenizer = BertTokenizerFast(vocab_file=vocab, do_lower_case=True)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        # Idle threads sleep instead of spinning, so that CPU time counts work only.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(path, options,
                                                    providers=["CPUExecutionProvider"])
        self.megabytes = os.path.getsize(path) / 1e6

    @staticmethod
    def _export(directory: str) -> None:
        import torch
        from transformers import BertConfig, BertModel
        torch.manual_seed(0)
        bert = BertModel(BertConfig(attn_implementation="eager")).eval()  # BERT-base

        class Positional(torch.nn.Module):  # the three inputs by position, two outputs
            def __init__(self):
                super().__init__()
                self.bert = bert

            def forward(self, input_ids, attention_mask, token_type_ids):
                outputs = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                                    token_type_ids=token_type_ids)
                return outputs.last_hidden_state, outputs.pooler_output

        write_onnx(Positional().eval(), bert.config, directory, "bert",
                   {"last_hidden_state": {0: "batch", 1: "sequence"},
                    "pooler_output": {0: "batch"}})

    def run(self, batch: list[str]) -> None:
        encoded = self.tokenizer(batch, padding=True, truncation=True, max_length=SEQ_LENGTH,
                                 return_tensors="np")
        self.session.run(["pooler_output"], {name: encoded[name].astype("int64") for name in
                                             ("input_ids", "attention_mask", "token_type_ids")})


class OpenVinoWorker:
    """OpenVINO on the HF BertModel's ONNX file (BERT-base, random weights, the one OrtWorker
    writes, before ONNX Runtime's fusions), float32 or NNCF int8."""

    def __init__(self, kind: str, workdir: str, vocab: str):
        import openvino
        from transformers import BertTokenizerFast
        self.tokenizer = BertTokenizerFast(vocab_file=vocab, do_lower_case=True)
        path = os.path.join(workdir, "ov", f"bert-{kind}.xml")
        if not os.path.exists(path):
            if not os.path.exists(os.path.join(workdir, "ort", "bert-raw.onnx")):
                OrtWorker._export(os.path.join(workdir, "ort"))
            self._convert(kind, workdir, path)
        core = openvino.Core()
        self.model = core.compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": THREADS,
                                                      "NUM_STREAMS": 1,
                                                      "INFERENCE_PRECISION_HINT": "f32"})
        self.request = self.model.create_infer_request()
        self.megabytes = os.path.getsize(path.replace(".xml", ".bin")) / 1e6

    def _convert(self, kind: str, workdir: str, path: str) -> None:
        import openvino
        model = openvino.convert_model(os.path.join(workdir, "ort", "bert-raw.onnx"))
        if kind == "int8":
            import nncf
            with open(os.path.join(workdir, "calibration.json")) as f:
                calibration = json.load(f)
            samples = [self.encode([text]) for text in calibration]
            model = nncf.quantize(model, nncf.Dataset(samples),
                                  model_type=nncf.ModelType.TRANSFORMER,
                                  subset_size=len(samples))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        openvino.save_model(model, path)

    def encode(self, batch: list[str]) -> dict:
        encoded = self.tokenizer(batch, padding=True, truncation=True, max_length=SEQ_LENGTH,
                                 return_tensors="np")
        return {name: encoded[name].astype("int64") for name in
                ("input_ids", "attention_mask", "token_type_ids")}

    def run(self, batch: list[str]) -> None:
        self.request.infer(self.encode(batch))


def worker_main(args: argparse.Namespace) -> None:
    family, kind = args.worker.split("-")
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the replies (NNCF prints)
        if family in ("ours", "base") and kind.startswith("ov"):
            worker = OursOpenVinoWorker(kind, args.workdir, args.vocab)
        elif family in ("ours", "base"):
            worker = OursWorker(kind, args.workdir, args.vocab, args.inter_op_threads)
        elif family == "ov":
            worker = OpenVinoWorker(kind, args.workdir, args.vocab)
        else:
            worker = OrtWorker(kind, args.workdir, args.vocab)
    with open(os.path.join(args.workdir, "texts.json")) as f:
        texts = json.load(f)
    plans = {policy: batches(texts[policy]) for policy in POLICIES}
    texts = texts["arrival"]
    for batch in plans["arrival"][:2]:  # warm-up: first calls build kernels and caches
        worker.run(batch)
    print(json.dumps({"megabytes": worker.megabytes}), flush=True)
    for line in sys.stdin:
        policy = line.strip()
        wall, cpu = time.perf_counter(), time.process_time()
        for batch in plans[policy]:
            worker.run(batch)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(json.dumps({"texts_per_s": len(texts) / wall, "texts_per_cpu_s": len(texts) / cpu}),
              flush=True)


# ------------------------------------------------------------------------------ orchestrator
def start_worker(contender: str, args: argparse.Namespace) -> subprocess.Popen:
    python = ONNX_PYTHON if contender.split("-")[0] in PEER_FAMILIES else sys.executable
    # Absolute paths: a base-* worker runs in the baseline checkout.
    command = [python, os.path.abspath(__file__), "--worker", contender, "--workdir",
               os.path.abspath(args.workdir), "--vocab", os.path.abspath(args.vocab),
               "--inter_op_threads", str(args.inter_op_threads)]
    # A base-* worker runs this file with the baseline checkout's keras_bert first on the path.
    root = os.path.abspath(args.baseline_root) if contender.startswith("base") else REPO_ROOT
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": root,
                   "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": str(THREADS),
                   "KERAS_BERT_BASELINE": "1" if root != REPO_ROOT else ""}
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=environment, cwd=root)


def ask(worker: subprocess.Popen, line: str | None = None) -> dict:
    if line is not None:
        worker.stdin.write(line + "\n")
        worker.stdin.flush()
    reply = worker.stdout.readline()
    if not reply:
        raise RuntimeError(f"worker {worker.args[3]} stopped (exit code {worker.wait()})")
    return json.loads(reply)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", help="one sentence per line (make_corpus.py)")
    parser.add_argument("--vocab", required=True, help="the uncased BERT vocab.txt")
    parser.add_argument("--texts", type=int, default=640)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=CONTENDERS)
    parser.add_argument("--inter_op_threads", type=int, default=1,
                        help="TensorFlow's inter-op threads (default: %(default)s)")
    parser.add_argument("--workdir", default=os.path.join(REPO_ROOT, "benchmarks", "data",
                                                          "int8"),
                        help="exports and ONNX files, reused when present")
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--baseline-root", metavar="DIR",
                        help="another checkout: its keras_bert runs as base-* beside ours-*")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(args)
        return
    if args.baseline_root:
        args.contenders += [c.replace("ours", "base") for c in args.contenders
                            if c.startswith("ours")]
    os.makedirs(args.workdir, exist_ok=True)
    texts = real_sentences(args.corpus, args.texts + CALIBRATION_TEXTS)
    texts, calibration = texts[:args.texts], texts[args.texts:]
    with open(os.path.join(args.workdir, "texts.json"), "w") as f:
        json.dump({"arrival": texts, "sorted": wordpiece_sorted(texts, args.vocab)}, f)
    with open(os.path.join(args.workdir, "calibration.json"), "w") as f:
        json.dump(calibration, f)
    workers, megabytes = {}, {}
    for contender in args.contenders:  # one at a time: exports and ONNX files are built once
        workers[contender] = start_worker(contender, args)
        megabytes[contender] = ask(workers[contender])["megabytes"]
    results = {(c, p): [] for c in args.contenders for p in POLICIES}
    for round_index in range(args.rounds):
        order = args.contenders[round_index % len(args.contenders):] + \
            args.contenders[:round_index % len(args.contenders)]
        for policy in POLICIES:
            for contender in order:
                results[contender, policy].append(ask(workers[contender], policy))
    for worker in workers.values():
        worker.stdin.close()
        worker.wait()
    report(results, megabytes, args)


def report(results: dict, megabytes: dict, args: argparse.Namespace) -> None:
    summary = {}
    for (contender, policy), rounds in results.items():
        summary[contender, policy] = {
            key: statistics.median(r[key] for r in rounds)
            for key in ("texts_per_s", "texts_per_cpu_s")}
    load = os.getloadavg()
    print(f"{args.texts} real sentences, batch {BATCH_SIZE}, {THREADS} threads "
          f"(TF inter-op {args.inter_op_threads}), {args.rounds} rounds, load average "
          f"{load[0]:.1f}")
    # Ratios per CPU-second against each reference that ran (issue 51 states its targets
    # against ort-int8 and ov-int8).
    bases = [base for base in ("ours-fp32", "ort-int8", "ov-int8") if base in args.contenders]
    print("| contender | policy | texts/s | texts per CPU-s | "
          + "".join(f"vs {base} (CPU) | " for base in bases) + "size MB |")
    print("|---|---|---:|---:|" + "---:|" * len(bases) + "---:|")
    for policy in POLICIES:
        for contender in args.contenders:
            row = summary[contender, policy]
            ratios = "".join(
                f"{row['texts_per_cpu_s'] / summary[base, policy]['texts_per_cpu_s']:.2f} | "
                for base in bases)
            print(f"| {contender} | {policy} | {row['texts_per_s']:.1f} | "
                  f"{row['texts_per_cpu_s']:.1f} | {ratios}{megabytes[contender]:.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": {f"{c}/{p}": v for (c, p), v in results.items()},
                       "megabytes": megabytes, "load_average": load,
                       "inter_op_threads": args.inter_op_threads}, f, indent=1)


if __name__ == "__main__":
    main()
