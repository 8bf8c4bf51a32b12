"""`keras-bert finetune` rerun on its output_dir: SIGKILLed twice at random points, it resumes
and ends with the uninterrupted run's weights and eval_results.json; a finished run is left as it
is; other settings are refused; --overwrite starts afresh."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.cli.test_finetune import write_jsonl
from tests.tasks.tiny_checkpoint import WORDS, tiny_checkpoint

pytestmark = pytest.mark.slow  # a dozen `keras-bert finetune` processes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EPOCHS = 5
TIMEOUT_S = 300


def rows(count, seed):
    """Texts of 2 to 30 words (so batches fall in several buckets) labelled by their words."""
    rng = random.Random(seed)
    result = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(2, 30))]
        label = "pos" if sum(w in ("good", "great", "nice") for w in words) >= sum(
            w in ("bad", "awful", "terrible") for w in words) else "neg"
        result.append({"text": " ".join(words), "label": label})
    return result


@pytest.fixture(scope="module")
def run_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("finetune_resume")
    return {"checkpoint": tiny_checkpoint(str(directory / "uncased_tiny"), "google"),
            "train": write_jsonl(directory / "train.jsonl", rows(72, 0)),
            "dev": write_jsonl(directory / "dev.jsonl", rows(24, 1))}


def command(files, output_dir, *extra):
    # The tiny checkpoint keeps BERT's dropout (0.1): a resumed run must restore its RNG state.
    return [sys.executable, "-m", "keras_bert.cli", "finetune", "--task", "classification",
            "--init_checkpoint", files["checkpoint"], "--train_file", files["train"],
            "--dev_file", files["dev"], "--output_dir", str(output_dir),
            "--epochs", str(EPOCHS), "--batch_size", "8", "--max_seq_length", "32",
            "--learning_rate", "1e-3", "--seed", "3", "--no_progress", *extra]


def start(argv, log_path):
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.Popen(argv, cwd=REPO, env=env, stdout=open(log_path, "w"),
                            stderr=subprocess.STDOUT)


def finish(process, log_path, code=0):
    assert process.wait(timeout=TIMEOUT_S) == code, open(log_path).read()[-3000:]
    return open(log_path).read()


def epochs_saved(output_dir):
    """The epoch of the latest resume checkpoint (0: none)."""
    index = output_dir / "checkpoints" / "checkpoint"
    if not index.exists():
        return 0
    first = index.read_text().splitlines()[0]  # model_checkpoint_path: "ckpt-<epoch>"
    return int(first.rsplit("-", 1)[1].strip('"'))


def kill_after_epoch(argv, output_dir, epoch, delay_s, log_path):
    """Runs ``argv`` and SIGKILLs it ``delay_s`` after its checkpoint of ``epoch`` appears."""
    process = start(argv, log_path)
    deadline = time.monotonic() + TIMEOUT_S
    while epochs_saved(output_dir) < epoch:
        assert process.poll() is None and time.monotonic() < deadline, \
            open(log_path).read()[-3000:]
        time.sleep(0.02)
    # A random point of the next epoch: no wait is needed for correctness, any point must resume
    # to the same result. Until it comes, the run must not end.
    kill_at = time.monotonic() + delay_s
    while time.monotonic() < kill_at:
        assert process.poll() is None, "the run ended before it could be killed:\n" + open(
            log_path).read()[-3000:]
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the run ended before it could be killed"
    assert not (output_dir / "eval_results.json").exists()
    return open(log_path).read()


def weights(output_dir):
    from keras_bert import BertClassifier
    return BertClassifier.from_pretrained(str(output_dir / "best_model")).get_weights()


def without_paths(results, output_dir):
    text = json.dumps(results).replace(str(output_dir), "OUT")
    return json.loads(text)


def test_killed_twice_it_resumes_to_the_uninterrupted_result(run_files, tmp_path):
    rng = random.Random()
    delays = [rng.uniform(0.0, 0.6) for _ in range(2)]
    print(f"SIGKILL delays after a checkpoint: {delays}")  # shown when the test fails
    whole_dir, killed_dir = tmp_path / "whole", tmp_path / "killed"
    whole = start(command(run_files, whole_dir), tmp_path / "whole.log")

    argv = command(run_files, killed_dir)
    kill_after_epoch(argv, killed_dir, 1, delays[0], tmp_path / "killed1.log")
    # Other settings cannot resume this run.
    other = finish(start(command(run_files, killed_dir, "--learning_rate", "2e-3"),
                         tmp_path / "other.log"), tmp_path / "other.log", code=2)
    assert "holds an interrupted run with other settings (learning_rate: 0.001 -> 0.002)" \
        in other
    first_saved = epochs_saved(killed_dir)
    log = kill_after_epoch(argv, killed_dir, first_saved + 1, delays[1],
                           tmp_path / "killed2.log")
    assert f"resuming the run in {killed_dir} after epoch {first_saved} of {EPOCHS}" in log
    second_saved = epochs_saved(killed_dir)
    log = finish(start(argv, tmp_path / "resumed.log"), tmp_path / "resumed.log")
    assert f"after epoch {second_saved} of {EPOCHS}" in log
    finish(whole, tmp_path / "whole.log")

    want = json.loads((whole_dir / "eval_results.json").read_text())
    got = json.loads((killed_dir / "eval_results.json").read_text())
    assert [e["epoch"] for e in got["epochs"]] == [1, 2, 3, 4, 5]
    assert without_paths(got, killed_dir) == without_paths(want, whole_dir)
    for a, b in zip(weights(whole_dir), weights(killed_dir)):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)
    assert sorted(os.listdir(killed_dir)) == ["best_model", "dev_predictions.jsonl",
                                              "eval_results.json", "training_curves.png"]
    predicted = [[json.loads(line) for line in (d / "dev_predictions.jsonl").read_text()
                  .splitlines()] for d in (killed_dir, whole_dir)]
    assert [r["label"] for r in predicted[0]] == [r["label"] for r in predicted[1]]

    # Rerun once finished: it says so, prints the results and writes nothing.
    before = {p: p.stat().st_mtime_ns for p in killed_dir.rglob("*")}
    log = finish(start(argv, tmp_path / "again.log"), tmp_path / "again.log")
    assert f"{killed_dir} holds a finished run ({EPOCHS} epochs, best epoch " \
        f"{got['best_epoch']}); nothing to do: pass --overwrite to start afresh" in log
    assert json.loads(log[log.rindex("\n{\n"):])["best"] == got["best"]
    assert {p: p.stat().st_mtime_ns for p in killed_dir.rglob("*")} == before

    # --overwrite starts afresh, here with one epoch.
    finish(start(command(run_files, killed_dir, "--overwrite", "--epochs", "1"),
                 tmp_path / "overwrite.log"), tmp_path / "overwrite.log")
    results = json.loads((killed_dir / "eval_results.json").read_text())
    assert [e["epoch"] for e in results["epochs"]] == [1]
