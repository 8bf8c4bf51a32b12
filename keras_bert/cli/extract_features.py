"""`keras-bert extract-features`: per-token layer outputs, as google-research/bert's
extract_features.py writes them."""

from __future__ import annotations

import argparse

from keras_bert.cli.flags import add_lower_case_flag, check_inputs_exist, int_list
from keras_bert.tasks.embedding.extract_features import BATCH_SIZE


def add_parser(subparsers) -> None:
    features = subparsers.add_parser(
        "extract-features",
        description="For each input line (text, or 'text_a ||| text_b'), write one JSON line "
                    "with every token's values at the requested layers, in "
                    "google-research/bert extract_features.py's layout.")
    features.add_argument("--init_checkpoint", required=True,
                          help="Google TF1 directory, Hugging Face directory, or a keras-bert "
                               "checkpoint (with vocab.txt)")
    features.add_argument("--input_file", required=True,
                          help="text, one example per line; 'text_a ||| text_b' for a pair")
    features.add_argument("--output_file", required=True,
                          help="the JSON Lines output (appears only when complete)")
    features.add_argument("--layers", type=int_list, default=[-1, -2, -3, -4],
                          help="comma-separated layer indexes, negative from the top "
                               "(default: -1,-2,-3,-4)")
    features.add_argument("--max_seq_length", type=int, default=128,
                          help="longer inputs are truncated, pairs as Google truncates them "
                               "(default: %(default)s)")
    features.add_argument("--batch_size", type=int, default=BATCH_SIZE,
                          help="examples per forward pass (default: %(default)s)")
    add_lower_case_flag(features)
    features.add_argument("--no_progress", dest="progress", action="store_false",
                          help="no progress bar")
    features.set_defaults(run=run_extract_features_command,
                          check=lambda args: check_inputs_exist(args, "init_checkpoint",
                                                                "input_file"))


def run_extract_features_command(args: argparse.Namespace) -> int:
    from keras_bert.tasks.embedding.extract_features import extract_features
    count = extract_features(args.init_checkpoint, args.input_file, args.output_file,
                             layers=args.layers, max_seq_length=args.max_seq_length,
                             batch_size=args.batch_size, lower_case=args.do_lower_case,
                             progress=args.progress)
    print(f"wrote features of {count} examples to {args.output_file}")
    return 0
