"""Reads the pretraining corpus: one sentence per line, a blank line between documents.

Files are read in blocks through `keras_bert.fileio` (local paths directly, gs:// through
tf.io.gfile) and streamed as windows of whole documents of a bounded size, so memory does not
grow with the corpus.
"""

from __future__ import annotations

from collections.abc import Iterator

from keras_bert import fileio

_READ_BLOCK_BYTES = 1 << 20


def resolve_input_files(input_file: str) -> list[str]:
    """Expands a comma-separated list of paths or globs, each glob sorted, in the order given.

    Raises:
        FileNotFoundError: a path or pattern matches no file.
    """
    files = []
    for pattern in (p.strip() for p in input_file.split(",")):
        if not pattern:
            continue
        matches = fileio.glob(pattern)
        if not matches:
            raise FileNotFoundError(
                f"input file {pattern!r} does not exist (no file matches it); check the path "
                f"given to --input_file")
        files.extend(matches)
    if not files:
        raise FileNotFoundError(f"--input_file {input_file!r} names no file")
    return files


def _read_lines(path: str) -> Iterator[str]:
    """The stripped lines of a UTF-8 file, read in blocks.

    Raises:
        ValueError: invalid UTF-8, naming the file and line.
    """
    line_number = 1
    remainder = b""
    with fileio.open_file(path, "rb") as reader:
        while True:
            block = reader.read(_READ_BLOCK_BYTES)
            data = remainder + block
            end = len(data) if not block else data.rfind(b"\n") + 1
            data, remainder = data[:end], data[end:]
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                bad_line = line_number + data.count(b"\n", 0, e.start)
                column = e.start - (data.rfind(b"\n", 0, e.start) + 1)
                raise ValueError(
                    f"{path}:{bad_line}: invalid UTF-8 ({e.reason} at byte {column} of the "
                    f"line); the corpus must be UTF-8 text: re-encode the file") from None
            lines = text.split("\n")
            if text.endswith("\n"):
                lines.pop()
            for line in lines:
                yield line.strip()
            line_number += len(lines)
            if not block:
                return


def read_document_windows(files: list[str], window_bytes: int) -> Iterator[list[list[str]]]:
    """Streams the documents of `files`, in order, grouped into windows.

    A document is a run of non-blank lines, ended by a blank line or the end of its file;
    windows run across files. A window closes at the first document boundary after
    `window_bytes` of text (UTF-8 bytes of the stripped lines, newlines counted), so it holds
    whole documents: about `window_bytes`, plus at most one document.

    Yields:
        [num_documents][num_lines] windows of stripped, non-empty sentences.
    """
    window: list[list[str]] = []
    document: list[str] = []
    window_size = 0
    for path in files:
        for line in _read_lines(path):
            if line:
                document.append(line)
                window_size += len(line.encode("utf-8")) + 1
                continue
            if document:
                window.append(document)
                document = []
            if window_size >= window_bytes:
                yield window
                window, window_size = [], 0
        if document:  # a file's end also ends its last document
            window.append(document)
            document = []
    if window:
        yield window
