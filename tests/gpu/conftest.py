"""The GPU tests' device: TensorFlow's GPU when it sees one. Without one every test here is
collected and skipped for one reason (raised here, so ``-ra`` reports it as one line), except
in benchmarks/gpu_check.sh's dry run (GPU_CHECK_DRY=1), which runs them on the CPU so that CI
proves their plumbing."""

import functools
import os

import pytest

DRY_RUN_VARIABLE = "GPU_CHECK_DRY"
# The tests start processes that use the GPU beside this one (the keras-bert CLI): TensorFlow
# takes nearly all of a GPU's memory by default, so take it as needed instead. Read when
# TensorFlow first creates its devices, after this import.
os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")


@functools.cache
def _device() -> str | None:
    import tensorflow as tf
    if tf.config.list_physical_devices("GPU"):
        return "GPU"
    return "CPU" if os.environ.get(DRY_RUN_VARIABLE) == "1" else None


def pytest_runtest_setup(item):
    if _device() is None:
        pytest.skip("no GPU: tf.config.list_physical_devices('GPU') is empty "
                    "(benchmarks/gpu_check.sh --dry-run runs these on the CPU)")


@pytest.fixture(scope="session")
def device() -> str:
    """"GPU" (what the tests are for) or, in the dry run, "CPU"."""
    return _device()
