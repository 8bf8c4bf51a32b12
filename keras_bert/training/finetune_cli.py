"""`keras-bert finetune`: the common flags, each task's own (from its folder), then the run."""

from __future__ import annotations

import argparse
import dataclasses
import json

from keras_bert.cli_flags import add_lower_case_flag, int_list
from keras_bert.training.distribute import STRATEGIES
from keras_bert.tasks import get_task, task_names


def add_parser(subparsers) -> None:
    finetune = subparsers.add_parser(
        "finetune", help="fine-tune a pretrained BERT on a task and keep the best model",
        description="Fine-tune all layers of a pretrained BERT with model.fit (a custom loop "
                    "under MultiWorkerMirroredStrategy): AdamW, linear warmup then decay, "
                    "evaluation on the dev set after every epoch; the best model goes to "
                    "OUTPUT_DIR/best_model and the scores to OUTPUT_DIR/eval_results.json "
                    "(written by the chief only).")
    io = finetune.add_argument_group("inputs and outputs")
    io.add_argument("--task", choices=task_names(), required=True,
                    help="; ".join(f"{name}: {get_task(name).help}" for name in task_names()))
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
    data.add_argument("--max_seq_length", type=int, help="the task's default: 128; 384 for squad")
    data.add_argument("--bucket_lengths", type=int_list,
                      help="padded lengths for batching by length (default: max_seq_length/4, "
                           "/2 and max_seq_length)")
    for name in task_names():
        get_task(name).add_arguments(finetune)
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


def run_finetune_command(args: argparse.Namespace) -> int:
    if args.num_cpu_devices:
        from keras_bert.training.distribute import use_logical_cpu_devices
        use_logical_cpu_devices(args.num_cpu_devices)
    from keras_bert.training.finetune import FinetuneConfig, run_finetune
    from keras_bert.tasks.base import TaskOptions
    # Every TaskOptions field has a flag of the same name (the tasks add theirs), except these.
    given = {field.name: getattr(args, field.name) for field in dataclasses.fields(TaskOptions)
             if hasattr(args, field.name)}
    given.update(labels=[x.strip() for x in args.labels.split(",")] if args.labels else None,
                 seq_length=args.max_seq_length)
    options = TaskOptions(**given)
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
