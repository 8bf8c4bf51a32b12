"""Argument names that changed: configs saved under the old names still load."""

import logging

logger = logging.getLogger(__name__)


def take_renamed(kwargs: dict, layer: str, old: str, new: str, value, default):
    """``value`` of argument ``new``, or the value passed under its former name ``old``.

    Pops ``old`` from ``kwargs`` (a layer's ``**kwargs``), so configs saved before the rename
    (and code that still uses the old name) keep working; logs the rename once per call.
    Raises ValueError if both names were given.
    """
    if old not in kwargs:
        return value
    legacy = kwargs.pop(old)
    if value != default:
        raise ValueError(f"{layer}: give {new}= only ({old}= is its former name)")
    logger.warning("%s: argument %r is now called %r", layer, old, new)
    return legacy
