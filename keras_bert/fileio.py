"""File access for local paths and remote filesystems, without importing TensorFlow for local ones.

Local paths go through Python's own file functions. Paths with a scheme (``gs://``, ``s3://``,
``hdfs://``, TensorFlow's ``ram://``...) go through ``tf.io.gfile``, imported only then. This keeps
the pure-Python parts of the toolkit (the pretraining-data writer, the tokenizer) free of
TensorFlow's several seconds of start-up, while every function still accepts remote paths.
"""

from __future__ import annotations

import glob as _glob
import os
import shutil
from typing import IO


def is_remote(path: str) -> bool:
    """Whether `path` names a file system by scheme (``gs://bucket/x``) rather than a local path."""
    return "://" in str(path) and not str(path).startswith("file://")


def local_path(path: str) -> str:
    """A local path without its ``file://`` scheme (unchanged when it has none)."""
    path = str(path)
    return path[len("file://"):] if path.startswith("file://") else path


class OutputExistsError(FileExistsError):
    """An output path exists and overwriting was not asked for; ``path`` names it. The message
    names the Python argument; the command line names its own flag (``--overwrite``)."""

    def __init__(self, path: str, hint: str = "pass overwrite=True"):
        super().__init__(f"output {path!r} already exists; remove it or {hint}")
        self.path = path


def check_writable_location(path: str) -> None:
    """Fails early, before any long work, when the directory ``path`` (local) cannot be created
    or written: it or its nearest existing ancestor is a file, or is not writable.

    Raises:
        NotADirectoryError or PermissionError, naming the path and the ancestor.
    """
    if is_remote(path):
        return
    path = os.path.abspath(local_path(path))
    ancestor = path
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise NotADirectoryError(f"cannot write {path!r}: {ancestor!r} is a file, not a "
                                 "directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write {path!r}: no write permission in {ancestor!r}")


def _gfile():
    import tensorflow as tf  # only for remote paths: TensorFlow takes seconds to import

    return tf.io.gfile


def open_file(path: str, mode: str = "r") -> IO:
    """Opens `path` like `open` (text modes read and write UTF-8), or through tf.io.gfile."""
    if is_remote(path):
        return _gfile().GFile(path, mode)
    if "b" in mode:
        return open(local_path(path), mode)
    return open(local_path(path), mode, encoding="utf-8")


def exists(path: str) -> bool:
    return _gfile().exists(path) if is_remote(path) else os.path.exists(local_path(path))


def isdir(path: str) -> bool:
    return _gfile().isdir(path) if is_remote(path) else os.path.isdir(local_path(path))


def glob(pattern: str) -> list[str]:
    """The paths matching `pattern`, sorted (hidden local files included, as tf.io.gfile does)."""
    if is_remote(pattern):
        return sorted(_gfile().glob(pattern))
    return sorted(_glob.glob(local_path(pattern), include_hidden=True))


def makedirs(path: str) -> None:
    if is_remote(path):
        _gfile().makedirs(path)
    else:
        os.makedirs(local_path(path), exist_ok=True)


def rename(src: str, dst: str, overwrite: bool = False) -> None:
    """Renames `src` to `dst`; atomic on one local file system (``os.replace``)."""
    if is_remote(src) or is_remote(dst):
        _gfile().rename(src, dst, overwrite=overwrite)
        return
    if not overwrite and os.path.exists(local_path(dst)):
        raise OutputExistsError(dst)
    os.replace(local_path(src), local_path(dst))


def remove(path: str) -> None:
    if is_remote(path):
        _gfile().remove(path)
    else:
        os.remove(local_path(path))


def copy(src: str, dst: str, overwrite: bool = False) -> None:
    if is_remote(src) or is_remote(dst):
        _gfile().copy(src, dst, overwrite=overwrite)
        return
    if not overwrite and os.path.exists(local_path(dst)):
        raise OutputExistsError(dst)
    shutil.copyfile(local_path(src), local_path(dst))
