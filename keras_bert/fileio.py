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


def _local(path: str) -> str:
    path = str(path)
    return path[len("file://"):] if path.startswith("file://") else path


def _gfile():
    import tensorflow as tf  # only for remote paths: TensorFlow takes seconds to import

    return tf.io.gfile


def open_file(path: str, mode: str = "r") -> IO:
    """Opens `path` like `open` (text modes read and write UTF-8), or through tf.io.gfile."""
    if is_remote(path):
        return _gfile().GFile(path, mode)
    if "b" in mode:
        return open(_local(path), mode)
    return open(_local(path), mode, encoding="utf-8")


def exists(path: str) -> bool:
    return _gfile().exists(path) if is_remote(path) else os.path.exists(_local(path))


def isdir(path: str) -> bool:
    return _gfile().isdir(path) if is_remote(path) else os.path.isdir(_local(path))


def glob(pattern: str) -> list[str]:
    """The paths matching `pattern`, sorted (hidden local files included, as tf.io.gfile does)."""
    if is_remote(pattern):
        return sorted(_gfile().glob(pattern))
    return sorted(_glob.glob(_local(pattern), include_hidden=True))


def makedirs(path: str) -> None:
    if is_remote(path):
        _gfile().makedirs(path)
    else:
        os.makedirs(_local(path), exist_ok=True)


def rename(src: str, dst: str, overwrite: bool = False) -> None:
    """Renames `src` to `dst`; atomic on one local file system (``os.replace``)."""
    if is_remote(src) or is_remote(dst):
        _gfile().rename(src, dst, overwrite=overwrite)
        return
    if not overwrite and os.path.exists(_local(dst)):
        raise FileExistsError(f"{dst} already exists")
    os.replace(_local(src), _local(dst))


def remove(path: str) -> None:
    if is_remote(path):
        _gfile().remove(path)
    else:
        os.remove(_local(path))


def copy(src: str, dst: str, overwrite: bool = False) -> None:
    if is_remote(src) or is_remote(dst):
        _gfile().copy(src, dst, overwrite=overwrite)
        return
    if not overwrite and os.path.exists(_local(dst)):
        raise FileExistsError(f"{dst} already exists")
    shutil.copyfile(_local(src), _local(dst))
