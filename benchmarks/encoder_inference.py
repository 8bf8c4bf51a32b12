"""Encoder inference throughput: keras-bert's BertEncoder against keras-hub and Hugging Face.

Measures sequences/second of a forward pass (BERT-base, batch 32, seq 128 by default) on
2 intra-op threads and 1 inter-op thread, for:

  ours-fp32   keras_bert.BertEncoder.from_architecture(...), float32
  ours-bf16   the same with dtype="mixed_bfloat16"
  keras-hub   keras_hub.models.BertBackbone, float32 (its own venv, TF backend)
  torch       transformers.BertModel, float32, eager under torch.inference_mode()
  base-fp32   with --baseline-root: ours-fp32 from another checkout (before/after comparisons)
  base-bf16   likewise for ours-bf16

The Keras contenders are timed in several variants: ``predict`` (model.predict as compiled by
default, which on a CPU-only machine means no XLA), ``function`` (a tf.function(jit_compile=False)
around model(x)) and ``xla`` (tf.function(jit_compile=True)); each contender's score is its best
variant. Every contender runs in its own subprocess (its own venv), warms up, then the
orchestrator interleaves timed batches round-robin, so that load from other processes on the
machine falls on all contenders alike, and reports medians and ratios. All contenders get the
same random ids (with padding), written once by the orchestrator to an .npz file.

This orchestrator imports neither torch nor keras_hub nor tensorflow; workers are this same file
run with ``--worker``.

Usage (from the repository root):
    python benchmarks/encoder_inference.py --setup            # venvs under benchmarks/.venvs/
    python benchmarks/encoder_inference.py --rounds 5 --json benchmarks/data/encoder_inference.json
    python benchmarks/encoder_inference.py --quick            # tiny smoke configuration
    git worktree add /tmp/before HEAD~1 && python benchmarks/encoder_inference.py \
        --contenders ours-fp32 ours-bf16 --baseline-root /tmp/before --variants function
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENVS_DIR = os.path.join(REPO_ROOT, "benchmarks", ".venvs")

# What --setup installs into each benchmark venv; the pins match the library's venv.
VENV_REQUIREMENTS = {
    "keras-hub": ["tensorflow==2.21.0", "keras==3.15.1", "keras-hub==0.32.0"],
    "torch": ["torch==2.13.0", "transformers==5.23.0"],
}

KERAS_VARIANTS = ("predict", "function", "xla")
CONTENDERS = ("ours-fp32", "ours-bf16", "keras-hub", "torch")
# Contenders that run keras_bert, and the dtype policy of each.
OURS_DTYPES = {"ours-fp32": "float32", "ours-bf16": "mixed_bfloat16",
               "base-fp32": "float32", "base-bf16": "mixed_bfloat16"}
TARGETS = (
    # (numerator, denominator, minimum ratio), from the performance issue.
    ("ours-fp32", "keras-hub", 1.0),
    ("ours-fp32", "torch", 1.15),
    ("ours-bf16", "keras-hub", 1.6),
)
BASELINE_RATIOS = (("ours-fp32", "base-fp32"), ("ours-bf16", "base-bf16"))


@dataclasses.dataclass
class Workload:
    """The architecture and the batch every contender runs."""

    preset: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position_embeddings: int
    batch_size: int
    seq_length: int


FULL = Workload("bert_base_uncased", 30522, 768, 12, 12, 3072, 512, batch_size=32, seq_length=128)
QUICK = Workload("L-2_H-128_A-2", 30522, 128, 2, 2, 512, 512, batch_size=8, seq_length=32)


# ====================================================================== workers
def _set_tf_threads(threads: int) -> None:
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def _keras_callables(model, inputs: dict[str, Any]) -> dict[str, Any]:
    """{variant: zero-argument callable that runs one batch and returns numpy outputs}.

    ``predict`` feeds numpy and gets numpy back, as a user's script does; ``function`` and
    ``xla`` take tensors already on the device and copy every output back to numpy.
    """
    import numpy as np
    import tensorflow as tf

    tensors = {name: tf.constant(value) for name, value in inputs.items()}
    batch_size = len(next(iter(inputs.values())))
    graph = tf.function(lambda x: model(x, training=False), jit_compile=False)
    xla = tf.function(lambda x: model(x, training=False), jit_compile=True)
    model.compile()  # jit_compile="auto": no XLA on a CPU-only machine.

    def to_numpy(outputs):
        return tf.nest.map_structure(np.asarray, outputs)

    return {
        "predict": lambda: model.predict(inputs, batch_size=batch_size, verbose=0),
        "function": lambda: to_numpy(graph(tensors)),
        "xla": lambda: to_numpy(xla(tensors)),
    }


def _ours(workload: Workload, inputs: dict[str, Any], dtype: str) -> tuple[dict, dict]:
    import keras
    from keras_bert import BertConfig, BertEncoder

    config = BertConfig.preset(workload.preset)
    expected = (workload.vocab_size, workload.hidden_size, workload.num_layers,
                workload.num_heads, workload.intermediate_size)
    actual = (config.vocab_size, config.hidden_size, config.num_hidden_layers,
              config.num_attention_heads, config.intermediate_size)
    if actual != expected:
        raise ValueError(f"preset {workload.preset!r} is {actual}, the workload says {expected}")
    policy = None if dtype == "float32" else dtype
    model = BertEncoder.from_architecture(workload.preset, dtype=policy)
    info = {"keras": keras.__version__, "dtype_policy": model.dtype_policy.name,
            "parameters": model.count_params()}
    return _keras_callables(model, inputs), info


def _keras_hub(workload: Workload, inputs: dict[str, Any]) -> tuple[dict, dict]:
    import keras
    import keras_hub

    model = keras_hub.models.BertBackbone(
        vocabulary_size=workload.vocab_size, num_layers=workload.num_layers,
        num_heads=workload.num_heads, hidden_dim=workload.hidden_size,
        intermediate_dim=workload.intermediate_size,
        max_sequence_length=workload.max_position_embeddings, dtype="float32")
    hub_inputs = {"token_ids": inputs["input_word_ids"],
                  "segment_ids": inputs["input_type_ids"],
                  "padding_mask": inputs["input_mask"]}
    info = {"keras": keras.__version__, "keras_hub": keras_hub.__version__,
            "parameters": model.count_params()}
    return _keras_callables(model, hub_inputs), info


def _torch(workload: Workload, inputs: dict[str, Any], threads: int) -> tuple[dict, dict]:
    import torch
    import transformers

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    config = transformers.BertConfig(
        vocab_size=workload.vocab_size, hidden_size=workload.hidden_size,
        num_hidden_layers=workload.num_layers, num_attention_heads=workload.num_heads,
        intermediate_size=workload.intermediate_size,
        max_position_embeddings=workload.max_position_embeddings)
    model = transformers.BertModel(config).eval()
    tensors = {"input_ids": torch.from_numpy(inputs["input_word_ids"]).long(),
               "attention_mask": torch.from_numpy(inputs["input_mask"]).long(),
               "token_type_ids": torch.from_numpy(inputs["input_type_ids"]).long()}

    def run():
        with torch.inference_mode():
            outputs = model(**tensors)
        return outputs.last_hidden_state.numpy(), outputs.pooler_output.numpy()

    info = {"torch": torch.__version__, "transformers": transformers.__version__,
            "attention": model.config._attn_implementation,
            "mkldnn": torch.backends.mkldnn.is_available(),
            "parameters": sum(p.numel() for p in model.parameters())}
    return {"eager": run}, info


def worker_main(args: argparse.Namespace) -> None:
    """Builds one contender, warms up every variant, then times batches on request.

    Protocol: one JSON object per line. The worker writes {"ready": ..., "variants": [...]},
    then answers each {"variant": v, "batches": n} with {"seconds": [n wall-clock times],
    "cpu_seconds": [n CPU times of the whole process, all threads]}.
    """
    import numpy as np

    # TF and torch may print to stdout; keep the protocol on its own descriptor.
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    workload = Workload(**json.loads(args.workload))
    inputs = dict(np.load(args.inputs))
    if args.worker == "torch":
        callables, info = _torch(workload, inputs, args.threads)
    else:
        _set_tf_threads(args.threads)
        if args.worker == "keras-hub":
            callables, info = _keras_hub(workload, inputs)
        else:
            callables, info = _ours(workload, inputs, OURS_DTYPES[args.worker])

    warmup_s = {}
    first_outputs = {}
    if args.variants:
        callables = {v: run for v, run in callables.items()
                     if v in args.variants or v not in KERAS_VARIANTS}
    for variant, run in callables.items():
        start = time.perf_counter()
        for _ in range(1 + args.warmup):
            outputs = run()
        warmup_s[variant] = round(time.perf_counter() - start, 2)
        first_outputs[variant] = outputs
    info["warmup_s"] = warmup_s
    info["variant_max_abs_diff"] = _variant_diffs(first_outputs)
    protocol.write(json.dumps({"ready": True, "variants": list(callables), "info": info}) + "\n")
    protocol.flush()

    for line in sys.stdin:
        request = json.loads(line)
        reply = {"seconds": [], "cpu_seconds": []}
        for _ in range(request["batches"]):
            start, start_cpu = time.perf_counter(), time.process_time()
            callables[request["variant"]]()
            reply["seconds"].append(time.perf_counter() - start)
            reply["cpu_seconds"].append(time.process_time() - start_cpu)
        protocol.write(json.dumps(reply) + "\n")
        protocol.flush()


def _variant_diffs(outputs_by_variant: dict[str, Any]) -> dict[str, float]:
    """Max |difference| of the first output tensor between each variant and the first one."""
    import numpy as np

    def first_array(outputs):
        if isinstance(outputs, dict):
            return np.asarray(outputs.get("sequence_output", next(iter(outputs.values()))),
                              dtype="float32")
        return np.asarray(outputs[0], dtype="float32")

    variants = list(outputs_by_variant)
    reference = first_array(outputs_by_variant[variants[0]])
    return {v: float(np.max(np.abs(first_array(outputs_by_variant[v]) - reference)))
            for v in variants[1:]}


# ====================================================================== orchestrator
def venv_python(name: str) -> str:
    return os.path.join(VENVS_DIR, name, "bin", "python")


def setup_venvs() -> None:
    """Creates benchmarks/.venvs/{keras-hub,torch} from PyPI with the pinned requirements."""
    for name, requirements in VENV_REQUIREMENTS.items():
        path = os.path.join(VENVS_DIR, name)
        print(f"creating {path}: {' '.join(requirements)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", path], check=True)
        subprocess.run([venv_python(name), "-m", "pip", "install", *requirements], check=True)


def write_inputs(workload: Workload, path: str, seed: int = 0) -> None:
    """Random ids in [1000, vocab), [CLS] ... [SEP], lengths in [seq/2, seq], zero padding."""
    import numpy as np

    rng = np.random.default_rng(seed)
    batch, seq = workload.batch_size, workload.seq_length
    lengths = rng.integers(seq // 2, seq + 1, size=batch)
    ids = rng.integers(1000, workload.vocab_size, size=(batch, seq)).astype("int32")
    ids[:, 0] = 101
    positions = np.arange(seq)[None, :]
    ids[positions == (lengths[:, None] - 1)] = 102
    mask = (positions < lengths[:, None]).astype("int32")
    ids *= mask
    type_ids = ((positions >= lengths[:, None] // 2) & (mask == 1)).astype("int32")
    np.savez(path, input_word_ids=ids, input_mask=mask, input_type_ids=type_ids)


class Worker:
    """One contender's subprocess."""

    def __init__(self, name: str, python: str, args: argparse.Namespace, workload: Workload,
                 inputs_path: str, log_dir: str, source_root: str = REPO_ROOT):
        if not os.path.exists(python):
            flag = "--torch-python" if name == "torch" else "--keras-hub-python"
            raise FileNotFoundError(
                f"{name}: interpreter {python} does not exist; run "
                f"'python benchmarks/encoder_inference.py --setup' or pass {flag}")
        self.name = name
        self.log_path = os.path.join(log_dir, f"{name}.log")
        # source_root puts that checkout's keras_bert first on the path.
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=source_root)
        command = [python, os.path.abspath(__file__), "--worker", name,
                   "--workload", json.dumps(dataclasses.asdict(workload)),
                   "--inputs", inputs_path, "--threads", str(args.threads),
                   "--warmup", str(args.warmup)]
        if args.variants:
            command += ["--variants", *args.variants]
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True, env=env, cwd=source_root)
        ready = self._read()
        self.variants = ready["variants"]
        self.info = ready["info"]

    def _read(self) -> dict[str, Any]:
        line = self.process.stdout.readline()
        if not line:
            self.log.flush()
            with open(self.log_path) as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"worker {self.name} exited (code {self.process.poll()}); "
                               f"end of {self.log_path}:\n{tail}")
        return json.loads(line)

    def time(self, variant: str, batches: int) -> dict[str, list[float]]:
        """{"seconds": [...], "cpu_seconds": [...]}, one entry per batch."""
        self.process.stdin.write(json.dumps({"variant": variant, "batches": batches}) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=60)
        self.log.close()


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    workload = QUICK if args.quick else FULL
    pythons = {"keras-hub": args.keras_hub_python, "torch": args.torch_python,
               **{name: args.ours_python for name in OURS_DTYPES}}
    contenders = list(args.contenders)
    if args.baseline_root:
        contenders += [name.replace("ours", "base") for name in contenders
                       if name.startswith("ours")]
    log_dir = tempfile.mkdtemp(prefix="encoder_inference_")
    inputs_path = os.path.join(log_dir, "inputs.npz")
    write_inputs(workload, inputs_path)

    workers = {}
    try:
        # Started one after another so that each warm-up (XLA compiles) runs alone.
        for name in contenders:
            print(f"starting {name} ...", file=sys.stderr, flush=True)
            root = args.baseline_root if name.startswith("base") else REPO_ROOT
            workers[name] = Worker(name, pythons[name], args, workload, inputs_path, log_dir,
                                   source_root=os.path.abspath(root))
            print(f"  {json.dumps(workers[name].info)}", file=sys.stderr, flush=True)
        entries = [(name, variant) for name, worker in workers.items()
                   for variant in worker.variants]
        samples = {entry: {"seconds": [], "cpu_seconds": []} for entry in entries}
        round_medians = {entry: [] for entry in entries}
        for round_index in range(args.rounds):
            shift = round_index % len(entries)
            for entry in entries[shift:] + entries[:shift]:
                timings = workers[entry[0]].time(entry[1], args.batches)
                for key, values in timings.items():
                    samples[entry][key].extend(values)
                round_medians[entry].append(
                    workload.batch_size / statistics.median(timings["seconds"]))
            print(f"round {round_index + 1}/{args.rounds}: " + ", ".join(
                f"{n}/{v} {round_medians[(n, v)][-1]:.2f}" for n, v in entries),
                file=sys.stderr, flush=True)
    finally:
        for worker in workers.values():
            worker.close()
    return summarize(workload, args, workers, samples, round_medians)


