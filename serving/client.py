"""Command-line client for TF Serving or this server: ``python -m serving.client --server
host:port --model NAME "text" ...`` prints each text's outputs as one JSON line.

The client itself is ``keras_bert.export.client.ServingClient`` (gRPC or REST); this is the same
command as ``keras-bert predict``, runnable from a checkout without installing the package.
"""

from __future__ import annotations

import argparse
import sys

from keras_bert.export.client import ServingClient, ServingError  # noqa: F401  (re-exported)
from keras_bert.export.cli import add_parser


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serving.client")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["predict", *(sys.argv[1:] if argv is None else argv)])
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
