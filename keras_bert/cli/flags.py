"""Flags shared by the `keras-bert` commands, spelled one way everywhere (pure Python).

Booleans follow Google's absl scripts: ``--flag``, ``--flag=true|false`` and absl's ``--noflag``
all work, and ``--no_flag`` is the documented negative form.
"""

from __future__ import annotations

import argparse

TRUE = ("1", "true", "t", "yes", "y")
FALSE = ("0", "false", "f", "no", "n")


def parse_bool(value: str) -> bool:
    lowered = value.lower()
    if lowered in TRUE:
        return True
    if lowered in FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def add_bool_flag(parser, name: str, default: bool | None, help_text: str,
                  default_text: str = "read from the checkpoint") -> None:
    """Adds ``--NAME[=BOOL]`` and ``--no_NAME`` (plus absl's hidden ``--noNAME``, as users of
    Google's scripts type it) to ``parser``."""
    shown_default = default_text if default is None else str(default).lower()
    parser.add_argument(f"--{name}", dest=name, type=parse_bool, nargs="?", const=True,
                        default=default, metavar="BOOL",
                        help=f"{help_text} (default: {shown_default}; --no_{name} for false)")
    for negative in (f"no_{name}", f"no{name}"):
        parser.add_argument(f"--{negative}", dest=name, action="store_false",
                            default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def add_lower_case_flag(parser, default: bool | None = None) -> None:
    """Google's ``--do_lower_case``: the casing of the vocabulary, ``args.do_lower_case``."""
    add_bool_flag(parser, "do_lower_case", default,
                  "lower-case and strip accents before WordPiece, as an uncased vocabulary needs")


def int_list(text: str) -> list[int]:
    """An argparse type: comma-separated integers."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def check_inputs_exist(args: argparse.Namespace, *names: str) -> None:
    """FileNotFoundError naming the first flag among ``names`` whose local path does not exist
    (remote paths, such as gs://, are left to the command), so that a mistyped path fails at
    once, before TensorFlow loads."""
    import os

    from keras_bert.fileio import is_remote
    for name in names:
        value = getattr(args, name, None)
        if value and not is_remote(value) and not os.path.exists(value):
            raise FileNotFoundError(f"--{name} {value!r} does not exist")


def check_checkpoint(args: argparse.Namespace, name: str):
    """The encoder architecture (a ``BertConfig``) the checkpoint of flag ``name`` states in
    its config file, before TensorFlow loads (``checkpoints.formats.stored_config``); None
    where the flag is not given, the path is remote or only the weights' file states it.
    ValueError (FileNotFoundError) naming the flag for a path that holds no BERT checkpoint:
    another model's config.json, or none of the files a checkpoint has."""
    from keras_bert.checkpoints.formats import stored_config
    from keras_bert.fileio import is_remote
    value = getattr(args, name, None)
    if not value or is_remote(value):
        return None
    try:
        return stored_config(value)
    except (ValueError, FileNotFoundError) as e:
        raise type(e)(f"--{name}: {e}") from None
