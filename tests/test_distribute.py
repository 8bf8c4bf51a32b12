"""Choosing the strategy: each case of get_strategy() with the machine or environment set up here.

Cases that must configure TensorFlow before it starts (logical CPU devices, TF_CONFIG) run in
subprocesses with timeouts; TPUs are tried against addresses where nobody listens.
"""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from keras_bert import distribute

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT_S = 180
ENVIRONMENT = ("TF_CONFIG", "TPU_NAME", "COLAB_TPU_ADDR")

DESCRIBE = """
import json, os, sys
from keras_bert.distribute import get_strategy

def describe(strategy):
    try:
        devices = [d.split("device:")[-1] for d in strategy.extended.worker_devices]
    except RuntimeError:  # the default strategy has no device list
        devices = []
    return [type(strategy).__name__, strategy.num_replicas_in_sync, devices]
"""

# Three logical CPUs: auto -> MirroredStrategy over them; forced names still win; and with
# TPU_NAME set, auto tries the TPU first (the real resolver fails: no such TPU exists here).
SINGLE_MACHINE = DESCRIBE + """
from keras_bert.distribute import use_logical_cpu_devices
use_logical_cpu_devices(3)
result = {str(name): describe(get_strategy(name)) for name in (None, "one_device", "default")}
os.environ["TPU_NAME"] = sys.argv[1]
try:
    get_strategy()
except RuntimeError as e:
    result["tpu_error"] = str(e)
print(json.dumps(result))
"""

MULTI_WORKER = DESCRIBE + """
strategy = get_strategy()
print(json.dumps(describe(strategy) + [strategy.cluster_resolver.task_id]))
"""


def _start(script, *args, env=None):
    environment = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT}
    environment.update(PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(process):
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        pytest.fail(f"no strategy within {TIMEOUT_S} s:\n{stderr[-3000:]}")
    assert process.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture
def clean_environment(monkeypatch):
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_auto_is_the_default_strategy_on_a_plain_cpu(clean_environment):
    assert len(tf.config.list_logical_devices("CPU")) == 1
    assert not tf.config.list_physical_devices("GPU")
    for name in (None, "auto"):
        assert distribute.get_strategy(name) is tf.distribute.get_strategy()  # the default
    forced = distribute.get_strategy("one_device")
    assert isinstance(forced, tf.distribute.OneDeviceStrategy)
    assert forced.extended.worker_devices == ("/job:localhost/replica:0/task:0/device:CPU:0",)
    assert isinstance(distribute.get_strategy("mirrored"), tf.distribute.MirroredStrategy)


def test_auto_mirrors_over_logical_cpus_unless_forced_and_tries_a_tpu_first(free_ports):
    port = free_ports(1)[0]
    result = _result(_start(SINGLE_MACHINE, f"127.0.0.1:{port}"))
    assert result["None"] == ["MirroredStrategy", 3, ["CPU:0", "CPU:1", "CPU:2"]]
    assert result["one_device"] == ["OneDeviceStrategy", 1, ["CPU:0"]]
    assert result["default"] == ["_DefaultDistributionStrategy", 1, []]
    # TPU_NAME holds a name, not an address, so TensorFlow's resolver looks it up (and fails).
    assert result["tpu_error"].startswith(
        f"cannot reach the TPU '127.0.0.1:{port}' (from TPU_NAME): ")
    assert "give its name or grpc://host:port with --tpu" in result["tpu_error"]


@pytest.mark.slow
def test_auto_is_multi_worker_mirrored_when_tf_config_lists_two_workers(free_ports):
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    processes = [_start(MULTI_WORKER, env={"TF_CONFIG": json.dumps({
        "cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})})
        for index in range(2)]
    # Creating the strategy waits until both workers are up (a first collective), hence two.
    results = [_result(p) for p in processes]
    # CollectiveAllReduceStrategy is the class of tf.distribute.MultiWorkerMirroredStrategy.
    assert results == [["CollectiveAllReduceStrategy", 2, ["CPU:0"], 0],
                       ["CollectiveAllReduceStrategy", 2, ["CPU:0"], 1]]


def test_auto_tries_the_tpu_at_the_address_in_the_environment(clean_environment, free_ports):
    # A real TPUClusterResolver given a grpc:// address connects and waits for the TPU forever,
    # so this records what get_strategy asks the resolver for instead (no TPU exists here).
    requested = []

    class RecordingResolver:
        def __init__(self, tpu=None, **kwargs):
            requested.append(tpu)
            raise ConnectionRefusedError(f"nobody listens at {tpu}")

    clean_environment.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver",
                              RecordingResolver)
    colab_port, name_port = free_ports(2)
    clean_environment.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:2"]}}))
    clean_environment.setenv("COLAB_TPU_ADDR", f"127.0.0.1:{colab_port}")
    with pytest.raises(RuntimeError, match=(
            f"cannot reach the TPU 'grpc://127.0.0.1:{colab_port}' \\(from COLAB_TPU_ADDR\\): "
            "ConnectionRefusedError")):
        distribute.get_strategy()
    clean_environment.setenv("TPU_NAME", f"grpc://127.0.0.1:{name_port}")
    with pytest.raises(RuntimeError, match="from TPU_NAME"):
        distribute.get_strategy("auto")
    with pytest.raises(RuntimeError, match=r"from the tpu argument \(--tpu\)"):
        distribute.get_strategy(None, tpu="my-tpu")
    assert requested == [f"grpc://127.0.0.1:{colab_port}", f"grpc://127.0.0.1:{name_port}",
                         "my-tpu"]


def test_get_strategy_names_and_tf_config(monkeypatch):
    assert distribute.get_strategy("default").num_replicas_in_sync == 1
    with pytest.raises(ValueError, match="unknown strategy 'gpu'"):
        distribute.get_strategy("gpu")
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1", "b:2"], "chief": ["c:3"]}}')
    assert distribute._cluster_size_from_tf_config() == 3
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        distribute._cluster_size_from_tf_config()
