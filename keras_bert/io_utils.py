"""File helpers shared by the library: atomic output directories that work locally and on gs://."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import uuid
from typing import Iterator

import tensorflow as tf

from keras_bert.fileio import (OutputExistsError, check_writable_location,  # noqa: F401
                               is_remote, local_path)

logger = logging.getLogger(__name__)


def is_local(path: str) -> bool:
    """Local, as fileio decides it: a plain path or ``file://...`` (never through tf.io.gfile's
    remote file systems)."""
    return not is_remote(path)


@contextlib.contextmanager
def atomic_output_dir(dst: str, overwrite: bool = False) -> Iterator[str]:
    """Yields a local scratch directory whose files appear at ``dst`` only if the block succeeds.

    Locally the scratch directory is a sibling of ``dst`` renamed into place in one step. For
    remote paths (gs://) each file is copied to a temporary name and renamed, so no file ever
    appears under its final name half-written. If the block raises, nothing is left behind.

    Raises:
        OutputExistsError (a FileExistsError): ``dst`` exists and ``overwrite`` is False.
    """
    if is_local(dst):
        dst = local_path(dst)
    if tf.io.gfile.exists(dst) and not overwrite:
        raise OutputExistsError(dst)
    if is_local(dst):
        parent = os.path.dirname(os.path.abspath(dst))
        os.makedirs(parent, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix=f".{os.path.basename(dst)}.tmp-", dir=parent)
    else:
        scratch = tempfile.mkdtemp(prefix="keras_bert_out-")
    try:
        yield scratch
        ordinary_permissions(scratch)
        if is_local(dst):
            if os.path.exists(dst):
                backup = f"{scratch}.old"
                os.replace(dst, backup)
                os.replace(scratch, dst)
                shutil.rmtree(backup, ignore_errors=True)
            else:
                os.replace(scratch, dst)
        else:
            _upload(scratch, dst)
    finally:
        if os.path.exists(scratch):
            shutil.rmtree(scratch, ignore_errors=True)


def ordinary_permissions(root: str) -> None:
    """Gives ``root`` and everything under it the permissions a plain mkdir/open would (0755 and
    0644 under the usual umask 022): scratch directories from ``tempfile`` are 0700, and a
    server running as another user (TF Serving's container over a mounted volume) could not read
    them."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(root, 0o777 & ~umask)
    for parent, directories, files in os.walk(root):
        for name in directories:
            os.chmod(os.path.join(parent, name), 0o777 & ~umask)
        for name in files:
            os.chmod(os.path.join(parent, name), 0o666 & ~umask)


def _upload(local_dir: str, dst: str) -> None:
    tf.io.gfile.makedirs(dst)
    for root, _, files in os.walk(local_dir):
        rel_root = os.path.relpath(root, local_dir)
        target_root = dst if rel_root == "." else f"{dst.rstrip('/')}/{rel_root}"
        tf.io.gfile.makedirs(target_root)
        for name in files:
            target = f"{target_root.rstrip('/')}/{name}"
            temp = f"{target}.tmp-{uuid.uuid4().hex}"
            tf.io.gfile.copy(os.path.join(root, name), temp, overwrite=True)
            tf.io.gfile.rename(temp, target, overwrite=True)
            logger.debug("wrote %s", target)


def local_copy(path: str, scratch_dir: str) -> str:
    """``path`` itself when local, else a copy of it inside ``scratch_dir``."""
    if is_local(path):
        return local_path(path)
    target = os.path.join(scratch_dir, os.path.basename(path.rstrip("/")))
    tf.io.gfile.copy(path, target, overwrite=True)
    return target


def join(*parts: str) -> str:
    """os.path.join that keeps gs:// prefixes intact."""
    head, *rest = parts
    for part in rest:
        head = head.rstrip("/") + "/" + part.lstrip("/") if "://" in head else os.path.join(head, part)
    return head
