"""The one way keras_bert touches files: local paths through Python, remote ones through tf.io.gfile.

Local paths (and ``file://`` URLs) go through Python's own file functions. Paths with a scheme
(``gs://``, ``s3://``, ``hdfs://``, TensorFlow's ``ram://``...) go through ``tf.io.gfile``, and
TensorFlow is imported only then. This keeps the pure-Python parts of the toolkit (``BertConfig``,
the tokenizer, the pretraining-data writer) free of TensorFlow's several seconds of start-up, while
every function still accepts remote paths (Colab TPUs read and write ``gs://``).

Every path argument is a ``str`` or an ``os.PathLike`` (``pathlib.Path``); returned paths are
``str``. Outputs that must never appear half-written go through ``atomic_write`` (one file) or
``atomic_output_dir`` (a directory).

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "notes.txt")
>>> with atomic_write(path) as f:
...     _ = f.write("written whole or not at all\\n")
>>> with open_file(path) as f:
...     f.read()
'written whole or not at all\\n'
>>> listdir(os.path.dirname(path))  # no temporary file left beside it
['notes.txt']
"""

from __future__ import annotations

import contextlib
import glob as _glob
import json
import logging
import os
import shutil
import tempfile
import uuid
from typing import IO, Iterator, NamedTuple, Union

from keras_bert.errors import DataError

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]


def is_remote(path: PathLike) -> bool:
    """Whether ``path`` names a file system by scheme (``gs://bucket/x``) rather than a local
    path; ``file://`` URLs are local."""
    path = os.fspath(path)
    return "://" in path and not path.startswith("file://")


def local_path(path: PathLike) -> str:
    """A local path without its ``file://`` scheme (unchanged when it has none)."""
    path = os.fspath(path)
    return path[len("file://"):] if path.startswith("file://") else path


def join(*parts: PathLike) -> str:
    """``os.path.join`` that keeps ``gs://`` prefixes intact (joins URLs with ``/``)."""
    head, *rest = (os.fspath(part) for part in parts)
    for part in rest:
        head = head.rstrip("/") + "/" + part.lstrip("/") if "://" in head else os.path.join(head, part)
    return head


class OutputExistsError(FileExistsError):
    """An output path exists and overwriting was not asked for; ``path`` names it. The message
    names the Python argument; the command line names its own flag (``--overwrite``)."""

    def __init__(self, path: PathLike, hint: str = "pass overwrite=True"):
        path = os.fspath(path)
        super().__init__(f"output {path!r} already exists; remove it or {hint}")
        self.path = path


def check_writable_location(path: PathLike) -> None:
    """Fails early, before any long work, when the directory ``path`` (local) cannot be created
    or written: it or its nearest existing ancestor is a file, or is not writable. Remote paths
    are not checked.

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


# ---------------------------------------------------------------------------------- one file
def open_file(path: PathLike, mode: str = "r") -> IO:
    """Opens ``path`` like ``open``, or through ``tf.io.gfile.GFile`` for a remote path.

    Text modes read and write UTF-8 with no newline translation: ``read()`` returns the bytes'
    text as they are, and only ``"\\n"`` ends a line, as with ``tf.io.gfile.GFile`` (whose line
    iteration also drops every ``"\\r"``; a local file keeps them, the line count is the same).
    """
    if is_remote(path):
        return _gfile().GFile(os.fspath(path), mode)
    if "b" in mode:
        return open(local_path(path), mode)
    return open(local_path(path), mode, encoding="utf-8", newline="\n")


def exists(path: PathLike) -> bool:
    return _gfile().exists(os.fspath(path)) if is_remote(path) else os.path.exists(local_path(path))


def isdir(path: PathLike) -> bool:
    return _gfile().isdir(os.fspath(path)) if is_remote(path) else os.path.isdir(local_path(path))


def listdir(path: PathLike) -> list[str]:
    """The names in the directory ``path``, sorted (remote directories may end in ``/``)."""
    if is_remote(path):
        return sorted(_gfile().listdir(os.fspath(path)))
    return sorted(os.listdir(local_path(path)))


def walk(path: PathLike) -> Iterator[tuple[str, list[str], list[str]]]:
    """(directory, subdirectory names, file names) for ``path`` and every directory below it, top
    down, as ``os.walk`` (remote paths through ``tf.io.gfile.walk``)."""
    if is_remote(path):
        yield from _gfile().walk(os.fspath(path))
        return
    yield from os.walk(local_path(path))


class FileStat(NamedTuple):
    """A file's size in bytes and its modification time in nanoseconds."""

    length: int
    mtime_nsec: int


