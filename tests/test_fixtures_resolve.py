"""Every test of the suite finds its fixtures. A test moved away from the conftest.py that defines
one fails only when it runs, and a slow test runs only in CI's whole run (stop 45's CI failed on
`pretraining_files` after tests/pretraining/ took the pretraining tests): pytest's --setup-plan
resolves every test's fixtures without running any, in the time collection takes."""

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_test_finds_its_fixtures():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--setup-plan", "-q", "-p", "no:cacheprovider",
         "-o", "addopts=--import-mode=importlib", "tests"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    output = result.stdout + result.stderr
    missing = sorted(set(re.findall(r"fixture '(\w+)' not found", output)))
    assert not missing, f"fixtures no conftest.py above the test defines: {missing}"
    assert result.returncode == 0, output[-4000:]
    assert re.search(r"\d+ passed", output) is None, "--setup-plan ran tests"
    assert "SETUP" in output, output[-2000:]
