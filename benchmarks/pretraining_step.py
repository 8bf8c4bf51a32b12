"""Pretraining step throughput: keras-bert's training step against keras-hub and Hugging Face.

One step = forward, loss, backward, global-norm clipping and an AdamW update, on BERT
L-4_H-256_A-4 (vocab 30522) with sequence length 128, batch 32 and 20 masked positions, on
2 intra-op threads and 1 inter-op thread. Contenders:

  ours-fp32       keras_bert's pretraining loop step (make_pretraining_train_loop: MLM + NSP,
                  BertAdamW with weight-decay exclusions, clipping after the all-reduce), float32
  ours-bf16       the same with the mixed_bfloat16 policy
  ours-xla-fp32   (only when named in --contenders) ours-fp32 with jit_compile=True: the
                  forward and backward pass compiled with XLA (`keras-bert pretrain --jit_compile`)
  keras-hub-fp32  keras_hub.models.BertMaskedLM (MLM only, no NSP head), train_on_batch with
                  Keras AdamW(weight_decay=0.01, global_clipnorm=1.0) (its own venv, TF backend)
  keras-hub-bf16  the same with dtype="mixed_bfloat16"
  torch-fp32      transformers.BertForPreTraining (MLM + NSP), eager, torch.optim.AdamW and
                  clip_grad_norm_ (from /work/venv-ref by default)
  base-fp32/bf16  with --baseline-root: ours-* from another checkout (before/after comparisons)

Each contender runs in its own subprocess, warms up, then the orchestrator interleaves timed
steps round-robin (rotating the order each round) so that load from other processes falls on
all alike, and reports medians (sequences/second) and ratios. All contenders train on the same
random batch, written once to a .npz file. The orchestrator imports none of the frameworks.

Usage (from the repository root):
    python benchmarks/encoder_inference.py --setup     # creates benchmarks/.venvs/keras-hub
    python benchmarks/pretraining_step.py --rounds 5 --json benchmarks/data/pretraining_step.json
    python benchmarks/pretraining_step.py --quick      # tiny smoke configuration
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
from typing import Any

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENVS_DIR = os.path.join(REPO_ROOT, "benchmarks", ".venvs")
CONTENDERS = ("ours-fp32", "ours-bf16", "keras-hub-fp32", "keras-hub-bf16", "torch-fp32")
OPTIONAL_CONTENDERS = ("ours-xla-fp32",)
FAMILIES = ("ours", "keras-hub", "torch")  # each contender's name starts with its family
RATIOS = (("ours-fp32", "keras-hub-fp32"), ("ours-bf16", "keras-hub-bf16"),
          ("ours-fp32", "torch-fp32"), ("ours-bf16", "ours-fp32"),
          ("ours-fp32", "base-fp32"), ("ours-bf16", "base-bf16"))
FULL = dict(layers=4, hidden=256, heads=4, vocab=30522, batch=32, seq=128, predictions=20)
QUICK = dict(layers=2, hidden=128, heads=2, vocab=30522, batch=8, seq=32, predictions=5)


# ====================================================================== workers
def _tf_threads(threads: int) -> None:
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def _ours(w: dict, batch: dict, dtype: str | None, jit_compile: bool = False):
    import keras
    import tensorflow as tf

    from keras_bert import BertEncoder, BertPretrainer
    from keras_bert.optimization.optimizers import create_optimizer
    from keras_bert.pretraining.step import make_pretraining_train_loop

    keras.utils.set_random_seed(0)
    encoder = BertEncoder(vocab_size=w["vocab"], hidden_size=w["hidden"],
                          num_hidden_layers=w["layers"], num_attention_heads=w["heads"],
                          intermediate_size=4 * w["hidden"], dtype=dtype)
    model = BertPretrainer(encoder)
    optimizer = create_optimizer(1e-4, num_train_steps=10_000, num_warmup_steps=100)
    optimizer.build(model.trainable_variables)
    loop = make_pretraining_train_loop(model, optimizer, tf.distribute.get_strategy(),
                                       split_worker_batch=True, jit_compile=jit_compile)
    inputs = {k: batch[k] for k in ("input_word_ids", "input_mask", "input_type_ids",
                                    "masked_lm_positions")}
    labels = {k: batch[k] for k in ("masked_lm_ids", "masked_lm_weights",
                                    "next_sentence_labels")}
    iterator = iter(tf.data.Dataset.from_tensors((inputs, labels)).repeat())
    one = tf.constant(1)

    def step():
        totals, _ = loop(iterator, one)
        return float(totals["mlm_loss_sum"] / totals["mlm_weight_sum"])

    return step, {"keras": keras.__version__, "parameters": model.count_params(),
                  "dtype_policy": encoder.dtype_policy.name, "jit_compile": jit_compile}


def _keras_hub(w: dict, batch: dict, dtype: str | None):
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=w["vocab"], num_layers=w["layers"], num_heads=w["heads"],
        hidden_dim=w["hidden"], intermediate_dim=4 * w["hidden"], max_sequence_length=512,
        dtype=dtype or "float32")
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6,
                                                   global_clipnorm=1.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = {"token_ids": batch["input_word_ids"], "segment_ids": batch["input_type_ids"],
         "padding_mask": batch["input_mask"], "mask_positions": batch["masked_lm_positions"]}

    def step():
        return float(model.train_on_batch(x, batch["masked_lm_ids"],
                                          sample_weight=batch["masked_lm_weights"],
                                          return_dict=True)["loss"])

    return step, {"keras": keras.__version__, "keras_hub": keras_hub.__version__,
                  "parameters": model.count_params(), "heads": "MLM only"}


def _torch(w: dict, batch: dict, threads: int):
    import torch
    import transformers

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    config = transformers.BertConfig(
        vocab_size=w["vocab"], hidden_size=w["hidden"], num_hidden_layers=w["layers"],
        num_attention_heads=w["heads"], intermediate_size=4 * w["hidden"])
    model = transformers.BertForPreTraining(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    labels = torch.full(batch["input_word_ids"].shape, -100, dtype=torch.long)
    for row, (positions, ids, weights) in enumerate(zip(
            batch["masked_lm_positions"], batch["masked_lm_ids"], batch["masked_lm_weights"])):
        used = weights > 0
        labels[row, torch.from_numpy(positions[used]).long()] = torch.from_numpy(ids[used]).long()
    tensors = dict(input_ids=torch.from_numpy(batch["input_word_ids"]).long(),
                   attention_mask=torch.from_numpy(batch["input_mask"]).long(),
                   token_type_ids=torch.from_numpy(batch["input_type_ids"]).long(),
                   labels=labels,
                   next_sentence_label=torch.from_numpy(batch["next_sentence_labels"]).long())

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = model(**tensors).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return float(loss)

    return step, {"torch": torch.__version__, "transformers": transformers.__version__,
                  "attention": model.config._attn_implementation,
                  "parameters": sum(p.numel() for p in model.parameters())}


def worker_main(args: argparse.Namespace) -> None:
    """Builds one contender, warms up, then answers {"steps": n} with {"seconds": [...]}."""
    import numpy as np

    protocol = os.fdopen(os.dup(1), "w")  # frameworks may print to stdout
    os.dup2(2, 1)
    workload = json.loads(args.workload)
    batch = dict(np.load(args.inputs))
    if args.worker.startswith("torch"):
        step, info = _torch(workload, batch, args.threads)
    else:
        _tf_threads(args.threads)
        dtype = "mixed_bfloat16" if args.worker.endswith("bf16") else None
        if args.worker.startswith(("ours", "base")):
            step, info = _ours(workload, batch, dtype, jit_compile="-xla-" in args.worker)
        else:
            step, info = _keras_hub(workload, batch, dtype)
    start = time.perf_counter()
    losses = [step() for _ in range(1 + args.warmup)]
    info.update(warmup_s=round(time.perf_counter() - start, 2), first_losses=losses)
    protocol.write(json.dumps({"info": info}) + "\n")
    protocol.flush()
    for line in sys.stdin:
        seconds = []
        for _ in range(json.loads(line)["steps"]):
            start = time.perf_counter()
            step()
            seconds.append(time.perf_counter() - start)
        protocol.write(json.dumps({"seconds": seconds}) + "\n")
        protocol.flush()


# ====================================================================== orchestrator
def _family(contender: str) -> str:
    """"ours", "keras-hub" or "torch": which interpreter runs the contender (a base-* contender
    is ours-* from the --baseline-root checkout)."""
    if contender.startswith("base"):
        return "ours"
    return next(family for family in FAMILIES if contender.startswith(family))


def write_batch(w: dict, path: str, seed: int = 0) -> None:
    """Random ids with padding, 15% of the real tokens (at most `predictions`) to predict."""
    import numpy as np

    rng = np.random.default_rng(seed)
    batch, seq, predictions = w["batch"], w["seq"], w["predictions"]
    lengths = rng.integers(seq // 2, seq + 1, size=batch)
    positions_grid = np.arange(seq)[None, :]
    mask = (positions_grid < lengths[:, None]).astype("int32")
    ids = rng.integers(1000, w["vocab"], size=(batch, seq)).astype("int32") * mask
    ids[:, 0] = 101
    types = ((positions_grid >= lengths[:, None] // 2) & (mask == 1)).astype("int32")
    positions = np.zeros((batch, predictions), "int32")
    weights = np.zeros((batch, predictions), "float32")
    for row, length in enumerate(lengths):
        count = min(predictions, max(1, round(0.15 * (length - 2))))
        positions[row, :count] = np.sort(rng.choice(np.arange(1, length - 1), count, False))
        weights[row, :count] = 1.0
    labels = np.take_along_axis(ids, positions, 1) * (weights > 0)
    ids[np.arange(batch)[:, None], positions] = np.where(weights > 0, 103, ids[
        np.arange(batch)[:, None], positions])
    np.savez(path, input_word_ids=ids, input_mask=mask, input_type_ids=types,
             masked_lm_positions=positions, masked_lm_ids=labels.astype("int32"),
             masked_lm_weights=weights,
             next_sentence_labels=rng.integers(0, 2, size=batch).astype("int32"))


class Worker:
    """One contender's subprocess."""

    def __init__(self, name: str, python: str, args, workload: dict, inputs: str, logs: str,
                 source_root: str = REPO_ROOT):
        if not os.path.exists(python):
            raise FileNotFoundError(f"{name}: interpreter {python} does not exist; create the "
                                    "venv (python benchmarks/encoder_inference.py --setup) or "
                                    f"pass --{_family(name)}-python")
        self.name, self.log_path = name, os.path.join(logs, f"{name}.log")
        self.log = open(self.log_path, "w")
        command = [python, os.path.abspath(__file__), "--worker", name, "--workload",
                   json.dumps(workload), "--inputs", inputs, "--threads", str(args.threads),
                   "--warmup", str(args.warmup)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            cwd=source_root, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=source_root))
        self.info = self._read()["info"]

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            self.log.flush()
            raise RuntimeError(f"worker {self.name} exited ({self.process.poll()}); end of "
                               f"{self.log_path}:\n{open(self.log_path).read()[-3000:]}")
        return json.loads(line)

    def time(self, steps: int) -> list[float]:
        self.process.stdin.write(json.dumps({"steps": steps}) + "\n")
        self.process.stdin.flush()
        return self._read()["seconds"]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=60)
        self.log.close()


