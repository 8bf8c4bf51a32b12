"""Real English sentences for accuracy tests: prose from the docstrings of standard-library
modules (the same source as the benchmark corpus of ../shared/bench/make_corpus.py), read with
``ast``, so a given Python version always gives the same sentences, without a download."""

import ast
import importlib.util
import random
import re
from pathlib import Path

MODULES = ("argparse", "asyncio.events", "calendar", "collections", "csv", "datetime",
           "decimal", "difflib", "email.message", "fractions", "ftplib", "gettext", "heapq",
           "http.client", "imaplib", "inspect", "logging", "mailbox", "pathlib", "pickle",
           "pydoc", "shutil", "smtplib", "statistics", "subprocess", "tarfile", "tempfile",
           "textwrap", "threading", "typing", "unittest.case", "urllib.request", "zipfile")
# MODULES by subject: labels for a topic classifier.
TOPICS = {
    "network and mail": ("email.message", "ftplib", "http.client", "imaplib", "mailbox",
                         "smtplib", "urllib.request"),
    "files and archives": ("csv", "pathlib", "pickle", "shutil", "tarfile", "tempfile",
                           "zipfile"),
    "processes and threads": ("asyncio.events", "subprocess", "threading"),
    "code and tools": ("argparse", "inspect", "logging", "pydoc", "typing", "unittest.case"),
    "numbers and dates": ("calendar", "datetime", "decimal", "fractions", "heapq", "statistics"),
    "text": ("collections", "difflib", "gettext", "textwrap"),
}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_WORD = re.compile(r"^[A-Za-z][A-Za-z'-]*[,.;:!?]?$")


def _docstrings(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield doc


def _module_sentences(module: str) -> set[str]:
    """The prose sentences of 5 to 25 words (80% of them plain words) in ``module``'s docstrings."""
    sentences = set()
    for doc in _docstrings(Path(importlib.util.find_spec(module).origin)):
        for paragraph in re.split(r"\n\s*\n", doc):
            text = " ".join(paragraph.split())
            for sentence in _SENTENCE_END.split(text):
                words = sentence.split()
                if (5 <= len(words) <= 25 and sentence[-1] in ".!?"
                        and sum(bool(_WORD.match(w)) for w in words) >= 0.8 * len(words)):
                    sentences.add(sentence)
    return sentences


def docstring_sentences(count: int, seed: int = 0) -> list[str]:
    """``count`` distinct sentences from the docstrings of ``MODULES``, shuffled."""
    ordered = sorted(set().union(*(_module_sentences(module) for module in MODULES)))
    if len(ordered) < count:
        raise ValueError(f"only {len(ordered)} sentences in the listed modules, {count} asked")
    random.Random(seed).shuffle(ordered)
    return ordered[:count]


def topic_sentences(seed: int = 0) -> list[tuple[str, int]]:
    """Every sentence of ``MODULES`` found in one topic's modules only, with the index of that
    topic in ``TOPICS`` as its label; shuffled."""
    topics = {}
    for label, modules in enumerate(TOPICS.values()):
        for module in modules:
            for sentence in _module_sentences(module):
                topics.setdefault(sentence, set()).add(label)
    rows = sorted((sentence, labels.pop()) for sentence, labels in topics.items()
                  if len(labels) == 1)
    random.Random(seed).shuffle(rows)
    return rows