def file_stat(path: PathLike) -> FileStat:
    """The size and modification time of the file ``path``; FileNotFoundError if it is gone."""
    if is_remote(path):
        gfile = _gfile()
        import tensorflow as tf  # imported already by _gfile

        try:
            stat = gfile.stat(os.fspath(path))
        except tf.errors.NotFoundError as error:
            raise FileNotFoundError(os.fspath(path)) from error
        return FileStat(int(stat.length), int(stat.mtime_nsec))
    stat = os.stat(local_path(path))
    return FileStat(stat.st_size, stat.st_mtime_ns)


def glob(pattern: PathLike) -> list[str]:
    """The paths matching ``pattern``, sorted (hidden local files included, as tf.io.gfile does)."""
    if is_remote(pattern):
        return sorted(_gfile().glob(os.fspath(pattern)))
    return sorted(_glob.glob(local_path(pattern), include_hidden=True))


def makedirs(path: PathLike) -> None:
    """Creates ``path`` and its missing parents; nothing happens when it exists."""
    if is_remote(path):
        _gfile().makedirs(os.fspath(path))
    else:
        os.makedirs(local_path(path), exist_ok=True)


def rmtree(path: PathLike) -> None:
    """Removes the directory ``path`` and everything in it (nothing when it does not exist)."""
    if is_remote(path):
        if _gfile().exists(os.fspath(path)):
            _gfile().rmtree(os.fspath(path))
    else:
        shutil.rmtree(local_path(path), ignore_errors=True)


def rename(src: PathLike, dst: PathLike, overwrite: bool = False) -> None:
    """Renames ``src`` to ``dst``; atomic on one local file system (``os.replace``).

    Raises:
        OutputExistsError (a FileExistsError): a local ``dst`` exists and ``overwrite`` is False.
    """
    if is_remote(src) or is_remote(dst):
        _gfile().rename(os.fspath(src), os.fspath(dst), overwrite=overwrite)
        return
    if not overwrite and os.path.exists(local_path(dst)):
        raise OutputExistsError(dst)
    os.replace(local_path(src), local_path(dst))


def remove(path: PathLike) -> None:
    if is_remote(path):
        _gfile().remove(os.fspath(path))
    else:
        os.remove(local_path(path))


def copy(src: PathLike, dst: PathLike, overwrite: bool = False) -> None:
    """Copies the file ``src`` to ``dst`` (either may be remote).

    Raises:
        OutputExistsError (a FileExistsError): a local ``dst`` exists and ``overwrite`` is False.
    """
    if is_remote(src) or is_remote(dst):
        _gfile().copy(os.fspath(src), os.fspath(dst), overwrite=overwrite)
        return
    if not overwrite and os.path.exists(local_path(dst)):
        raise OutputExistsError(dst)
    shutil.copyfile(local_path(src), local_path(dst))


def local_copy(path: PathLike, scratch_dir: PathLike) -> str:
    """``path`` itself when local, else a copy of it inside ``scratch_dir``."""
    if not is_remote(path):
        return local_path(path)
    path = os.fspath(path)
    target = os.path.join(os.fspath(scratch_dir), os.path.basename(path.rstrip("/")))
    _gfile().copy(path, target, overwrite=True)
    return target


