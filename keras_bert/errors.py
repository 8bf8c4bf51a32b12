"""Our errors: DataError, for bad input data (every reader raises it, naming the file and line),
and SaveError, for a write that failed (naming what, where and why)."""

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


class SaveError(OSError):
    """A save that failed part-way (a full disk, a lost connection): the message says what was
    being written, where, and why, in one line; the earlier file or directory there is left as
    it was."""


def one_line_reason(error: BaseException) -> str:
    """An error's message on one line (TensorFlow's carry a ``{{function_node ...}}`` prefix
    and many lines)."""
    text = getattr(error, "message", None) or str(error) or type(error).__name__
    text = text.strip().split("\n")[0].strip()
    if "{{function_node" in text:
        text = text.split("}}", 1)[-1].strip()
    return text or type(error).__name__
