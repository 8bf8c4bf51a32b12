"""Small helpers shared by the tests (import as `from tests.helpers import ...`)."""

import json
import os
import subprocess
import sys
import time
from typing import Callable

import numpy as np


def random_inputs(batch=3, seq=12, vocab_size=97, seed=0, pad_rows=True):
    """int32 encoder inputs with [CLS]=2 first, some padded rows and a second segment."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, size=(batch, seq)).astype(np.int32)
    ids[:, 0] = 2
    mask = np.ones_like(ids)
    types = np.zeros_like(ids)
    for row in range(batch):
        length = seq - (row * 3 if pad_rows else 0)
        length = max(length, 3)
        mask[row, length:] = 0
        ids[row, length:] = 0
        types[row, length // 2:length] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def wait_until(condition: Callable[[], object], timeout_s: float = 60.0,
               message: str | Callable[[], str] = "the condition never held"):
    """Polls ``condition()`` until it is true and returns its value; fails the test with
    ``message`` (a string, or a callable for one that reports the state at the deadline) when
    ``timeout_s`` passes first. For waits on threads and processes instead of a fixed sleep:
    the deadline is generous, and a passing test waits only as long as the condition takes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"after {timeout_s:g} s: {text}")
        time.sleep(0.01)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MAIN_IN_FRESH_PROCESS = (
    "import contextlib, io, json, logging, sys\n"
    "from keras_bert.cli import main\n"
    "results = {}\n"
    "for name, argv in json.loads(sys.argv[1]).items():\n"
    # main's logging.basicConfig binds its handler to the stderr of the first case: drop it,
    # so that each case's log lines land in that case's stderr.
    "    logging.root.handlers.clear()\n"
    "    err = io.StringIO()\n"
    "    with contextlib.redirect_stderr(err):\n"
    "        results[name] = [main(argv), err.getvalue()]\n"
    "print(json.dumps({'results': results, 'tf': 'tensorflow' in sys.modules}))\n")


def main_in_fresh_process(cases: dict[str, list[str]], timeout_s: float = 300
                          ) -> tuple[dict[str, tuple[int, str]], bool]:
    """Runs `keras-bert` (``cli.main``) on each of ``cases`` ({name: argv}) in one fresh
    interpreter; returns ({name: (exit code, stderr)}, whether TensorFlow got loaded)."""
    run = subprocess.run([sys.executable, "-c", _MAIN_IN_FRESH_PROCESS, json.dumps(cases)],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True,
                         text=True, timeout=timeout_s)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.splitlines()[-1])
    return {name: tuple(result) for name, result in report["results"].items()}, report["tf"]


def cli_before_tensorflow(argv: list[str]) -> tuple[int, str, bool]:
    """`keras-bert ARGV` in a fresh process: (exit code, stderr, whether TensorFlow was
    imported), so that a test sees a bad input refused by the command's check, before
    TensorFlow loads."""
    results, tensorflow = main_in_fresh_process({"run": argv})
    code, stderr = results["run"]
    return code, stderr, tensorflow