# ---------------------------------------------------------------------------------- atomic outputs
@contextlib.contextmanager
def atomic_write(path: PathLike, mode: str = "w") -> Iterator[IO]:
    """Yields a file open for writing whose content appears at ``path`` only if the block
    succeeds, replacing any file there; a reader sees the old file or the whole new one.

    The file is written to a sibling ``<path>.tmp-<random hex>`` and renamed into place; if the
    block (or the rename) fails, the temporary file is removed and ``path`` is untouched.
    Locally the rename is ``os.replace``, atomic. On ``gs://`` a rename is a copy then a delete,
    not atomic, but an object appears only once fully written, so ``path`` is never partial
    there either; a process killed between the copy and the delete leaves the temporary object.

    Args:
        path: the output file, local or remote.
        mode: ``"w"`` (text, UTF-8) or ``"wb"`` (bytes).
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes a new file: mode must be 'w' or 'wb', got {mode!r}")
    path = os.fspath(path)
    temp = f"{path}.tmp-{uuid.uuid4().hex}"
    renamed = False
    try:
        with open_file(temp, mode) as f:
            yield f
        rename(temp, path, overwrite=True)
        renamed = True
    finally:
        if not renamed and exists(temp):
            remove(temp)


def write_json(path: PathLike, value) -> None:
    """Writes ``value`` as indented JSON (UTF-8, non-ASCII kept) through ``atomic_write``: the
    file never appears half-written."""
    with atomic_write(path) as f:
        f.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[str]:
    """Yields a scratch file path (same ending as ``path``, e.g. ``.keras``) for a writer that
    opens the path itself (Keras' ``save``); if the block succeeds the file replaces ``path``
    whole, else it is removed and ``path`` is left as it was.

    Locally the scratch file is a sibling ``.<name>.tmp-<random><ending>`` renamed into place
    in one step (``os.replace``), with the permissions a plain ``open`` would give. For remote
    paths (gs://) it is a local file, copied to a temporary name there and renamed.
    """
    remote = is_remote(path)
    path = os.fspath(path) if remote else local_path(path)
    ending = os.path.splitext(path)[1]
    if remote:
        scratch_dir = tempfile.mkdtemp(prefix="keras_bert_out-")
        scratch = os.path.join(scratch_dir, "file" + ending)
    else:
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        scratch_dir = None
        scratch = os.path.join(parent, f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}{ending}")
    try:
        yield scratch
        if remote:
            temp = f"{path}.tmp-{uuid.uuid4().hex}"
            _gfile().copy(scratch, temp, overwrite=True)
            rename(temp, path, overwrite=True)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(scratch, 0o666 & ~umask)
            os.replace(scratch, path)
    finally:
        if os.path.exists(scratch):
            os.remove(scratch)
        if scratch_dir is not None:
            shutil.rmtree(scratch_dir, ignore_errors=True)


@contextlib.contextmanager
def atomic_output_dir(dst: PathLike, overwrite: bool = False) -> Iterator[str]:
    """Yields a local scratch directory whose files appear at ``dst`` only if the block succeeds.

    Locally the scratch directory is a sibling of ``dst`` renamed into place in one step
    (replacing an existing ``dst`` when ``overwrite``). For remote paths (gs://) each file is
    copied to a temporary name and renamed, so no file ever appears under its final name
    half-written (the directory as a whole fills up file by file). If the block raises, nothing
    is left behind.

    Raises:
        OutputExistsError (a FileExistsError): ``dst`` exists and ``overwrite`` is False.
    """
    remote = is_remote(dst)
    dst = os.fspath(dst) if remote else local_path(dst)
    if exists(dst) and not overwrite:
        raise OutputExistsError(dst)
    if remote:
        scratch = tempfile.mkdtemp(prefix="keras_bert_out-")
    else:
        parent = os.path.dirname(os.path.abspath(dst))
        os.makedirs(parent, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix=f".{os.path.basename(dst)}.tmp-", dir=parent)
    try:
        yield scratch
        ordinary_permissions(scratch)
        if remote:
            _upload(scratch, dst)
        elif os.path.exists(dst):
            backup = f"{scratch}.old"
            os.replace(dst, backup)
            os.replace(scratch, dst)
            shutil.rmtree(backup, ignore_errors=True)
        else:
            os.replace(scratch, dst)
    finally:
        if os.path.exists(scratch):
            shutil.rmtree(scratch, ignore_errors=True)


def ordinary_permissions(root: PathLike) -> None:
    """Gives ``root`` and everything under it the permissions a plain mkdir/open would (0755 and
    0644 under the usual umask 022): scratch directories from ``tempfile`` are 0700, and a
    server running as another user (TF Serving's container over a mounted volume) could not read
    them."""
    root = os.fspath(root)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(root, 0o777 & ~umask)
    for parent, directories, files in os.walk(root):
        for name in directories:
            os.chmod(os.path.join(parent, name), 0o777 & ~umask)
        for name in files:
            os.chmod(os.path.join(parent, name), 0o666 & ~umask)


def _upload(local_dir: str, dst: str) -> None:
    gfile = _gfile()
    gfile.makedirs(dst)
    for root, _, files in os.walk(local_dir):
        rel_root = os.path.relpath(root, local_dir)
        target_root = dst if rel_root == "." else f"{dst.rstrip('/')}/{rel_root}"
        gfile.makedirs(target_root)
        for name in files:
            target = f"{target_root.rstrip('/')}/{name}"
            temp = f"{target}.tmp-{uuid.uuid4().hex}"
            gfile.copy(os.path.join(root, name), temp, overwrite=True)
            gfile.rename(temp, target, overwrite=True)
            logger.debug("wrote %s", target)


def read_text_lines(path: PathLike) -> list[str]:
    """The lines of a UTF-8 file (local or gs://), without line ends and a leading BOM.

    Raises:
        FileNotFoundError: no such file.
        DataError: the file is not UTF-8 (with the line).
    """
    if not exists(path):
        raise FileNotFoundError(f"input file {path!r} does not exist")
    with open_file(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"invalid UTF-8 ({e.reason}); save the file as UTF-8", path,
                        data[:e.start].count(b"\n") + 1) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]
