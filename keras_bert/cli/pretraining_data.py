"""`keras-bert pretraining-data`: the flags of tfrecords/create_pretraining_data.py, shared by both.

The flags and defaults are those of google-research/bert's create_pretraining_data.py, plus
--output_dir/--num_shards, --num_workers, --gzip, --v2_feature_names and --window_bytes.
Booleans accept `--flag`, `--flag=false`, `--no_flag` and absl's `--noflag`.
"""

from __future__ import annotations

import argparse

from keras_bert.cli.flags import add_bool_flag, add_lower_case_flag
from keras_bert.pretraining_data.writer import PretrainingDataConfig, create_pretraining_data
from keras_bert.pretraining_data.worker import InstanceOptions

DESCRIPTION = ("Write BERT pretraining TFRecords (masked LM + next sentence prediction) from "
               "text with one sentence per line and a blank line between documents.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the pretraining-data flags to `parser`."""
    defaults = InstanceOptions()
    parser.add_argument("--input_file", required=True,
                        help="input text: a comma-separated list of files or globs, local or gs://")
    parser.add_argument("--output_file", default="",
                        help="comma-separated output TFRecord files, filled round-robin")
    parser.add_argument("--output_dir", default="",
                        help="instead of --output_file: write --num_shards files here")
    parser.add_argument("--num_shards", type=int, default=1,
                        help="number of files in --output_dir (default: 1)")
    parser.add_argument("--vocab_file", required=True,
                        help="the WordPiece vocabulary the model is trained with")
    add_lower_case_flag(parser, default=True)
    add_bool_flag(parser, "do_whole_word_mask", False,
                  "mask all WordPieces of a word together")
    parser.add_argument("--max_seq_length", type=int, default=defaults.max_seq_length,
                        help="maximum sequence length (default: %(default)s)")
    parser.add_argument("--max_predictions_per_seq", type=int,
                        default=defaults.max_predictions_per_seq,
                        help="maximum masked-LM predictions per sequence (default: %(default)s)")
    parser.add_argument("--random_seed", type=int, default=defaults.random_seed,
                        help="random seed (default: %(default)s)")
    parser.add_argument("--dupe_factor", type=int, default=defaults.dupe_factor,
                        help="times the input is used, each time with different masks "
                             "(default: %(default)s)")
    parser.add_argument("--masked_lm_prob", type=float, default=defaults.masked_lm_prob,
                        help="share of tokens to mask (default: %(default)s)")
    parser.add_argument("--short_seq_prob", type=float, default=defaults.short_seq_prob,
                        help="probability of a shorter target length (default: %(default)s)")
    parser.add_argument("--num_workers", type=int, default=0,
                        help="worker processes; 0 = one per CPU core (default: 0). The output "
                             "does not depend on it")
    add_bool_flag(parser, "gzip", False, "GZIP-compress the TFRecord files")
    add_bool_flag(parser, "v2_feature_names", False,
                  "name input_ids/segment_ids input_word_ids/input_type_ids (TF Model Garden)")
    parser.add_argument("--window_bytes", type=int, default=PretrainingDataConfig.window_bytes,
                        help="text per window of documents: bounds memory; random next "
                             "segments come from the same window (default: %(default)s)")
    add_bool_flag(parser, "progress", True, "show a progress bar on stderr")


def config_from_args(args: argparse.Namespace) -> PretrainingDataConfig:
    """The library configuration the parsed flags describe."""
    return PretrainingDataConfig(
        input_file=args.input_file, vocab_file=args.vocab_file, output_file=args.output_file,
        output_dir=args.output_dir, num_shards=args.num_shards, num_workers=args.num_workers,
        gzip=args.gzip, window_bytes=args.window_bytes, do_lower_case=args.do_lower_case,
        instance=InstanceOptions(
            max_seq_length=args.max_seq_length,
            max_predictions_per_seq=args.max_predictions_per_seq,
            masked_lm_prob=args.masked_lm_prob, short_seq_prob=args.short_seq_prob,
            dupe_factor=args.dupe_factor, random_seed=args.random_seed,
            do_whole_word_mask=args.do_whole_word_mask,
            v2_feature_names=args.v2_feature_names))


def run(args: argparse.Namespace) -> int:
    """Writes the TFRecords; the library logs the end-of-run summary."""
    create_pretraining_data(config_from_args(args), progress=args.progress)
    return 0


def add_parser(subparsers) -> None:
    """Registers `keras-bert pretraining-data`."""
    parser = subparsers.add_parser("pretraining-data", description=DESCRIPTION)
    add_arguments(parser)
    parser.set_defaults(run=run)
