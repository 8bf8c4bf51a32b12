"""`keras-bert convert` and `keras-bert info`: checkpoint conversion and inspection."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from keras_bert.checkpoints import loader
from keras_bert.checkpoints.names import is_ignored_google_name, is_ignored_hf_key
from keras_bert.config import BertConfig


def add_parser(subparsers) -> None:
    convert = subparsers.add_parser(
        "convert", help="convert a checkpoint between Google TF1, Hugging Face and keras-bert",
        description="Convert a BERT checkpoint. Heads (cls/...) are kept when the source has "
                    "them. Nothing is written when the conversion fails.")
    convert.add_argument("--from", dest="from_format", choices=loader.FORMATS,
                         help="source format (detected when omitted)")
    convert.add_argument("--to", dest="to_format", choices=loader.FORMATS, required=True,
                         help="the format to write")
    convert.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    convert.add_argument("src", metavar="SRC")
    convert.add_argument("dst", metavar="DST")
    convert.set_defaults(run=run_convert)

    info = subparsers.add_parser(
        "info", help="print a checkpoint's config, parameter count and variables",
        description="Print the config, parameter count and variable list of a checkpoint "
                    "(any format) or of a named preset architecture.")
    info.add_argument("path", metavar="PATH_OR_PRESET")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.set_defaults(run=run_info)


def run_convert(args: argparse.Namespace) -> int:
    from keras_bert.models import checkpoint_io
    checkpoint_io.convert(args.src, args.dst, args.to_format, from_format=args.from_format,
                          overwrite=args.overwrite)
    print(f"wrote {args.to_format} checkpoint {args.dst}")
    return 0


def describe(path: str) -> dict:
    """{format, config, parameters, variables: [[name, shape], ...]} for a checkpoint or preset."""
    if path in BertConfig.presets():
        from keras_bert.models import BertEncoder
        model = BertEncoder.from_preset(path, random_weights=True)
        variables = [(w.path, tuple(w.shape)) for w in model.weights]
        return {"format": "preset", "config": BertConfig.preset(path).to_google_dict(),
                "parameters": int(model.count_params()), "variables": variables}
    fmt = loader.detect_format(path)
    if fmt == "keras":
        from keras_bert.models import checkpoint_io
        model = checkpoint_io.load_model(path, fmt)
        encoder = getattr(model, "encoder", model)
        variables = [(w.path, tuple(w.shape)) for w in model.weights]
        config = encoder.bert_config.to_google_dict()
    else:
        config_obj, values, _, fmt = loader.read_checkpoint(path, fmt)
        ignored = is_ignored_hf_key if fmt == "hf" else is_ignored_google_name
        shape_of = (values.shape if hasattr(values, "shape")
                    else lambda name: tuple(np.shape(values[name])))
        variables = [(name, shape_of(name)) for name in sorted(values) if not ignored(name)]
        config = config_obj.to_google_dict()
    parameters = int(sum(int(np.prod(shape)) for _, shape in variables))
    return {"format": fmt, "config": config, "parameters": parameters,
            "variables": [[name, list(shape)] for name, shape in variables]}


def run_info(args: argparse.Namespace) -> int:
    info = describe(args.path)
    if args.json:
        json.dump(info, sys.stdout, indent=2)
        print()
        return 0
    print(f"{args.path}  ({info['format']})")
    print("config:")
    for key, value in info["config"].items():
        print(f"  {key}: {value}")
    print(f"parameters: {info['parameters']:,}")
    print(f"variables ({len(info['variables'])}):")
    for name, shape in info["variables"]:
        print(f"  {name}  {list(shape)}")
    return 0
