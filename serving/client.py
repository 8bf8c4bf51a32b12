"""Deprecated: ``python -m serving.client`` from a checkout still runs ``keras-bert predict`` for
this release, with a warning. Run ``keras-bert predict`` (or ``python -m keras_bert.cli predict``)
with the same arguments."""

from __future__ import annotations

import logging
import sys
import warnings

from keras_bert import cli

DEPRECATION = ("`python -m serving.client` is deprecated and will be removed in the next "
               "release; run `keras-bert predict` with the same arguments")


def main(argv: list[str] | None = None) -> int:
    warnings.warn(DEPRECATION, DeprecationWarning, stacklevel=2)
    logging.getLogger(__name__).warning(DEPRECATION)
    return cli.main(["predict", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
