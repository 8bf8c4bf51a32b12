"""The `keras-bert` command: thin wrappers that parse flags, call the library and report.

Each subcommand lives in the module that owns its work and registers itself through an
``add_parser(subparsers)`` function listed in COMMANDS; ``main`` dispatches to the ``run``
callable the parser stores in ``args.run``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# module path -> the function that adds its subparser(s).
COMMANDS = (
    "keras_bert.checkpoints.cli",
    "keras_bert.training.cli",
    "keras_bert.training.finetune_cli",
    "keras_bert.data.cli",
    "keras_bert.export.cli",
    "keras_bert.tokenization.cli",
    "keras_bert.quickstart",
)
# subcommand -> the module of COMMANDS that adds it. With a known subcommand first on the command
# line, only its module is imported: `keras-bert pretraining-data` never loads TensorFlow.
COMMAND_MODULES = {
    "convert": "keras_bert.checkpoints.cli", "info": "keras_bert.checkpoints.cli",
    "pretrain": "keras_bert.training.cli",
    "finetune": "keras_bert.training.finetune_cli",
    "extract-features": "keras_bert.training.finetune_cli",
    "pretraining-data": "keras_bert.data.cli",
    "export": "keras_bert.export.cli", "predict": "keras_bert.export.cli",
    "vocab": "keras_bert.tokenization.cli",
    "quickstart": "keras_bert.quickstart",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `keras-bert` parser: all subcommands, or only `command`'s module's."""
    parser = argparse.ArgumentParser(
        prog="keras-bert",
        description="BERT for TensorFlow / Keras 3: tokenization, pretraining data, pretraining, "
                    "fine-tuning, checkpoint conversion, export and serving.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    modules = [COMMAND_MODULES[command]] if command in COMMAND_MODULES else COMMANDS
    for module_name in modules:
        importlib.import_module(module_name).add_parser(subparsers)
    if command is None:
        subparsers.add_parser(SERVE, add_help=False,
                              help="run the local model server (TF Serving's gRPC and REST APIs; "
                                   "tensorflow_model_server's flags, see `keras-bert serve "
                                   "--help`)")
    return parser


SERVE = "serve"  # runs serving.server's main with the rest of the command line


def _subcommand(argv: list[str]) -> str | None:
    """The subcommand named on the command line (after the global -v), if any."""
    for arg in argv:
        if arg in ("-v", "--verbose"):
            continue
        return arg if arg in COMMAND_MODULES or arg == SERVE else None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if _subcommand(argv) == SERVE:
        from serving.server import main as serve
        return serve(argv[argv.index(SERVE) + 1:], prog="keras-bert serve")
    parser = build_parser(_subcommand(argv))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.run(args) or 0)
    except (ValueError, OSError) as e:  # OSError: missing, unwritable or existing paths
        print(f"keras-bert {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
