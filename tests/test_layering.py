"""Dependencies inside keras_bert point one way (see ARCHITECTURE.md): a package imports only
itself and the packages before it in LAYERS. Command-line modules sit on top: only other
command-line modules import them. No two modules import each other, directly or through others.
Every import counts: module-level, inside a function, or under ``if TYPE_CHECKING``."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "keras_bert"

# Lowest first. A module is placed by its longest matching prefix.
LAYERS = [
    ("keras_bert.errors", "keras_bert.fileio", "keras_bert.config", "keras_bert.lazy",
     "keras_bert.tf_startup"),
    ("keras_bert.tokenization",),
    ("keras_bert.pretraining_data",),
    ("keras_bert.tf_internals", "keras_bert.keras_internals", "keras_bert.distribute",
     "keras_bert.layers", "keras_bert.optimization"),
    ("keras_bert.checkpoints",),
    ("keras_bert.models",),
    ("keras_bert.export",),
    ("keras_bert.tasks",),
    ("keras_bert.finetuning",),
    ("keras_bert.pretraining",),
    ("keras_bert.serving",),
    ("keras_bert.quickstart",),
]
# The command line: argument parsing and reporting, calling the library; all of it in one package.
CLI = "keras_bert.cli"


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_cli(module: str) -> bool:
    return module == CLI or module.startswith(CLI + ".")


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


def module_graph(modules=None) -> dict[str, set[str]]:
    """{module: the keras_bert modules it imports}. ``from package import submodule`` depends on
    the submodule alone: Python runs the package's ``__init__`` first, but a package that
    imports its submodules is not a circle."""
    paths = {module_name(p): p for p in (modules or MODULES)}
    graph = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                submodules = [f"{base}.{alias.name}" for alias in node.names
                              if f"{base}.{alias.name}" in paths]
                found.update(submodules)
                if len(submodules) < len(node.names):
                    found.add(base)
        graph[module] = {name for name in found if name in paths and name != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_import_circles():
    graph = module_graph()
    found = circles(graph)
    assert not found, "\n".join(
        " <-> ".join(group) + ": " + "; ".join(f"{m} imports {sorted(graph[m] & set(group))}"
                                              for m in group)
        for group in found)


def test_a_circle_through_a_function_level_import_fails():
    """The check itself: two models modules that import each other, one of them inside a
    function, are caught."""
    first, second = ROOT / "models" / "_circle_a.py", ROOT / "models" / "_circle_b.py"
    first.write_text("from keras_bert.models import _circle_b\n")
    second.write_text("def late():\n    from keras_bert.models import _circle_a\n")
    try:
        graph = module_graph([*MODULES, first, second])
        assert ["keras_bert.models._circle_a", "keras_bert.models._circle_b"] in circles(graph)
    finally:
        first.unlink()
        second.unlink()
