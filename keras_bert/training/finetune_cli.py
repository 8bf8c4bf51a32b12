"""`keras-bert finetune` and `keras-bert extract-features`: parse flags, call the library,
report."""

from __future__ import annotations

import argparse
import json

from keras_bert.cli_flags import add_lower_case_flag
from keras_bert.training.distribute import STRATEGIES
from keras_bert.training.finetune_tasks import TASKS


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def _name_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def add_parser(subparsers) -> None:
    finetune = subparsers.add_parser(
        "finetune", help="fine-tune a pretrained BERT on a task and keep the best model",
        description="Fine-tune all layers of a pretrained BERT with model.fit (a custom loop "
                    "under MultiWorkerMirroredStrategy): AdamW, linear warmup then decay, "
                    "evaluation on the dev set after every epoch; the best model goes to "
                    "OUTPUT_DIR/best_model and the scores to OUTPUT_DIR/eval_results.json "
                    "(written by the chief only).")
    io = finetune.add_argument_group("inputs and outputs")
    io.add_argument("--task", choices=TASKS, required=True, help="the task and its head")
    io.add_argument("--init_checkpoint", required=True,
                    help="Google TF1 directory, Hugging Face directory, or a keras-bert checkpoint "
                         "(with vocab.txt)")
    io.add_argument("--train_file", required=True,
                    help="the training data (TSV/CSV/JSONL, CoNLL, SQuAD JSON or SWAG CSV)")
    io.add_argument("--dev_file", help="evaluated after every epoch (omit to keep the last epoch)")
    io.add_argument("--output_dir", required=True,
                    help="best_model/, eval_results.json and predictions go here")
    io.add_argument("--overwrite", action="store_true", help="replace an earlier run's results")
    add_lower_case_flag(io)
    data = finetune.add_argument_group("data")
    data.add_argument("--data_format", default="auto",
                      help="classification/regression files: a GLUE layout (cola, sst-2, mrpc, "
                           "sts-b, qqp, mnli, qnli, rte, wnli), 'jsonl', or 'auto' (JSONL by "
                           "extension, else a TSV/CSV with text, text_pair, label columns)")
    data.add_argument("--labels", help="comma-separated label names, in output order (default: "
                                       "the GLUE layout's or the training file's, sorted)")
    data.add_argument("--numeric_features", type=_name_list, default=[],
                      help="classification/regression: comma-separated numeric columns (JSONL "
                           "keys) joined with the text, normalised with the training set's mean "
                           "and variance; an empty field is missing")
    data.add_argument("--categorical_features", type=_name_list, default=[],
                      help="classification/regression: comma-separated categorical columns, "
                           "embedded with the training set's 100 most frequent values; empty is "
                           "missing, an unseen value unknown (each has a learned embedding)")
    data.add_argument("--max_seq_length", type=int, help="128; 384 for squad")
    data.add_argument("--bucket_lengths", type=_int_list,
                      help="padded lengths for batching by length (default: max_seq_length/4, "
                           "/2 and max_seq_length)")
    squad = finetune.add_argument_group("squad")
    squad.add_argument("--doc_stride", type=int, default=128,
                       help="tokens between the starts of a long context's windows "
                            "(default: %(default)s)")
    squad.add_argument("--max_query_length", type=int, default=64,
                       help="questions are cut to this many tokens (default: %(default)s)")
    squad.add_argument("--n_best_size", type=int, default=20,
                       help="start and end candidates per window (default: %(default)s)")
    squad.add_argument("--max_answer_length", type=int, default=30,
                       help="longest answer in tokens (default: %(default)s)")
    squad.add_argument("--version_2_with_negative", action="store_true", default=None,
                       help="SQuAD 2.0 (default: when the data has is_impossible questions)")
    squad.add_argument("--null_score_diff_threshold", type=float, default=0.0,
                       help="SQuAD 2.0: answer only when the best span beats the null score by "
                            "this (default: %(default)s)")
    train = finetune.add_argument_group("optimization (BERT's recipe by default)")
    train.add_argument("--learning_rate", type=float, default=3e-5,
                       help="peak learning rate (default: %(default)s)")
    train.add_argument("--batch_size", type=int, default=32,
                       help="global batch size, all replicas (default: %(default)s)")
    train.add_argument("--epochs", type=int, default=3, help="(default: %(default)s)")
    train.add_argument("--warmup_fraction", type=float, default=0.1,
                       help="share of steps with linear warmup, then linear decay "
                            "(default: %(default)s)")
    train.add_argument("--weight_decay", type=float, default=0.01,
                       help="AdamW's decoupled weight decay (default: %(default)s)")
    train.add_argument("--seed", type=int, default=0,
                       help="shuffling and head initialization seed (default: %(default)s)")
    run = finetune.add_argument_group("run")
    run.add_argument("--strategy", choices=STRATEGIES, default="auto",
                     help="tf.distribute strategy (default: %(default)s)")
    run.add_argument("--tpu", help="TPU name or address ('local' on a TPU VM)")
    run.add_argument("--num_cpu_devices", type=int, default=0,
                     help="split the CPU into this many devices (to try MirroredStrategy)")
    run.add_argument("--no_progress", dest="progress", action="store_false",
                     help="one log line per epoch instead of a progress bar")
    finetune.set_defaults(run=run_finetune_command)

    features = subparsers.add_parser(
        "extract-features", help="write per-token layer outputs as extract_features.py does",
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
    features.add_argument("--layers", type=_int_list, default=[-1, -2, -3, -4],
                          help="comma-separated layer indexes, negative from the top "
                               "(default: -1,-2,-3,-4)")
    features.add_argument("--max_seq_length", type=int, default=128,
                          help="longer inputs are truncated, pairs as Google truncates them "
                               "(default: %(default)s)")
    features.add_argument("--batch_size", type=int, default=32,
                          help="examples per forward pass (default: %(default)s)")
    add_lower_case_flag(features)
    features.add_argument("--no_progress", dest="progress", action="store_false",
                          help="no progress bar")
    features.set_defaults(run=run_extract_features_command)


def run_finetune_command(args: argparse.Namespace) -> int:
    if args.num_cpu_devices:
        from keras_bert.training.distribute import use_logical_cpu_devices
        use_logical_cpu_devices(args.num_cpu_devices)
    from keras_bert.training.finetune import FinetuneConfig, run_finetune
    from keras_bert.training.finetune_tasks import TaskOptions
    options = TaskOptions(
        data_format=args.data_format,
        labels=[x.strip() for x in args.labels.split(",")] if args.labels else None,
        seq_length=args.max_seq_length, doc_stride=args.doc_stride,
        max_query_length=args.max_query_length, n_best_size=args.n_best_size,
        max_answer_length=args.max_answer_length,
        version_2_with_negative=args.version_2_with_negative,
        null_score_diff_threshold=args.null_score_diff_threshold,
        numeric_features=args.numeric_features,
        categorical_features=args.categorical_features)
    results = run_finetune(FinetuneConfig(
        task=args.task, init_checkpoint=args.init_checkpoint, train_file=args.train_file,
        dev_file=args.dev_file, output_dir=args.output_dir, options=options,
        learning_rate=args.learning_rate, batch_size=args.batch_size, epochs=args.epochs,
        warmup_fraction=args.warmup_fraction, weight_decay=args.weight_decay,
        bucket_lengths=args.bucket_lengths, strategy=args.strategy, tpu=args.tpu,
        seed=args.seed, overwrite=args.overwrite, verbose=1 if args.progress else 2,
        lower_case=args.do_lower_case))
    print(json.dumps({"best_epoch": results["best_epoch"], "best": results["best"],
                      "best_model": results["best_model"]}, indent=2))
    return 0


def run_extract_features_command(args: argparse.Namespace) -> int:
    from keras_bert.training.extract_features import extract_features
    count = extract_features(args.init_checkpoint, args.input_file, args.output_file,
                             layers=args.layers, max_seq_length=args.max_seq_length,
                             batch_size=args.batch_size, lower_case=args.do_lower_case,
                             progress=args.progress)
    print(f"wrote features of {count} examples to {args.output_file}")
    return 0
