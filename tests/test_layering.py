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
    ("keras_bert.recipe",),
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


# What stays dynamic: ARCHITECTURE.md's table lists every load made at run time.
ARCHITECTURE = ROOT.parent / "ARCHITECTURE.md"
DYNAMIC_CALLS = {"import_module", "register_post_import_hook", "iter_modules", "entry_points",
                 "__import__"}


def dynamic_table() -> dict[tuple[str, str], str]:
    """{(path under the repo, function or "<module>"): what it loads} from ARCHITECTURE.md's
    "What stays dynamic" table."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## What stays dynamic", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`keras_bert/"):
            path, function = cells[0].replace("`", "").split()
            rows[(path, function)] = cells[2].strip("`")
    return rows


def dynamic_sites(paths=None) -> set[tuple[str, str]]:
    """(path, enclosing top-level function or class, or "<module>") of every dynamic load."""
    found = set()
    for path in paths or ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        relative = str(path.relative_to(ROOT.parent))
        for top in tree.body:
            where = top.name if isinstance(top, (ast.FunctionDef, ast.ClassDef)) else "<module>"
            for node in ast.walk(top):
                if not isinstance(node, ast.Call):
                    continue
                name = (node.func.attr if isinstance(node.func, ast.Attribute)
                        else getattr(node.func, "id", ""))
                reads_source = (name == "parse" and isinstance(node.func, ast.Attribute)
                                and getattr(node.func.value, "id", "") == "ast")
                if name in DYNAMIC_CALLS or reads_source:
                    found.add((relative, where))
    return found


def test_every_dynamic_load_is_listed_with_its_reason():
    table, found = dynamic_table(), dynamic_sites()
    unlisted = sorted(found - set(table))
    gone = sorted(set(table) - found)
    assert not unlisted, (f"dynamic loads missing from ARCHITECTURE.md's 'What stays dynamic' "
                          f"table: {unlisted}")
    assert not gone, f"ARCHITECTURE.md lists dynamic loads the code no longer makes: {gone}"


def test_an_unlisted_dynamic_load_fails():
    """The check itself: a models module that imports by name is caught."""
    probe = ROOT / "models" / "_dynamic_probe.py"
    probe.write_text("import importlib\n\ndef late():\n"
                     "    return importlib.import_module('keras_bert.tasks')\n")
    try:
        assert ("keras_bert/models/_dynamic_probe.py", "late") in dynamic_sites([probe])
        assert ("keras_bert/models/_dynamic_probe.py", "late") not in dynamic_table()
    finally:
        probe.unlink()


def test_dynamic_loads_point_down():
    """Each listed load's target, taken as an import of its site (every folder a ``*`` may
    stand for), sits in the site's layer or below; the package's ``__init__`` is the facade
    over all of them, and a CLI module may load anything."""
    wrong = []
    for (path, function), target in dynamic_table().items():
        site = module_name(ROOT.parent / path)
        if site == "keras_bert" or is_cli(site) or not target.startswith("keras_bert."):
            continue
        prefix = target.split("*")[0].rstrip(".")
        targets = [module_name(p) for p in MODULES if module_name(p).startswith(prefix)]
        assert targets, f"ARCHITECTURE.md: {path} {function} loads {target}, which matches nothing"
        wrong += [f"{path} {function} loads {module}, a higher layer" for module in targets
                  if not is_cli(module) and rank(module) > rank(site)]
    assert not wrong, "\n".join(wrong)
