"""benchmarks/gpu_check.sh on a machine without a GPU: its dry run (every part, tiny, on the CPU)
prints a table with a row for every check, and without TensorFlow it says so and exits 3."""

import os
import re
import subprocess
import sys
import venv

import pytest

from benchmarks.finetune import CONTENDERS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLAB = os.path.join(REPO, "colab")
SCRIPT = os.path.join(REPO, "benchmarks", "gpu_check.sh")
ROW = re.compile(r"^\| (\w+) \| ([^|]+) \| ([^|]+) \|")


def run_script(*args, **env):
    return subprocess.run(["bash", SCRIPT, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=3600, env={**os.environ, **env})


def gpu_test_names() -> list[str]:
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu",
                             "-p", "no:cacheprovider", "tests/gpu"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    names = [line.split("::", 1)[1] for line in result.stdout.splitlines() if "::" in line]
    assert names, result.stdout[-2000:] + result.stderr[-2000:]
    return names


@pytest.mark.slow
def test_dry_run_prints_a_row_for_every_check(tmp_path):
    result = run_script("--dry-run", PYTHON=sys.executable, OUT=str(tmp_path))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    table = (tmp_path / "gpu_check.md").read_text()
    assert table.strip() in result.stdout
    assert table.startswith("GPU check (dry run on the CPU): ")
    rows = {}
    for line in table.splitlines():
        match = ROW.match(line)
        if match and match[1] != "part":
            rows[match[1], match[2].strip()] = match[3].strip()
    notebooks = sorted(name for name in os.listdir(COLAB) if name.endswith(".ipynb"))
    expected = ([("env", "TensorFlow and the GPU")]
                + [("tests", name) for name in gpu_test_names()]
                + [("notebooks", name) for name in notebooks]
                + [("throughput", name) for name in CONTENDERS])
    assert sorted(rows) == sorted(expected)
    statuses = {part: {rows[p, check] for p, check in rows if p == part}
                for part, _ in expected}
    assert statuses["env"] == {"ok"}
    # The GPU tests ran on the CPU; the known bugs are strict expected failures.
    assert statuses["tests"] <= {"ok", "xfail"}, rows
    assert rows["notebooks", "02_pretrain_from_scratch.ipynb"] == "ok"
    assert {rows["throughput", name] for name in CONTENDERS if name.startswith("ours")} == {"ok"}
    assert {rows["throughput", name] for name in CONTENDERS
            if name.startswith("keras-hub")} <= {"ok", "skipped"}
    for name in ("gpu_check.json", "gpu_check.log"):
        assert (tmp_path / name).stat().st_size > 0


def test_without_tensorflow_it_says_so_and_exits_3(tmp_path):
    """As on the device machines lent here: an interpreter without TensorFlow."""
    venv.EnvBuilder(with_pip=False).create(tmp_path / "venv")
    python = str(tmp_path / "venv" / "bin" / "python")
    result = run_script(PYTHON=python, OUT=str(tmp_path / "out"))
    assert result.returncode == 3
    assert "cannot import TensorFlow: ModuleNotFoundError: No module named 'tensorflow'" in (
        result.stderr)
    assert 'benchmarks/README.md, "GPU check"' in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
