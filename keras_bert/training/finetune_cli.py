"""`keras-bert finetune` and `keras-bert extract-features`: parse flags, call the library,
report."""

from __future__ import annotations

import argparse
import json

from keras_bert.training.distribute import STRATEGIES
from keras_bert.training.finetune_tasks import TASKS


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")


def add_parser(subparsers) -> None:
    finetune = subparsers.add_parser(
        "finetune", help="fine-tune a pretrained BERT on a task and keep the best model",
        description="Fine-tune all layers of a pretrained BERT with model.fit (a custom loop "
                    "under MultiWorkerMirroredStrategy): AdamW, linear warmup then decay, "
                    "evaluation on the dev set after every epoch; the best model goes to "
                    "OUTPUT_DIR/best_model and the scores to OUTPUT_DIR/eval_results.json "
                    "(written by the chief only).")
    io = finetune.add_argument_group("inputs and outputs")
    io.add_argument("--task", choices=TASKS, required=True)
    io.add_argument("--init_checkpoint", required=True,
                    help="Google TF1 directory, Hugging Face directory, or a keras-bert checkpoint "
                         "(with vocab.txt)")
    io.add_argument("--train_file", required=True)
    io.add_argument("--dev_file", help="evaluated after every epoch (omit to keep the last epoch)")
    io.add_argument("--output_dir", required=True)
    io.add_argument("--overwrite", action="store_true", help="replace an earlier run's results")
    data = finetune.add_argument_group("data")
    data.add_argument("--data_format", default="auto",
                      help="classification/regression files: a GLUE layout (cola, sst-2, mrpc, "
                           "sts-b, qqp, mnli, qnli, rte, wnli), 'jsonl', or 'auto' (JSONL by "
                           "extension, else a TSV/CSV with text, text_pair, label columns)")
    data.add_argument("--labels", help="comma-separated label names, in output order (default: "
                                       "the GLUE layout's or the training file's, sorted)")
    data.add_argument("--max_seq_length", type=int, help="128; 384 for squad")
    data.add_argument("--bucket_lengths", type=_int_list,
                      help="padded lengths for batching by length (default: max_seq_length/4, "
                           "/2 and max_seq_length)")
    squad = finetune.add_argument_group("squad")
    squad.add_argument("--doc_stride", type=int, default=128)
    squad.add_argument("--max_query_length", type=int, default=64)
    squad.add_argument("--n_best_size", type=int, default=20)
    squad.add_argument("--max_answer_length", type=int, default=30)
    squad.add_argument("--version_2_with_negative", action="store_true", default=None,
                       help="SQuAD 2.0 (default: when the data has is_impossible questions)")
    squad.add_argument("--null_score_diff_threshold", type=float, default=0.0)
    train = finetune.add_argument_group("optimization (BERT's recipe by default)")
    train.add_argument("--learning_rate", type=float, default=3e-5)
    train.add_argument("--batch_size", type=int, default=32)
    train.add_argument("--epochs", type=int, default=3)
    train.add_argument("--warmup_fraction", type=float, default=0.1)
    train.add_argument("--weight_decay", type=float, default=0.01)
    train.add_argument("--seed", type=int, default=0)
    run = finetune.add_argument_group("run")
    run.add_argument("--strategy", choices=STRATEGIES, default="auto")
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
    features.add_argument("--init_checkpoint", required=True)
    features.add_argument("--input_file", required=True)
    features.add_argument("--output_file", required=True)
    features.add_argument("--layers", type=_int_list, default=[-1, -2, -3, -4])
    features.add_argument("--max_seq_length", type=int, default=128)
    features.add_argument("--batch_size", type=int, default=32)
    case = features.add_mutually_exclusive_group()
    case.add_argument("--do_lower_case", dest="lower_case", action="store_true", default=None)
    case.add_argument("--no_lower_case", dest="lower_case", action="store_false")
    features.add_argument("--no_progress", dest="progress", action="store_false")
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
        null_score_diff_threshold=args.null_score_diff_threshold)
    results = run_finetune(FinetuneConfig(
        task=args.task, init_checkpoint=args.init_checkpoint, train_file=args.train_file,
        dev_file=args.dev_file, output_dir=args.output_dir, options=options,
        learning_rate=args.learning_rate, batch_size=args.batch_size, epochs=args.epochs,
        warmup_fraction=args.warmup_fraction, weight_decay=args.weight_decay,
        bucket_lengths=args.bucket_lengths, strategy=args.strategy, tpu=args.tpu,
        seed=args.seed, overwrite=args.overwrite, verbose=1 if args.progress else 2))
    print(json.dumps({"best_epoch": results["best_epoch"], "best": results["best"],
                      "best_model": results["best_model"]}, indent=2))
    return 0


def run_extract_features_command(args: argparse.Namespace) -> int:
    from keras_bert.training.extract_features import extract_features
    count = extract_features(args.init_checkpoint, args.input_file, args.output_file,
                             layers=args.layers, max_seq_length=args.max_seq_length,
                             batch_size=args.batch_size, lower_case=args.lower_case,
                             progress=args.progress)
    print(f"wrote features of {count} examples to {args.output_file}")
    return 0
