"""The server is installed inside keras_bert: a built wheel holds keras_bert/serving/ and no
top-level `serving` package, so outside the checkout `import serving` fails while `keras-bert
serve` starts from any directory. The checkout's serving/ folder holds what an operator reads and
copies (configs, docs), and no Python."""

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def copy_of_the_sources(destination) -> str:
    """The files a wheel is built from, without build/ or egg-info left over from earlier builds
    (setuptools puts whatever an old build/lib/ holds into the wheel)."""
    destination.mkdir()
    for name in ("setup.py", "README.md"):
        shutil.copy(os.path.join(REPO, name), destination / name)
    for name in ("keras_bert", "serving", "tests"):
        shutil.copytree(os.path.join(REPO, name), destination / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return str(destination)


@pytest.mark.slow
def test_wheel_installs_no_serving_package_and_serves_from_anywhere(tmp_path):
    sources = copy_of_the_sources(tmp_path / "sources")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path / "dist"), sources], check=True, timeout=600,
                   capture_output=True)
    wheel = next((tmp_path / "dist").glob("keras_bert_tf-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        top_level = next(archive.read(n).decode().split() for n in names
                         if n.endswith(".dist-info/top_level.txt"))
    for name in ("keras_bert/serving/server.py", "keras_bert/serving/servable.py",
                 "keras_bert/cli/__init__.py", "keras_bert/cli/__main__.py",
                 "keras_bert/quickstart.py"):
        assert name in names, name
    assert top_level == ["keras_bert"]
    assert not [n for n in names if n.split("/")[0] in ("serving", "tests")]

    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True, timeout=600, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # Only the install on the path (-S: no site-packages, where an editable install of this
    # checkout may live): keras_bert is found there, `serving` is not.
    only_site = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run(
        [sys.executable, "-S", "-c", "import importlib.util; "
                                     "print(importlib.util.find_spec('keras_bert').origin); "
                                     "import serving"],
        cwd=elsewhere, env=only_site, capture_output=True, text=True, timeout=120)
    assert result.stdout.startswith(str(site)), result.stdout + result.stderr
    assert result.returncode != 0 and "No module named 'serving'" in result.stderr, result.stderr

    env = {**only_site, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run([sys.executable, "-c", "import keras_bert.serving.server as s; "
                                                   "print(s.__file__)"],
                            cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.startswith(str(site)), result.stderr[-2000:]
    result = subprocess.run([sys.executable, "-m", "keras_bert.cli", "serve", "--help"],
                            cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--model_base_path" in result.stdout and "--enable_batching" in result.stdout
    assert "keras-bert serve" in result.stdout


def test_the_serving_folder_holds_no_code():
    """One server: keras_bert.serving (`keras-bert serve`); serving/ is configs and docs."""
    folder = os.path.join(REPO, "serving")
    code = [os.path.relpath(os.path.join(root, name), folder)
            for root, _, names in os.walk(folder) for name in names if name.endswith(".py")]
    assert code == []
    assert os.path.exists(os.path.join(folder, "configs")) and os.path.exists(
        os.path.join(folder, "README.md"))
