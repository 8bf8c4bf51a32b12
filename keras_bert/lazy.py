"""Package attributes that load their module on first use (PEP 562), so that importing a package,
as the command line does to read a command's flags, loads no TensorFlow."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_attributes(package: str, attributes: Mapping[str, str]
                    ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for ``attributes`` ({name: the module
    that defines it}): each name is imported from its module when first used, then kept.

    In the package's ``__init__``::

        __getattr__, __dir__ = lazy_attributes(__name__, {"export_model":
                                                          "keras_bert.export.saved_model"})
    """
    def __getattr__(name: str):
        if name not in attributes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(attributes[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(attributes))

    return __getattr__, __dir__
