"""Choosing the tf.distribute strategy: TPU, several workers, several GPUs, one GPU or the CPU.

``get_strategy()`` picks the one that fits the machine and ``get_strategy(name)`` forces one; both
pretraining and fine-tuning build their models under ``strategy.scope()``. TensorFlow loads when
a function runs, so that the command line lists STRATEGIES without it.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tensorflow as tf

logger = logging.getLogger(__name__)

STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker_mirrored", "tpu")


def _cluster_size_from_tf_config() -> int:
    """Number of workers (incl. chief) that TF_CONFIG describes; 0 when TF_CONFIG is unset."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return 0
    try:
        cluster = json.loads(raw).get("cluster", {})
    except json.JSONDecodeError as e:
        raise ValueError(f"TF_CONFIG is not valid JSON ({e}); see "
                         "https://www.tensorflow.org/guide/distributed_training") from None
    return len(cluster.get("worker", ())) + len(cluster.get("chief", ()))


def _tpu_address(tpu: str | None) -> tuple[str, str]:
    """(what to give TPUClusterResolver, where it came from): ``tpu``, TPU_NAME, COLAB_TPU_ADDR.

    TPU_NAME holds a TPU name or grpc:// address, as TensorFlow reads it; COLAB_TPU_ADDR holds
    the host:port of a Colab TPU, which TensorFlow does not read, so it becomes grpc://host:port.
    "" lets the resolver look for the TPU itself.
    """
    if tpu:
        return tpu, "the tpu argument (--tpu)"
    if os.environ.get("TPU_NAME"):
        return os.environ["TPU_NAME"], "TPU_NAME"
    if os.environ.get("COLAB_TPU_ADDR"):
        return f"grpc://{os.environ['COLAB_TPU_ADDR']}", "COLAB_TPU_ADDR"
    return "", "the resolver's defaults"


def _tpu_strategy(tpu: str | None) -> tf.distribute.Strategy:
    import tensorflow as tf
    address, source = _tpu_address(tpu)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=address)
        if address != "local":
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except Exception as e:  # the resolver's errors do not say which TPU or what to do
        raise RuntimeError(
            f"cannot reach the TPU {address!r} (from {source}): {type(e).__name__}: {e}; give "
            "its name or grpc://host:port with --tpu ('local' on a TPU VM), or choose another "
            "--strategy") from e
    return tf.distribute.TPUStrategy(resolver)


def get_strategy(name: str | None = None, tpu: str | None = None) -> tf.distribute.Strategy:
    """The distribution strategy named ``name``, or the one that fits this machine.

    With ``name`` None or "auto": TPUStrategy if ``tpu`` is given or TPU_NAME / COLAB_TPU_ADDR is
    set; MultiWorkerMirroredStrategy if TF_CONFIG lists more than one worker; MirroredStrategy
    over all GPUs if there are several (or over the logical CPU devices, if
    ``use_logical_cpu_devices`` made several); OneDeviceStrategy on the GPU if there is one;
    else the default strategy (the CPU).

    MultiWorkerMirroredStrategy and TPUStrategy must be created before any other TensorFlow
    work in the process, so call this first.

    Args:
        name: one of STRATEGIES; "default" is TensorFlow's no-op strategy on the current device.
        tpu: TPU name or grpc:// address ("local" on a TPU VM); without it TPU_NAME, then
            grpc://$COLAB_TPU_ADDR, and "" (the resolver finds the TPU) for a forced "tpu".

    Returns:
        The strategy; ``strategy.num_replicas_in_sync`` is the data-parallel width.

    Raises:
        ValueError: an unknown name, or TF_CONFIG that is not JSON.
        RuntimeError: the TPU cannot be resolved or initialized (naming it and its source).

    Example:
    >>> strategy = get_strategy("default")
    >>> strategy.num_replicas_in_sync
    1
    """
    import tensorflow as tf
    name = name or "auto"
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy {name!r}; expected one of {', '.join(STRATEGIES)}")
    if name == "auto":
        # Only physical-device queries here: they leave TensorFlow uninitialized, which
        # MultiWorkerMirroredStrategy and TPUStrategy need.
        gpus = tf.config.list_physical_devices("GPU")
        cpu = tf.config.list_physical_devices("CPU")[0]
        num_cpus = len(tf.config.get_logical_device_configuration(cpu) or [cpu])
        if tpu or os.environ.get("TPU_NAME") or os.environ.get("COLAB_TPU_ADDR"):
            name = "tpu"
        elif _cluster_size_from_tf_config() > 1:
            name = "multi_worker_mirrored"
        elif len(gpus) > 1 or (not gpus and num_cpus > 1):
            name = "mirrored"
        elif gpus:
            name = "one_device"
        else:
            name = "default"
    if name == "tpu":
        strategy = _tpu_strategy(tpu)
    elif name == "multi_worker_mirrored":
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    elif name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
        strategy = tf.distribute.MirroredStrategy(devices)
    elif name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        strategy = tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    else:
        strategy = tf.distribute.get_strategy()
    logger.info("using the %s strategy (%s) with %d replica(s)", name, type(strategy).__name__,
                strategy.num_replicas_in_sync)
    return strategy


def use_logical_cpu_devices(num_devices: int) -> None:
    """Splits the CPU into ``num_devices`` logical devices, to try data parallelism without GPUs.

    Must run before TensorFlow initializes its devices (before any op or strategy is created);
    ``get_strategy()`` then returns a MirroredStrategy over them.

    Raises:
        RuntimeError: TensorFlow's devices are already initialized.
    """
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)
    except RuntimeError as e:
        raise RuntimeError(f"cannot split the CPU into {num_devices} devices: TensorFlow is "
                           f"already initialized ({e}); call use_logical_cpu_devices first") from e


def worker_role(strategy: tf.distribute.Strategy) -> tuple[bool, int]:
    """(whether this process is the chief, which writes the shared outputs; its worker index).

    The chief is the "chief" task of TF_CONFIG, or worker 0 when there is none; without a
    cluster (one machine, TPUs) this process is the chief, worker 0.
    """
    import tensorflow as tf
    resolver = getattr(strategy, "cluster_resolver", None)
    if (resolver is None or not resolver.task_type
            or isinstance(strategy, tf.distribute.TPUStrategy)):
        return True, 0
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    is_chief = resolver.task_type == "chief" or (not has_chief and resolver.task_id == 0)
    return is_chief, (resolver.task_id or 0) + (1 if has_chief and not is_chief else 0)


def num_local_replicas(strategy: tf.distribute.Strategy) -> int:
    """Replicas on this worker (the devices it drives); 1 for the default strategy."""
    try:
        return len(strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy has no device list
        return 1
