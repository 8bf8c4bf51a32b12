"""Griffe extension: a docstring's bare `>>>` example renders as a code block.

The docstrings follow the house style (one sentence, Args, then a runnable example), and most
examples are bare doctest lines after the Args section, which tests/test_docstrings.py runs.
Google style renders code only inside an ``Example:`` section; elsewhere Markdown would read the
`>>>` lines as nested quotes and ``x["a"]`` followed by ``[1, 2]`` as a reference link. This
extension fences each run of unindented doctest lines (from a `>>>` line to the next blank line)
as a ``pycon`` block when the API reference is built; the source is not changed.
"""

from __future__ import annotations

import griffe


def fence_doctests(text: str) -> str:
    """``text`` with each run of unindented doctest lines inside a ```pycon fence."""
    out, in_example = [], False
    for line in text.split("\n"):
        if not in_example and line.startswith(">>>"):
            out.append("```pycon")
            in_example = True
        elif in_example and not line.strip():
            out.append("```")
            in_example = False
        out.append(line)
    if in_example:
        out.append("```")
    return "\n".join(out)


class DoctestExamples(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
