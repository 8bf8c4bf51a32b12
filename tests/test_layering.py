"""Dependencies inside keras_bert point one way (see ARCHITECTURE.md): a package imports only
itself and the packages before it in LAYERS. Command-line modules sit on top: only other
command-line modules import them. Every import counts, module-level or inside a function."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "keras_bert"

# Lowest first. A module is placed by its longest matching prefix.
LAYERS = [
    ("keras_bert.errors", "keras_bert.fileio", "keras_bert.config", "keras_bert.lazy"),
    ("keras_bert.tokenization",),
    ("keras_bert.pretraining_data",),
    ("keras_bert.tf_internals", "keras_bert.layers", "keras_bert.optimization"),
    ("keras_bert.checkpoints",),
    ("keras_bert.models",),
    ("keras_bert.export",),
    ("keras_bert.tasks",),
    ("keras_bert.training",),
    ("keras_bert.pretraining",),
    ("keras_bert.serving",),
    ("keras_bert.quickstart",),
]
# The command line: argument parsing and reporting, calling the library.
CLI = ("keras_bert.cli", "keras_bert.cli_flags")


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_cli(module: str) -> bool:
    return module in CLI or module.endswith(".cli") or module.endswith("_cli")


def rank(module: str) -> int:
    best, best_length = None, -1
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = i, len(prefix)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in {__file__}")
    return best


def imported_modules(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, module) for every keras_bert module the file imports."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            found.append((node.lineno, base))
            # `from keras_bert.x import y` may import the module keras_bert.x.y
            for alias in node.names:
                candidate = ROOT.parent / (base + "." + alias.name).replace(".", "/")
                if candidate.with_suffix(".py").exists() or candidate.is_dir():
                    found.append((node.lineno, base + "." + alias.name))
    return [(line, name) for line, name in found
            if name.startswith("keras_bert.") and name != "keras_bert"]


MODULES = sorted(p for p in ROOT.rglob("*.py") if module_name(p) != "keras_bert")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_point_down(path):
    importer = module_name(path)
    wrong = []
    for line, imported in imported_modules(path):
        if is_cli(imported):
            if not is_cli(importer):
                wrong.append(f"{path}:{line}: {importer} imports the command-line module "
                             f"{imported}")
            continue
        if is_cli(importer):
            continue  # the command line may call anything
        if rank(imported) > rank(importer):
            wrong.append(f"{path}:{line}: {importer} imports {imported}, a higher layer")
    assert not wrong, "\n".join(wrong)


def test_an_upward_import_fails(tmp_path):
    """The check itself: a models module importing a task is caught."""
    upward = ROOT / "models" / "_upward_probe.py"
    upward.write_text("from keras_bert.tasks.classification import model\n")
    try:
        with pytest.raises(AssertionError, match="a higher layer"):
            test_imports_point_down(upward)
    finally:
        upward.unlink()
