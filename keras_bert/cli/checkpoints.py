"""`keras-bert convert` and `keras-bert info`: checkpoint conversion and inspection, task heads
included."""

from __future__ import annotations

import argparse
import json
import sys

from keras_bert.checkpoints import FORMATS, READ_FORMATS


def add_parser(subparsers) -> None:
    convert = subparsers.add_parser(
        "convert", help="convert a checkpoint (with its head) between Google TF1, Hugging Face "
                        "and keras-bert",
        description="Convert a BERT checkpoint: an encoder, a pretraining model or a fine-tuned "
                    "task model, whose head is kept (a Hugging Face BertFor* class and its "
                    "labels, Google's run_classifier.py and run_squad.py heads, a "
                    "sentence-transformers folder); a keras-hub preset converts too. A head "
                    "the target format has no name for is an error. Nothing is written when "
                    "the conversion fails.")
    convert.add_argument("--from", dest="from_format", choices=READ_FORMATS,
                         help="source format (detected when omitted)")
    convert.add_argument("--to", dest="to_format", choices=FORMATS, required=True,
                         help="the format to write")
    convert.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    convert.add_argument("src", metavar="SRC")
    convert.add_argument("dst", metavar="DST")
    convert.set_defaults(run=run_convert)

    info = subparsers.add_parser(
        "info", help="print a checkpoint's config, head, parameter count and variables",
        description="Print the config, the task head (task, sizes, label names), the "
                    "parameter count and the variable list of a checkpoint (any format) or of "
                    "a named preset architecture.")
    info.add_argument("path", metavar="PATH_OR_PRESET")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.set_defaults(run=run_info)


def run_convert(args: argparse.Namespace) -> int:
    from keras_bert.tasks.checkpoint_models import convert_checkpoint

    model = convert_checkpoint(args.src, args.dst, args.to_format, args.from_format,
                               args.overwrite)
    print(f"wrote the {type(model).__name__} as a {args.to_format} checkpoint to {args.dst}")
    return 0


def describe(path: str) -> dict:
    """{format, config, head, parameters, variables: [[name, shape], ...]} for a checkpoint or
    a named preset; ``head`` is None or {task, source, num_labels, label_names, problem_type,
    pooling, normalize}."""
    import numpy as np

    from keras_bert.checkpoints.names import is_ignored_google_name, is_ignored_hf_key
    from keras_bert.checkpoints.reading import read_checkpoint
    from keras_bert.config import BertConfig

    if path in BertConfig.presets():
        from keras_bert.models import BertEncoder
        model = BertEncoder.from_architecture(path)
        variables = [(w.path, tuple(w.shape)) for w in model.weights]
        return {"format": "preset", "config": BertConfig.preset(path).to_google_dict(),
                "head": None, "parameters": int(model.count_params()),
                "variables": [[name, list(shape)] for name, shape in variables]}
    checkpoint = read_checkpoint(path)
    if checkpoint.model is not None:
        variables = [(w.path, tuple(w.shape)) for w in checkpoint.model.weights]
    else:
        values = checkpoint.values
        ignored = is_ignored_hf_key if checkpoint.naming == "hf" else is_ignored_google_name
        shape_of = (values.shape if hasattr(values, "shape")
                    else lambda name: tuple(np.shape(values[name])))
        variables = [(name, shape_of(name)) for name in sorted(values) if not ignored(name)]
    head = checkpoint.head
    head_info = None if head is None else {
        "task": head.task, "source": head.source, "num_labels": head.num_labels,
        "label_names": head.label_names, "problem_type": head.problem_type,
        "pooling": head.pooling, "normalize": head.normalize}
    parameters = int(sum(int(np.prod(shape)) for _, shape in variables))
    return {"format": checkpoint.format, "config": checkpoint.config.to_google_dict(),
            "head": head_info, "parameters": parameters,
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
    head = info["head"]
    if head is None:
        print("head: none (an encoder)")
    else:
        details = [f"{key}: {head[key]}" for key in ("num_labels", "problem_type", "pooling")
                   if head[key] is not None]
        if head["label_names"]:
            details.append(f"labels: {', '.join(head['label_names'])}")
        if head["task"] == "embedding":
            details.append(f"normalize: {head['normalize']}")
        print(f"head: {head['task']} ({'; '.join(details) or 'no labels'}), from "
              f"{head['source']}")
    print(f"parameters: {info['parameters']:,}")
    print(f"variables ({len(info['variables'])}):")
    for name, shape in info["variables"]:
        print(f"  {name}  {list(shape)}")
    return 0
