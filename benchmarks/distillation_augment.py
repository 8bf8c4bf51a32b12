"""Distilled students with augmented copies of the training texts (issue 38): where a task has
no unlabelled texts to give ``distill``, ``augment=N`` adds N changed copies of each training
text (words dropped, n-grams kept: ``distillation.augmentation.augmented_texts``), labelled by
the teacher.

Takes the work directory of benchmarks/distillation.py (one dataset and seed: its data, its
fine-tuned teacher saved as ``models-DATASET-SEED/teacher``, and its students' test predictions
in ``trained.json``), distils each student again with ``keras_bert.distill(teacher, texts,
labels, num_layers=L, augment=N, seed=SEED)`` at the learning rate that run used, and prints the
test accuracy beside that run's teacher, distilled and labels-only students. Each student trains
in its own process on one intra-op thread (``--parallel`` at once); the students' architecture is
the one distillation.py timed, so its int8 speed there holds.

Usage (from the repository root, after benchmarks/distillation.py with --workdir DIR):
    python benchmarks/distillation_augment.py --workdir DIR --dataset trec6 --augment 2 \\
        --learning_rate 1e-4
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time

import numpy as np

LAYERS = (3, 2)


def load_job(job: dict) -> tuple[dict, object, dict]:
    """In a worker, on one intra-op thread: (the work directory's data, its teacher, distill's
    learning-rate argument), the random state seeded as distillation.py before each student."""
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras
    import keras_bert
    with open(job["data"], encoding="utf-8") as f:
        data = json.load(f)
    teacher = keras_bert.BertClassifier.from_pretrained(job["teacher"])
    keras.utils.set_random_seed(job["seed"])
    rate = {} if job["learning_rate"] is None else {"learning_rate": job["learning_rate"]}
    return data, teacher, rate


def worker(job: dict) -> dict:
    import keras_bert
    data, teacher, rate = load_job(job)
    names = data["label_names"]
    wall, cpu = time.perf_counter(), time.process_time()
    student = keras_bert.distill(teacher, data["train_texts"],
                                 [names[i] for i in data["train_labels"]],
                                 num_layers=job["layers"], augment=job["augment"],
                                 seed=job["seed"], verbose=2, **rate)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    predictions = student.predict(data["test_texts"], batch_size=64, verbose=0).argmax(-1)
    return {"accuracy": float(np.mean(predictions == np.array(data["test_labels"]))),
            "train_seconds": wall, "train_cpu_seconds": cpu,
            "texts": len(data["train_texts"]) * (1 + job["augment"])}


def run(job: dict, workdir: str, stem: str | None = None, script: str = __file__) -> dict:
    """``script --worker JOB`` in its own process (JOB saved as ``workdir/stem.job.json``, its
    log ``workdir/stem.log``): the worker's last line of output, read as JSON."""
    stem = stem or f"augment-{job['dataset']}-{job['seed']}-{job['augment']}-{job['layers']}"
    path = os.path.join(workdir, f"{stem}.job.json")
    with open(path, "w") as f:
        json.dump(job, f)
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2",
                   "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    with open(os.path.join(workdir, f"{stem}.log"), "w") as log:
        done = subprocess.run([sys.executable, os.path.abspath(script), "--worker", path],
                              stdout=subprocess.PIPE, stderr=log, text=True, env=environment)
    if done.returncode:
        raise SystemExit(f"{stem} failed ({done.returncode}): see {workdir}/{stem}.log")
    return json.loads(done.stdout.strip().splitlines()[-1])


def workdir_parser(doc: str, augment: int) -> argparse.ArgumentParser:
    """The arguments of a script that re-distils a distillation.py work directory's students."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--workdir", help="benchmarks/distillation.py's work directory")
    parser.add_argument("--dataset", default="trec6")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--augment", type=int, default=augment,
                        help="copies of each training text")
    parser.add_argument("--learning_rate", type=float,
                        help="distill's rate, as that run's --distill_learning_rate (default: "
                             "distill's own)")
    parser.add_argument("--layers", type=int, nargs="+", default=list(LAYERS))
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser


def earlier_run(parser: argparse.ArgumentParser, args) -> tuple[str, str, np.ndarray, dict]:
    """(data path, teacher path, test labels, that run's trained.json entry) of the
    distillation.py work directory ``args.workdir`` for ``args.dataset`` and ``args.seed``; a
    parser error where it lacks them."""
    if not args.workdir:
        parser.error("--workdir is required: benchmarks/distillation.py's work directory")
    data_path = os.path.join(args.workdir, f"{args.dataset}.data.json")
    teacher = os.path.join(args.workdir, f"models-{args.dataset}-{args.seed}", "teacher")
    trained_path = os.path.join(args.workdir, "trained.json")
    for path in (data_path, teacher, trained_path):
        if not os.path.exists(path):
            parser.error(f"{path} does not exist: run benchmarks/distillation.py --datasets "
                         f"{args.dataset} --seeds {args.seed} --workdir {args.workdir} first")
    with open(data_path, encoding="utf-8") as f:
        labels = np.array(json.load(f)["test_labels"])
    with open(trained_path) as f:
        earlier = json.load(f)[args.dataset][str(args.seed)]
    return data_path, teacher, labels, earlier


def main() -> None:
    parser = workdir_parser(__doc__, augment=2)
    args = parser.parse_args()
    if args.worker:
        with open(args.worker) as f:
            print(json.dumps(worker(json.load(f))), flush=True)
        return
    data_path, teacher, labels, earlier = earlier_run(parser, args)
    jobs = [{"data": data_path, "teacher": teacher, "seed": args.seed, "layers": layers,
             "augment": args.augment, "learning_rate": args.learning_rate,
             "dataset": args.dataset} for layers in args.layers]
    with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
        results = dict(zip(args.layers, pool.map(lambda job: run(job, args.workdir), jobs)))

    def score(name):
        return float(np.mean(np.array(earlier["predictions"][name]) == labels))
    teacher_accuracy = score("teacher")
    print(f"{args.dataset}, seed {args.seed}, augment={args.augment}: teacher "
          f"{100 * teacher_accuracy:.1f}%")
    print("| student | distilled + augment % (of the teacher's) | train CPU s, texts | "
          "distilled % | labels-only % |")
    print("|---|---:|---|---:|---:|")
    for layers, result in results.items():
        print(f"| {layers} layers | {100 * result['accuracy']:.1f} "
              f"({100 * result['accuracy'] / teacher_accuracy:.1f}%) | "
              f"{result['train_cpu_seconds']:.0f}, {result['texts']:,} | "
              f"{100 * score(f'distilled-{layers}'):.1f} | "
              f"{100 * score(f'labels-only-{layers}'):.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": {k: v for k, v in vars(args).items() if k != "worker"},
                       "teacher_accuracy": teacher_accuracy, "students": results}, f, indent=1)


if __name__ == "__main__":
    main()
