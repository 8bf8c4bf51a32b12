"""The `keras-bert` command: thin wrappers that parse flags, call the library and report.

Every command-line module is in this package, one module a command (``checkpoints`` has
``convert`` and ``info``, ``predict`` has ``evaluate`` and ``predict``), on top of the library:
no library module imports one (tests/test_layering.py). Each registers its command through an
``add_parser(subparsers)`` function; COMMANDS names that module and the line `keras-bert --help`
lists the command with. ``main`` dispatches to the ``run`` callable the parser stores in
``args.run``, after ``args.check`` where the command sets one (its inputs looked at before
TensorFlow loads). Parsing imports no TensorFlow: `keras-bert --help` imports no command's module,
`keras-bert COMMAND --help` only that command's, and those load TensorFlow when they run.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import logging
import os
import sys
import warnings

from keras_bert import tf_startup
from keras_bert.fileio import OutputExistsError


@dataclasses.dataclass(frozen=True)
class Command:
    """A subcommand: the module whose ``add_parser(subparsers)`` adds its parser, and its line
    in `keras-bert --help`."""
    module: str
    summary: str


SERVE = "serve"  # runs keras_bert.serving.server's main with the rest of the command line
# In the order `keras-bert --help` lists them.
COMMANDS = {
    "vocab": Command("keras_bert.cli.vocab",
                     "learn a WordPiece vocabulary from text files"),
    "pretraining-data": Command("keras_bert.cli.pretraining_data",
                                "write pretraining TFRecords (masked LM + next sentence) from "
                                "text, as google-research/bert does"),
    "pretrain": Command("keras_bert.cli.pretrain",
                        "pretrain BERT (masked LM + next sentence) on pretraining TFRecords"),
    "finetune": Command("keras_bert.cli.finetune",
                        "fine-tune a pretrained BERT on a task and keep the best model"),
    "distill": Command("keras_bert.cli.distill",
                       "distil a fine-tuned classifier into a smaller, faster student"),
    "extract-features": Command("keras_bert.cli.extract_features",
                                "write per-token layer outputs as extract_features.py does"),
    "convert": Command("keras_bert.cli.checkpoints",
                       "convert a checkpoint between Google TF1, Hugging Face and keras-bert"),
    "info": Command("keras_bert.cli.checkpoints",
                    "print a checkpoint's config, parameter count and variables"),
    "export": Command("keras_bert.cli.export",
                      "export a checkpoint as a SavedModel version for TF Serving"),
    "evaluate": Command("keras_bert.cli.predict",
                        "score a trained model on a labelled file, beside always guessing"),
    "predict": Command("keras_bert.cli.predict",
                       "a trained model's predictions for a file or texts (or a served "
                       "model's, with --server)"),
    "quickstart": Command("keras_bert.cli.quickstart",
                          "run the whole path (vocab, data, pretraining, fine-tuning, export, "
                          "serving) in a few minutes"),
    SERVE: Command("keras_bert.serving.server",
                   "run the local model server (TF Serving's gRPC and REST APIs; "
                   "tensorflow_model_server's flags, see `keras-bert serve --help`)"),
}
VERBOSE_FLAGS = ("-v", "--verbose")
# Commands that never import TensorFlow.
TENSORFLOW_FREE = ("pretraining-data",)
# The modules whose Python warnings are TensorFlow's and Keras' internals to our users (tensorflow,
# tensorflow_text, keras, absl... but not keras_bert).
TENSORFLOW_MODULES = r"(tensorflow\w*|keras|tf_keras|absl)(\.|$)"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `keras-bert` parser: with ``command``, its module's full parser; without, every
    command by name and summary (what `keras-bert --help` lists), importing none of them."""
    parser = argparse.ArgumentParser(
        prog="keras-bert",
        description="BERT for TensorFlow / Keras 3: tokenization, pretraining data, pretraining, "
                    "fine-tuning, checkpoint conversion, export and serving.")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log at DEBUG level and show TensorFlow's start-up and internal "
                             "logs and warnings (anywhere on the command line)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if command in COMMANDS and command != SERVE:
        importlib.import_module(COMMANDS[command].module).add_parser(subparsers)
    else:
        for name, entry in COMMANDS.items():
            subparsers.add_parser(name, add_help=False, help=entry.summary)
    return parser


def quiet_tensorflow() -> None:
    """Before TensorFlow loads: its C++ logs at ERROR only (TF_CPP_MIN_LOG_LEVEL=2, unless the
    user set it), its and absl's Python loggers at ERROR, and no Python warnings from
    TensorFlow, Keras or absl. ``keras-bert -v`` skips this and shows everything."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    for name in ("tensorflow", "absl"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=TENSORFLOW_MODULES)


def start_tensorflow_quietly() -> None:
    """``tf_startup.start_tensorflow_quietly`` (TensorFlow imported and its devices listed
    without its C++ start-up lines), then TensorFlow's Python logs left to the root logger's
    handler, each line printed once."""
    tf_startup.start_tensorflow_quietly()
    tf_logger = logging.getLogger("tensorflow")
    for handler in list(tf_logger.handlers):  # TF's own handler duplicates the root's lines
        tf_logger.removeHandler(handler)


def _serve(argv: list[str], verbose: bool) -> int:
    """`keras-bert serve`: tensorflow_model_server's flags, parsed and the models' base paths
    checked (``base_paths.check_base_paths``) before TensorFlow loads."""
    from keras_bert.serving.base_paths import check_base_paths
    from keras_bert.serving.config_files import model_server_config
    from keras_bert.serving.flags import build_flag_parser
    prog = f"keras-bert {SERVE}"
    args = build_flag_parser(prog).parse_args(argv)  # --help and flag errors exit here
    try:  # a base path that holds a checkpoint fails here, before TensorFlow takes seconds
        # (a gs:// path loads TensorFlow to look, and its start-up lines go here)
        with contextlib.nullcontext() if verbose else tf_startup.stderr_captured():
            check_base_paths(model_server_config(args))
    except (ValueError, OSError) as e:
        print(f"model server: error: {e}", file=sys.stderr)
        return 2
    if not verbose:
        start_tensorflow_quietly()
    from keras_bert.serving.server import main as serve
    return serve(argv, prog=prog)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # -v anywhere on the line (before or after the subcommand) shows everything.
    verbose = any(arg in VERBOSE_FLAGS for arg in argv)
    argv = [arg for arg in argv if arg not in VERBOSE_FLAGS]
    command = argv[0] if argv and argv[0] in COMMANDS else None
    if not verbose:
        quiet_tensorflow()
    if command == SERVE:
        return _serve(argv[1:], verbose)
    # A command module that loads TensorFlow as it is imported writes its start-up lines here.
    with contextlib.nullcontext() if verbose else tf_startup.stderr_captured():
        parser = build_parser(command)
    args = parser.parse_args(argv)  # --help and flag errors exit here, before TensorFlow loads
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        # A command's ``check`` (set_defaults(check=...)) looks at its inputs in pure Python,
        # so that a wrong path, column or empty file fails before TensorFlow takes seconds to
        # load.
        if getattr(args, "check", None) is not None:
            args.check(args)
        if not verbose and command not in TENSORFLOW_FREE:
            start_tensorflow_quietly()
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

