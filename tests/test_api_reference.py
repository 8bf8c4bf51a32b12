"""The API reference (docs/reference/, rendered by MkDocs from the docstrings) covers every public
name, and `mkdocs build --strict` builds the site without a warning."""

import importlib
import os
import re
import subprocess
import sys

import pytest

import keras_bert

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(REPO, "docs", "reference")
_DIRECTIVE = re.compile(r"^:::\s+([\w.]+)\s*$", re.M)


def _directives() -> dict[str, str]:
    """{dotted path: page} for every mkdocstrings directive (`::: path`) of the reference."""
    found = {}
    for name in sorted(os.listdir(REFERENCE)):
        with open(os.path.join(REFERENCE, name), encoding="utf-8") as f:
            for path in _DIRECTIVE.findall(f.read()):
                found[path] = name
    return found


def _resolve(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_public_name_is_in_the_reference():
    documented = {}
    for path in _directives():
        obj = _resolve(path)
        documented[id(obj)] = path
    missing = [name for name in keras_bert.__all__
               if id(getattr(keras_bert, name)) not in documented]
    assert not missing, (f"public names without a `::: module.Name` directive in "
                         f"docs/reference/: {missing}")


def test_every_directive_names_a_public_object():
    """A directive documents something `import keras_bert` offers, by the module that defines
    it (the package's names load lazily, which MkDocs' static reading cannot follow)."""
    public = {id(getattr(keras_bert, name)): name for name in keras_bert.__all__}
    stray = [path for path in _directives() if id(_resolve(path)) not in public]
    assert not stray, f"reference directives for names outside keras_bert.__all__: {stray}"


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (setup.py's [test] extra "
                                         "installs it)")
    pytest.importorskip("mkdocstrings_handlers.python",
                        reason="mkdocstrings[python] is not installed ([test] extra)")
    pytest.importorskip("material", reason="mkdocs-material is not installed ([test] extra)")
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
                   "PYTHONPATH": os.pathsep.join(
                       p for p in (REPO, os.environ.get("PYTHONPATH")) if p)}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{output[-6000:]}"
    assert "WARNING" not in output, output[-6000:]
    page = (tmp_path / "site" / "reference" / "task-models" / "index.html").read_text()
    assert "BertClassifier" in page and "from_pretrained" in page
