"""No test waits a fixed time (issue 41): a sleep outside a loop is a guess at how long something
takes, and a loaded machine proves it wrong. A test waits for an event (threading.Event, a
future, a queue, a thread's join with a deadline) or polls for its condition under a generous
deadline (tests.helpers.wait_until), sleeping briefly inside the polling loop; that loop is what
this scan accepts: a `time.sleep` (or `asyncio.sleep`) call in the body of a while or for loop of
its own function."""

import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent
SLEEPING_MODULES = ("time", "asyncio")
LOOPS = (ast.While, ast.For, ast.AsyncFor)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _sleep_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The names the file's imports bind to the time and asyncio modules, and to their sleep."""
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.asname or alias.name for alias in node.names
                        if alias.name in SLEEPING_MODULES}
        elif isinstance(node, ast.ImportFrom) and node.module in SLEEPING_MODULES:
            functions |= {alias.asname or alias.name for alias in node.names
                          if alias.name == "sleep"}
    return modules, functions


def fixed_sleeps(source: str) -> list[int]:
    """The lines of sleep calls in ``source`` that are not in the body of a loop of their own
    function (a function defined in a loop sleeps when called, not once per iteration; a loop's
    ``else`` runs once)."""
    tree = ast.parse(source)
    modules, functions = _sleep_names(tree)
    found = []

    def is_sleep(call: ast.Call) -> bool:
        func = call.func
        if isinstance(func, ast.Attribute):
            return (func.attr == "sleep" and isinstance(func.value, ast.Name)
                    and func.value.id in modules)
        return isinstance(func, ast.Name) and func.id in functions

    def walk(node: ast.AST, in_loop: bool) -> None:
        if isinstance(node, FUNCTIONS):
            in_loop = False
        if isinstance(node, ast.Call) and is_sleep(node) and not in_loop:
            found.append(node.lineno)
        for field, value in ast.iter_fields(node):
            inside = in_loop or (isinstance(node, LOOPS) and field == "body")
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    walk(child, inside)

    walk(tree, False)
    return sorted(found)


def test_no_test_sleeps_a_fixed_time():
    found = [f"{path.relative_to(TESTS.parent)}:{line}"
             for path in sorted(TESTS.rglob("*.py"))
             for line in fixed_sleeps(path.read_text(encoding="utf-8"))]
    assert not found, (
        "fixed sleeps (a sleep outside a polling loop): wait for an event, or poll for the "
        "condition with tests.helpers.wait_until: " + ", ".join(found))


def test_the_scan_tells_a_fixed_sleep_from_polling():
    source = '''
import time
import time as clock
from time import sleep as nap
import asyncio


def fixed():
    time.sleep(0.5)                      # 9: flagged
    clock.sleep(1)                       # 10: flagged
    nap(2)                               # 11: flagged


async def fixed_async():
    await asyncio.sleep(1)               # 15: flagged


def polling(ready, deadline):
    while not ready():
        assert time.monotonic() < deadline
        time.sleep(0.01)                 # 21: polling
    for _ in range(10):
        if ready():
            break
        nap(0.1)                         # 25: polling
    else:
        time.sleep(3)                    # 27: flagged, the loop's else runs once
    while True:
        def later():
            time.sleep(1)                # 30: flagged, runs when called
        later()
        break


class Thing:
    def sleep(self, seconds):
        pass


def not_a_sleep(thing):
    thing.sleep(1)                       # another object's sleep
    time.monotonic()
'''
    assert fixed_sleeps(source) == [9, 10, 11, 15, 27, 30]
