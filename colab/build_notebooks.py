"""Builds the Colab notebooks (colab/*.ipynb) from their percent-format sources (colab/src/*.py).

The sources are plain Python, easy to review and diff: `# %%` starts a code cell,
`# %% [markdown]` a markdown cell (its lines start with `# `), and `# %% tags=["parameters"]` the
parameters cell that CI overrides to run the notebook shrunk on CPU. Outputs are never stored.

    python colab/build_notebooks.py          # rewrite colab/*.ipynb
    python colab/build_notebooks.py --check  # exit 1 if a notebook is out of date
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import nbformat

COLAB_DIR = os.path.dirname(os.path.abspath(__file__))
GITHUB_REPO = "keras-bert/keras-bert"
_CELL = re.compile(r"^# %%(?P<markdown> \[markdown\])?(?: tags=(?P<tags>\[.*\]))?\s*$")


def badge(notebook_name: str) -> str:
    url = (f"https://colab.research.google.com/github/{GITHUB_REPO}/blob/main/colab/"
           f"{notebook_name}")
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"({url})")


def parse_source(text: str) -> list[dict]:
    """Splits a percent-format source into [{'type', 'tags', 'lines'}] cells."""
    cells: list[dict] = []
    for line in text.splitlines():
        match = _CELL.match(line)
        if match:
            cells.append({"type": "markdown" if match["markdown"] else "code",
                          "tags": json.loads(match["tags"]) if match["tags"] else [],
                          "lines": []})
        elif cells:
            cells[-1]["lines"].append(line)
    return cells


def build_notebook(source_path: str) -> nbformat.NotebookNode:
    name = os.path.splitext(os.path.basename(source_path))[0] + ".ipynb"
    with open(source_path, encoding="utf-8") as f:
        cells = parse_source(f.read())
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {
        "accelerator": "TPU",
        "colab": {"provenance": [], "name": name},
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for index, cell in enumerate(cells):
        lines = cell["lines"]
        while lines and not lines[-1].strip():
            lines.pop()
        if cell["type"] == "markdown":
            body = "\n".join(l[2:] if l.startswith("# ") else l.lstrip("#") for l in lines)
            if index == 0:
                body = badge(name) + "\n\n" + body
            new = nbformat.v4.new_markdown_cell(body)
        else:
            new = nbformat.v4.new_code_cell("\n".join(lines))
            if cell["tags"]:
                new.metadata["tags"] = cell["tags"]
        new.id = f"cell-{index}"
        notebook.cells.append(new)
    return notebook


def sources() -> list[str]:
    src = os.path.join(COLAB_DIR, "src")
    return sorted(os.path.join(src, f) for f in os.listdir(src) if f.endswith(".py"))


def notebook_path(source_path: str) -> str:
    return os.path.join(COLAB_DIR, os.path.splitext(os.path.basename(source_path))[0] + ".ipynb")


def render(notebook: nbformat.NotebookNode) -> str:
    return nbformat.writes(notebook) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a notebook is stale")
    args = parser.parse_args(argv)
    stale = []
    for source in sources():
        text = render(build_notebook(source))
        target = notebook_path(source)
        current = open(target, encoding="utf-8").read() if os.path.exists(target) else None
        if current == text:
            continue
        if args.check:
            stale.append(os.path.basename(target))
        else:
            with open(target + ".tmp", "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(target + ".tmp", target)
            print(f"wrote {target}")
    if stale:
        print(f"stale notebooks (run python colab/build_notebooks.py): {', '.join(stale)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