def run(args) -> dict[str, Any]:
    workload = QUICK if args.quick else FULL
    pythons = {"ours": args.ours_python, "keras-hub": args.keras_hub_python,
               "torch": args.torch_python}
    logs = tempfile.mkdtemp(prefix="pretraining_step_")
    inputs = os.path.join(logs, "batch.npz")
    write_batch(workload, inputs)
    workers: dict[str, Worker] = {}
    contenders = list(args.contenders)
    if args.baseline_root:
        contenders += [name.replace("ours", "base") for name in contenders
                       if name.startswith("ours")]
    try:
        for name in contenders:  # one at a time, so each warm-up runs alone
            print(f"starting {name} ...", file=sys.stderr, flush=True)
            root = os.path.abspath(args.baseline_root) if name.startswith("base") else REPO_ROOT
            workers[name] = Worker(name, pythons[_family(name)], args, workload,
                                   inputs, logs, source_root=root)
            print(f"  {json.dumps(workers[name].info)}", file=sys.stderr, flush=True)
        names = list(workers)
        seconds = {name: [] for name in names}
        rounds = {name: [] for name in names}
        for index in range(args.rounds):
            for name in names[index % len(names):] + names[:index % len(names)]:
                values = workers[name].time(args.steps)
                seconds[name].extend(values)
                rounds[name].append(workload["batch"] / statistics.median(values))
            print(f"round {index + 1}/{args.rounds}: " + ", ".join(
                f"{n} {rounds[n][-1]:.1f}" for n in names), file=sys.stderr, flush=True)
    finally:
        for worker in workers.values():
            worker.close()
    contenders = {name: {"median_seq_per_s": workload["batch"] / statistics.median(seconds[name]),
                         "median_step_s": statistics.median(seconds[name]),
                         "round_median_seq_per_s": rounds[name], "info": workers[name].info}
                  for name in names}
    ratios = [{"ratio": f"{a} / {b}", "value": contenders[a]["median_seq_per_s"]
               / contenders[b]["median_seq_per_s"]}
              for a, b in RATIOS if a in contenders and b in contenders]
    return {"workload": workload, "threads": args.threads, "rounds": args.rounds,
            "steps_per_round": args.steps, "contenders": contenders, "ratios": ratios}


