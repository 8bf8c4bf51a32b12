"""The `keras-bert` command: thin wrappers that parse flags, call the library and report.

Each subcommand lives in the module that owns its work and registers itself through an
``add_parser(subparsers)`` function listed in COMMANDS; ``main`` dispatches to the ``run``
callable the parser stores in ``args.run``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
import tempfile

from keras_bert.fileio import OutputExistsError

# subcommand -> the module that adds its subparser (an ``add_parser(subparsers)`` function). With
# a known subcommand first on the command line, only its module is imported: `keras-bert
# pretraining-data` never loads TensorFlow.
COMMAND_MODULES = {
    "vocab": "keras_bert.tokenization.cli",
    "pretraining-data": "keras_bert.pretraining_data.cli",
    "pretrain": "keras_bert.pretraining.cli",
    "finetune": "keras_bert.training.finetune_cli",
    "extract-features": "keras_bert.tasks.embedding.cli",
    "convert": "keras_bert.checkpoints.cli", "info": "keras_bert.checkpoints.cli",
    "export": "keras_bert.export.cli", "predict": "keras_bert.export.cli",
    "quickstart": "keras_bert.quickstart",
}
# Each module once, in the order --help lists them.
COMMANDS = tuple(dict.fromkeys(COMMAND_MODULES.values()))


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `keras-bert` parser: all subcommands, or only `command`'s module's."""
    parser = argparse.ArgumentParser(
        prog="keras-bert",
        description="BERT for TensorFlow / Keras 3: tokenization, pretraining data, pretraining, "
                    "fine-tuning, checkpoint conversion, export and serving.")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log at DEBUG level and show TensorFlow's start-up and internal "
                             "logs (anywhere on the command line)")
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


SERVE = "serve"  # runs keras_bert.serving.server's main with the rest of the command line
VERBOSE_FLAGS = ("-v", "--verbose")
# Commands that never import TensorFlow.
TENSORFLOW_FREE = ("pretraining-data",)


@contextlib.contextmanager
def _stderr_captured():
    """Sends file descriptor 2 (where C++ libraries write) to a temporary file for the block;
    if the block raises, what was captured is written out before the error propagates."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def start_tensorflow_quietly() -> None:
    """Imports TensorFlow and initialises its devices without the start-up lines it writes from
    C++ (the oneDNN notice, CUDA stub and CPU-feature lines, and the cuInit error on machines
    without a GPU), and routes its Python logs through the root logger once, at WARNING.
    ``keras-bert -v`` skips this and shows everything."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    with _stderr_captured():
        import tensorflow as tf
        tf.config.list_physical_devices()
    quiet_python_logs()


def quiet_python_logs(level: int = logging.WARNING) -> None:
    """TensorFlow's and absl's Python loggers at ``level`` (their INFO lines, such as renamed
    function inputs and "Assets written to", are internals), each line printed once."""
    for name in ("tensorflow", "absl"):
        logging.getLogger(name).setLevel(level)
    tf_logger = logging.getLogger("tensorflow")
    for handler in list(tf_logger.handlers):  # TF's own handler duplicates the root's lines
        tf_logger.removeHandler(handler)


def _subcommand(argv: list[str]) -> str | None:
    """The subcommand named on the command line (after the global -v), if any."""
    for arg in argv:
        if arg in VERBOSE_FLAGS:
            continue
        return arg if arg in COMMAND_MODULES or arg == SERVE else None
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _subcommand(argv)
    # -v anywhere on the line (before or after the subcommand) shows everything.
    verbose = any(arg in VERBOSE_FLAGS for arg in argv)
    if not verbose and command not in TENSORFLOW_FREE and "--help" not in argv \
            and "-h" not in argv:
        start_tensorflow_quietly()
    if command == SERVE:
        from keras_bert.serving.server import main as serve
        rest = argv[argv.index(SERVE) + 1:]
        return serve([a for a in rest if a not in VERBOSE_FLAGS], prog="keras-bert serve")
    if verbose:
        argv = [a for a in argv if a not in VERBOSE_FLAGS]
    parser = build_parser(command)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not verbose:
        quiet_python_logs()
    try:
        return int(args.run(args) or 0)
    except OutputExistsError as e:
        hint = ("pass --overwrite" if hasattr(args, "overwrite")
                else "choose another path")
        print(f"keras-bert {args.command}: error: output {e.path!r} already exists; remove it "
              f"or {hint}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as e:  # OSError: missing, unwritable or existing paths
        print(f"keras-bert {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
