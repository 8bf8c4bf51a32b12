"""Deprecated: these helpers now live in ``keras_bert.fileio``; this module goes in the next release.

``is_local(path)`` is ``not fileio.is_remote(path)``; every other name is fileio's own.
"""

from __future__ import annotations

import warnings

from keras_bert.fileio import (OutputExistsError, PathLike, atomic_output_dir,
                               check_writable_location, is_remote, join, local_copy, local_path,
                               ordinary_permissions)

__all__ = ["OutputExistsError", "atomic_output_dir", "check_writable_location", "is_local",
           "is_remote", "join", "local_copy", "local_path", "ordinary_permissions"]

warnings.warn("keras_bert.io_utils is deprecated and will be removed in the next release; use "
              "keras_bert.fileio (same functions; io_utils.is_local(p) is "
              "not fileio.is_remote(p))", DeprecationWarning, stacklevel=2)


def is_local(path: PathLike) -> bool:
    """Local, as fileio decides it: a plain path or ``file://...``."""
    return not is_remote(path)