def format_table(result: dict[str, Any]) -> str:
    lines = ["| contender | median seq/s | median step (s) | min-max of round medians |",
             "|---|---|---|---|"]
    for name, c in result["contenders"].items():
        r = c["round_median_seq_per_s"]
        lines.append(f"| {name} | {c['median_seq_per_s']:.1f} | {c['median_step_s']:.3f} | "
                     f"{min(r):.1f}-{max(r):.1f} |")
    lines += ["", "| ratio | value |", "|---|---|"]
    lines += [f"| {r['ratio']} | {r['value']:.2f}x |" for r in result["ratios"]]
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="L-2_H-128_A-2, batch 8, seq 32")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per contender per round")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps after the first")
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads (inter-op: 1)")
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS),
                        choices=CONTENDERS + OPTIONAL_CONTENDERS)
    parser.add_argument("--baseline-root", metavar="DIR",
                        help="another checkout (e.g. a git worktree of an earlier commit) whose "
                             "keras_bert runs as base-* beside each ours-* contender")
    parser.add_argument("--ours-python", default=sys.executable)
    parser.add_argument("--keras-hub-python",
                        default=os.path.join(VENVS_DIR, "keras-hub", "bin", "python"))
    parser.add_argument("--torch-python", default="/work/venv-ref/bin/python")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON ('-': stdout)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    parser.add_argument("--inputs", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker_main(args)
        return 0
    result = run(args)
    print(format_table(result))
    if args.json:
        text = json.dumps(result, indent=2)
        if args.json == "-":
            print(text)
        else:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            temp = f"{args.json}.tmp"
            with open(temp, "w") as f:
                f.write(text)
            os.replace(temp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
