"""Every test of the suite finds its fixtures. A test moved away from the conftest.py that defines
one fails only when it runs, and a slow test runs only in CI's whole run (stop 45's CI failed on
`pretraining_files` after tests/pretraining/ took the pretraining tests). pytest resolves every
test's fixtures when it collects it; tests/conftest.py keeps what it could not resolve, for every
test collected, before `-m "not slow"` leaves the slow ones out. A run of part of the suite asks
pytest's --setup-plan for the whole of it, in a fresh process."""

import os
import re
import subprocess
import sys

from tests.conftest import UNRESOLVED_FIXTURES, unresolved_fixtures

pytest_plugins = ("pytester",)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(REPO, "tests")


def collected_the_whole_suite(config) -> bool:
    return all(os.path.abspath(os.path.join(config.invocation_params.dir, arg.split("::")[0]))
               in (REPO, TESTS) for arg in config.args)


def unresolved_in_a_fresh_process() -> dict[str, list[str]]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--setup-plan", "-q", "-p", "no:cacheprovider",
         "-o", "addopts=--import-mode=importlib", "tests"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    output = result.stdout + result.stderr
    missing = sorted(set(re.findall(r"fixture '(\w+)' not found", output)))
    assert re.search(r"\d+ passed", output) is None, "--setup-plan ran tests"
    if not missing:
        assert result.returncode == 0, output[-4000:]
        assert "SETUP" in output, output[-2000:]
    return {"tests": missing} if missing else {}


def test_every_test_finds_its_fixtures(request):
    if collected_the_whole_suite(request.config):
        collected, unresolved = request.config.stash[UNRESOLVED_FIXTURES]
        assert collected > 1500  # the slow tests among them
    else:
        unresolved = unresolved_in_a_fresh_process()
    assert not unresolved, f"fixtures no conftest.py above the test defines: {unresolved}"


def test_a_fixture_defined_nowhere_is_found_out(pytester):
    items = pytester.getitems("""
        import pytest

        @pytest.fixture
        def here():
            return 1

        @pytest.mark.parametrize("n", [1, 2])
        def test_moved(here, request, n, tmp_path, pretraining_files):
            pass

        def test_stays(here):
            pass
    """)
    assert unresolved_fixtures(items) == {
        item.nodeid: ["pretraining_files"] for item in items if "test_moved" in item.nodeid}
    assert len(items) == 3
