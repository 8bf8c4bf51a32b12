"""`keras-bert vocab`: learn a WordPiece vocabulary from text files."""

from __future__ import annotations

import argparse

from keras_bert import fileio
from keras_bert.cli.flags import add_lower_case_flag
from keras_bert.tokenization import vocab as vocab_lib


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "vocab",
        description="Learn a WordPiece vocabulary (tensorflow-text's learner on words split "
                    "exactly as the BERT tokenizer splits them), streaming the input through "
                    "tf.data. The output starts with [PAD], the optional [unusedN] slots, "
                    "[UNK], [CLS], [SEP], [MASK], and has exactly --vocab_size lines.")
    parser.add_argument("--input", nargs="+", required=True, metavar="PATTERN",
                        help="text files or quoted glob patterns ('corpus/*.txt'), local or "
                             "gs://, one sentence or paragraph per line")
    parser.add_argument("--vocab_size", type=int, default=30522,
                        help="number of tokens, reserved ones included (default: 30522)")
    parser.add_argument("--output", required=True, help="the vocab.txt to write")
    add_lower_case_flag(parser, default=True)
    parser.add_argument("--num_unused", type=int, default=0,
                        help="[unusedN] slots after [PAD] (Google's English vocabs have 99)")
    parser.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    parser.add_argument("--no_progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from keras_bert.tokenization.vocab_learning import learn_vocab  # loads TensorFlow
    if fileio.exists(args.output) and not args.overwrite:
        raise FileExistsError(f"{args.output} exists; pass --overwrite to replace it")
    tokens = learn_vocab(args.input, args.vocab_size, lower_case=args.do_lower_case,
                         num_unused=args.num_unused, progress=not args.no_progress)
    vocab_lib.save_vocab(tokens, args.output)
    print(f"wrote {len(tokens)} tokens ({'uncased' if args.do_lower_case else 'cased'}) to "
          f"{args.output}")
    return 0
