"""Measured figures live in one place, benchmarks/README.md (each with its date, machine and
command), where they can be kept current: a docstring or comment under keras_bert/ describes
behaviour and points there, without the number, which would go stale unseen.

What counts as a measured figure: a speed ratio (`2.3x the texts per CPU-second`, `gains
1.4x`), a throughput (`texts per second`), a time (`9 ms`, `0.2 s of CPU`), an accuracy or
agreement (`reached 81%`, `99.4% label agreement`, `by 2 points`, `a cosine of 0.997`), or any
percentage or ratio in the sentence that cites benchmarks/. Behaviour stated as numbers (`10%
warmup`, `80% [MASK]`, `pad at least 20% less`) is not measured and passes.
"""

import ast
import io
import os
import re
import tokenize

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "keras_bert")

_NUMBER = r"\d+(?:[.,]\d+)?"
MEASURED = [re.compile(pattern, re.I) for pattern in (
    rf"\b{_NUMBER}(?:\s*(?:-|to)\s*{_NUMBER})?x\s+(?:the\s+(?:texts|requests|speed|teacher|"
    rf"CPU)|its\s+texts|float32|faster|slower)\b",                       # 2.3x the texts ...
    rf"\bgains?\s+{_NUMBER}x\b",                                         # gains 1.4x
    r"\btexts?\s+per\s+(?:CPU-)?second|\bper\s+CPU-second|\btexts/s\b|\brequests\s+per\s+second",
    rf"\b{_NUMBER}(?:\s*-\s*{_NUMBER})?\s?ms\b",                         # 9 ms, 0.1-0.2 ms
    rf"\b{_NUMBER}(?:\s*-\s*{_NUMBER})?\s+s\s+(?:of\s+CPU|against|instead\s+of)\b",  # 0.2 s of CPU
    rf"\b{_NUMBER}%\s+(?:label\s+agreement|accuracy|of\s+(?:its|the|an)\s+[\w-]+(?:'s)?\s+"
    rf"(?:op\s+)?time)",                                                 # 99.4% label agreement
    rf"\b(?:reached|accuracy(?:\s+of)?)\s+{_NUMBER}%",                   # reached 81%
    rf"\bby\s+{_NUMBER}\s+points?\b",                                    # by 2 points
    rf"\bwithin\s+{_NUMBER}%\s+of\s+the\s+(?:CPU\s+)?time",              # within 3% of the time
    rf"\bcosine\s+(?:of\s+)?0\.\d+",                                     # a cosine of 0.997
)]
# In a sentence that cites the benchmarks, any percentage or ratio is taken as measured.
_CITES_BENCHMARKS = re.compile(r"benchmarks/", re.I)
_FIGURE = re.compile(rf"\b{_NUMBER}(?:x\b|%)")


def _texts(path: str):
    """(line, text) of every docstring and comment in a Python file."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                yield body[0].lineno, body[0].value.value
    comments = [(token.start[0], token.string.lstrip("#"))
                for token in tokenize.generate_tokens(io.StringIO(source).readline)
                if token.type == tokenize.COMMENT]
    # A comment that runs over several lines is one text, so a figure split by a line break
    # is still seen.
    block, start, last = [], 0, -2
    for line, text in comments:
        if line != last + 1 and block:
            yield start, "\n".join(block)
            block = []
        if not block:
            start = line
        block.append(text.strip())
        last = line
    if block:
        yield start, "\n".join(block)


def measured_figures(text: str) -> list[tuple[int, str]]:
    """The measured figures in a docstring or comment: (line within it, 0 first, the phrase
    that holds the figure)."""
    found = [(match.start(), match.group(0)) for pattern in MEASURED
             for match in pattern.finditer(text)]
    sentence_start = 0
    for sentence in re.split(r"(?<=[.;])\s+", text):
        sentence_start = text.index(sentence, sentence_start)
        if _CITES_BENCHMARKS.search(sentence):
            found += [(sentence_start + match.start(), match.group(0))
                      for match in _FIGURE.finditer(sentence)]
    return sorted((text.count("\n", 0, offset), " ".join(phrase.split()))
                  for offset, phrase in found)


def _python_files():
    for folder, _, names in os.walk(PACKAGE):
        for name in sorted(names):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def test_no_docstring_or_comment_holds_a_measured_figure():
    found = [f"{os.path.relpath(path, REPO)}:{line + offset}: {phrase!r}"
             for path in _python_files() for line, text in _texts(path)
             for offset, phrase in measured_figures(text)]
    assert not found, ("measured figures in keras_bert/ (move each to benchmarks/README.md, "
                       "with its date, machine and command, and describe the behaviour "
                       "instead):\n" + "\n".join(found))


@pytest.mark.parametrize("text, figures", [
    ("ran at 2.3x to 2.6x the texts per CPU-second of float32", 2),
    ("MiniLM's predict gains 1.4x in CPU time", 1),
    ("a 2-layer student spends 9 ms on 8 texts", 1),
    ("freeing it takes 0.1-0.2 s of CPU", 1),
    ("98.7% label agreement with float32", 1),
    ("and reached 81% at 1e-4", 1),
    ("of a 6-layer teacher by 2 points on TREC-6", 1),
    ("keeps a cosine of 0.997 to float32", 1),
    ("about 1.15x the speed of per-row ranges (benchmarks/README.md).", 2),
    ("AdamW at lr 1e-4, 10% warmup, linear decay", 0),
    ("80% [MASK], 10% a random token, 10% unchanged", 0),
    ("where that pads at least 20% less than shuffled batches", 0),
    ("GELU: 0.5x(1 + tanh(...)) on a 768x3072 kernel", 0),
    ("measured the same on BERT-base: benchmarks/README.md.", 0),
])
def test_what_counts_as_a_measured_figure(text, figures):
    assert len(measured_figures(text)) == figures, measured_figures(text)