def summarize(workload, args, workers, samples, round_medians) -> dict[str, Any]:
    """Medians per variant, each contender's best variant, and the target ratios.

    ``cpu_seq_per_s`` is batch_size * threads / median CPU seconds: the throughput the process
    would have if its threads had the cores to themselves. It is less sensitive than wall-clock
    time to other processes on the machine, but counts spin-waiting threads as busy.
    """
    variants = {}
    for (name, variant), timings in samples.items():
        variants.setdefault(name, {})[variant] = {
            "median_seq_per_s": workload.batch_size / statistics.median(timings["seconds"]),
            "best_seq_per_s": workload.batch_size / min(timings["seconds"]),
            "cpu_seq_per_s": (workload.batch_size * args.threads
                              / statistics.median(timings["cpu_seconds"])),
            "round_median_seq_per_s": round_medians[(name, variant)],
            **timings,
        }
    contenders = {}
    for name, by_variant in variants.items():
        best = max(by_variant, key=lambda v: by_variant[v]["median_seq_per_s"])
        contenders[name] = {"best_variant": best,
                            "median_seq_per_s": by_variant[best]["median_seq_per_s"],
                            "variants": by_variant, "info": workers[name].info}

    def ratio(label, numerator, denominator, target=None):
        value = numerator["median_seq_per_s"] / denominator["median_seq_per_s"]
        return {"ratio": label, "value": value,
                "best_value": numerator["best_seq_per_s"] / denominator["best_seq_per_s"],
                "cpu_value": numerator["cpu_seq_per_s"] / denominator["cpu_seq_per_s"],
                "target": target, "met": None if target is None else value >= target}

    ratios = []
    for numerator, denominator, target in TARGETS:
        if numerator in contenders and denominator in contenders:
            best = [contenders[n]["variants"][contenders[n]["best_variant"]]
                    for n in (numerator, denominator)]
            ratios.append(ratio(f"{numerator} / {denominator}", *best, target))
    for numerator, denominator in BASELINE_RATIOS:
        if numerator in contenders and denominator in contenders:
            for variant, stats in contenders[numerator]["variants"].items():
                ratios.append(ratio(f"{numerator} / {denominator} ({variant})", stats,
                                    contenders[denominator]["variants"][variant]))
    return {"workload": dataclasses.asdict(workload), "threads": args.threads,
            "rounds": args.rounds, "batches_per_round": args.batches, "warmup": args.warmup,
            "contenders": contenders, "ratios": ratios}


