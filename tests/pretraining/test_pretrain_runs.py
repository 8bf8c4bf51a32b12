"""`keras-bert pretrain` in subprocesses: SIGKILL and resume, two replicas, two workers.

Each run is a tiny model for a few steps with --deterministic, so runs can be compared exactly.
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.slow  # minutes of real training, notebooks or subprocess workers


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _command(files, output_dir, *extra, dropout=0.0):
    return [sys.executable, "-m", "keras_bert.cli", "pretrain",
            "--input_file", files["pattern"], "--output_dir", str(output_dir),
            "--bert_config_file", files["config"][dropout], "--vocab_file", files["vocab"],
            "--max_seq_length", "32", "--max_predictions_per_seq", "5",
            "--train_batch_size", "8", "--num_warmup_steps", "2", "--learning_rate", "1e-3",
            "--deterministic", "--no_progress", *extra]


def _start(command, log_path, env_extra=None):
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2", **(env_extra or {}))
    log = open(log_path, "w")
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def _finish(process, log_path, timeout_s=240):
    assert process.wait(timeout=timeout_s) == 0, open(log_path).read()[-3000:]
    return open(log_path).read()


def _result(log_text):
    """The run's result: the last JSON line it printed. A multi-worker run's stderr (in the
    same log) can end after it with TensorFlow's coordination service logging, as the process
    exits, that its peer has gone ("failed to connect to all addresses"): seen once on a busy
    machine, with both workers' exit status 0."""
    lines = [line for line in log_text.splitlines() if line.startswith("{")]
    assert lines, log_text[-3000:]
    return json.loads(lines[-1])


def _export(output_dir):
    reader = tf.train.load_checkpoint(str(output_dir / "export" / "google" / "bert_model.ckpt"))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_a_killed_run_resumes_to_exactly_the_uninterrupted_result(pretraining_files, tmp_path):
    # Dropout and dynamic masking on: the resumed run must restore the RNG and iterator state.
    args = ["--num_train_steps", "120", "--steps_per_loop", "5", "--save_checkpoints_steps",
            "10", "--keep_checkpoint_max", "3", "--dynamic_masking", "--strategy", "default"]
    whole = _start(_command(pretraining_files, tmp_path / "whole", *args, dropout=0.1),
                   tmp_path / "whole.log")
    killed_dir = tmp_path / "killed"
    command = _command(pretraining_files, killed_dir, *args, dropout=0.1)
    killed = _start(command, tmp_path / "killed.log")
    deadline = time.monotonic() + 240
    while not (killed_dir / "checkpoints" / "checkpoint").exists():
        assert killed.poll() is None and time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait() == -signal.SIGKILL
    assert not (killed_dir / "export").exists()  # it really died mid-run

    resumed_log = _finish(_start(command, tmp_path / "resumed.log"), tmp_path / "resumed.log")
    resumed_at = int(resumed_log.split("resumed from ")[1].split("ckpt-")[1].split()[0])
    assert 10 <= resumed_at < 120
    _finish(whole, tmp_path / "whole.log")
    want, got = _export(tmp_path / "whole"), _export(killed_dir)
    assert sorted(want) == sorted(got) and len(want) == 46
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_two_replicas_match_one_device_with_the_same_global_batch(pretraining_files, tmp_path):
    args = ["--num_train_steps", "6", "--steps_per_loop", "3", "--save_checkpoints_steps", "6"]
    one = _start(_command(pretraining_files, tmp_path / "one", *args, "--strategy", "default"),
                 tmp_path / "one.log")
    two = _start(_command(pretraining_files, tmp_path / "two", *args, "--strategy", "auto",
                          "--num_cpu_devices", "2"), tmp_path / "two.log")
    one_log = _finish(one, tmp_path / "one.log")
    two_log = _finish(two, tmp_path / "two.log")
    assert "using the mirrored strategy (MirroredStrategy) with 2 replica(s)" in two_log
    assert _result(two_log)["metrics"]["loss"] == pytest.approx(
        _result(one_log)["metrics"]["loss"], rel=1e-6)
    want, got = _export(tmp_path / "one"), _export(tmp_path / "two")
    # Six Adam steps at lr ~1e-3 move every weight by ~1e-3; the runs agree to rounding.
    for name in want:
        np.testing.assert_allclose(got[name], want[name], atol=1e-6, err_msg=name)


def test_two_workers_train_in_sync_with_multi_worker_mirrored(pretraining_files, tmp_path,
                                                             free_ports):
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    args = ["--num_train_steps", "6", "--steps_per_loop", "3", "--save_checkpoints_steps", "3",
            "--strategy", "auto"]
    processes = []
    for index in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers},
                                "task": {"type": "worker", "index": index}})
        processes.append(_start(_command(pretraining_files, tmp_path / "run", *args),
                                tmp_path / f"worker{index}.log", {"TF_CONFIG": tf_config}))
    logs = [_finish(p, tmp_path / f"worker{i}.log") for i, p in enumerate(processes)]
    for log in logs:
        assert "using the multi_worker_mirrored strategy" in log
    results = [_result(log) for log in logs]
    assert results[0]["metrics"]["loss"] == results[1]["metrics"]["loss"]
    assert results[0]["export_dir"] and results[1]["export_dir"] is None  # the chief exports
    checkpoints = tmp_path / "run" / "checkpoints"
    chief, other = (_state(checkpoints / "ckpt-6"), _state(checkpoints / "worker_1" / "ckpt-6"))
    assert len(chief) > 100 and sorted(chief) == sorted(other)  # model, optimizer slots, step
    for name in chief:
        np.testing.assert_array_equal(other[name], chief[name], err_msg=name)
    earlier = _state(checkpoints / "ckpt-3")
    assert sum(not np.array_equal(earlier[n], chief[n]) for n in chief) > 100


def _state(checkpoint_prefix):
    """Every saved variable but the (per-worker) input iterator."""
    reader = tf.train.load_checkpoint(str(checkpoint_prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if not name.startswith(("iterator/", "_CHECKPOINTABLE_OBJECT_GRAPH"))}
