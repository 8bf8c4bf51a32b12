"""serving/ ships with the package: the built wheel holds the server and its configs, and once
installed (not editable) the server and `keras-bert serve` start from any directory."""

import os
import subprocess
import sys
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_wheel_holds_the_server_and_runs_from_anywhere(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path / "dist"), REPO], check=True, timeout=600,
                   capture_output=True)
    wheel = next((tmp_path / "dist").glob("keras_bert_tf-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("serving/server.py", "serving/servable.py", "serving/configs/models.config",
                 "serving/configs/batching_parameters.txt", "serving/docker-compose.yml",
                 "keras_bert/cli.py", "keras_bert/quickstart.py"):
        assert name in names, name
    assert not [n for n in names if n.startswith("tests/")]

    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True, timeout=600, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "TF_CPP_MIN_LOG_LEVEL": "3"}
    where = subprocess.run(
        [sys.executable, "-c", "import keras_bert, serving.server; "
                               "print(keras_bert.__file__); print(serving.server.__file__)"],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300, check=True)
    assert all(line.startswith(str(site)) for line in where.stdout.split()), where.stdout
    for command in ([sys.executable, "-m", "serving.server", "--help"],
                    [sys.executable, "-m", "keras_bert.cli", "serve", "--help"]):
        result = subprocess.run(command, cwd=elsewhere, env=env, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "--model_base_path" in result.stdout and "--enable_batching" in result.stdout
    assert "keras-bert serve" in result.stdout
