"""The error for bad input data that every reader raises: it names the file and line."""

from __future__ import annotations


class DataError(ValueError):
    """Bad fine-tuning input; the message starts with ``path:line:`` and says what to do.

    Args:
        message: what is wrong and how to fix it.
        path: the file.
        line: the 1-based line, when known.
    """

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        self.path, self.line = path, line
        where = "" if path is None else (f"{path}:{line}: " if line else f"{path}: ")
        super().__init__(where + message)