def format_table(result: dict[str, Any]) -> str:
    lines = ["| contender | variant | median seq/s | round medians, min-max | best batch seq/s "
             "| seq/s from CPU time |",
             "|---|---|---|---|---|---|"]
    for name, contender in result["contenders"].items():
        for variant, stats in contender["variants"].items():
            marker = " **(best)**" if variant == contender["best_variant"] else ""
            rounds = stats["round_median_seq_per_s"]
            lines.append(f"| {name} | {variant}{marker} | {stats['median_seq_per_s']:.2f} | "
                         f"{min(rounds):.2f}-{max(rounds):.2f} | {stats['best_seq_per_s']:.2f} "
                         f"| {stats['cpu_seq_per_s']:.2f} |")
    lines += ["", "| ratio (best variants) | median seq/s ratio | target | met "
                  "| best-batch ratio | CPU-time ratio |",
              "|---|---|---|---|---|---|"]
    for ratio in result["ratios"]:
        target, met = "", ""
        if ratio["target"] is not None:
            target, met = f">= {ratio['target']}x", "yes" if ratio["met"] else "no"
        lines.append(f"| {ratio['ratio']} | {ratio['value']:.2f}x | {target} | {met} "
                     f"| {ratio['best_value']:.2f}x | {ratio['cpu_value']:.2f}x |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", action="store_true",
                        help="create the keras-hub and torch venvs under benchmarks/.venvs/")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: L-2_H-128_A-2, batch 8, seq 32")
    parser.add_argument("--rounds", type=int,
                        help="round-robin rounds (default 5; 2 with --quick)")
    parser.add_argument("--batches", type=int,
                        help="timed batches per contender variant per round (default 3; 2 with "
                             "--quick)")
    parser.add_argument("--warmup", type=int,
                        help="untimed batches per variant after the first, compiling one "
                             "(default 2; 1 with --quick)")
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads (inter-op: 1)")
    parser.add_argument("--contenders", nargs="+",
                        default=list(CONTENDERS), choices=CONTENDERS)
    parser.add_argument("--variants", nargs="+", choices=KERAS_VARIANTS,
                        help="time only these Keras variants (default: all)")
    parser.add_argument("--baseline-root", metavar="DIR",
                        help="another checkout (e.g. a git worktree of the previous commit) whose "
                             "keras_bert runs as base-fp32/base-bf16 beside each ours-* contender")
    parser.add_argument("--ours-python", default=sys.executable,
                        help="interpreter with tensorflow and keras (keras_bert from this repo)")
    parser.add_argument("--keras-hub-python", default=venv_python("keras-hub"))
    parser.add_argument("--torch-python", default=venv_python("torch"))
    parser.add_argument("--json", metavar="PATH",
                        help="write the full results as JSON to PATH ('-' for stdout)")
    # Internal: run as one contender's worker.
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    defaults = {"rounds": 2, "batches": 2, "warmup": 1} if args.quick else {
        "rounds": 5, "batches": 3, "warmup": 2}
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker_main(args)
        return
    if args.setup:
        setup_venvs()
        return
    result = run_benchmark(args)
    print(format_table(result))
    if args.json == "-":
        print(json.dumps(result, indent=2))
    elif args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
