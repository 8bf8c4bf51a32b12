"""Deprecated: ``python -m serving.server`` from a checkout still starts the local model server for
this release, with a warning. The server is ``keras_bert.serving`` (installed with the package):
run ``keras-bert serve`` with the same flags."""

from __future__ import annotations

import logging
import sys
import warnings

from keras_bert.serving import server

DEPRECATION = ("`python -m serving.server` is deprecated and will be removed in the next "
               "release; run `keras-bert serve` with the same flags")


def main(argv: list[str] | None = None) -> int:
    warnings.warn(DEPRECATION, DeprecationWarning, stacklevel=2)
    logging.getLogger(__name__).warning(DEPRECATION)
    return server.main(argv, prog="python -m serving.server")


if __name__ == "__main__":
    sys.exit(main())
