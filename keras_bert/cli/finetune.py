"""`keras-bert finetune`: the common flags, each task's own (from its folder), then the run.

A task's flags are named as the fields of its options dataclass (``--doc_stride`` sets
``doc_stride``); every task's flags are on the command line, and one of another task than the
one run is an error naming it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time

from keras_bert.cli.flags import add_lower_case_flag, check_checkpoint, check_inputs_exist
from keras_bert.config import FinetuneSettings, normalize_bucket_lengths
from keras_bert.distribute import STRATEGIES
from keras_bert.tasks import get_task, task_names
from keras_bert.tasks.spec import CommonOptions, TaskSpec, option_defaults
from keras_bert.tasks.reporting import score_line, score_table


def add_parser(subparsers) -> None:
    finetune = subparsers.add_parser(
        "finetune",
        description="Fine-tune all layers of a pretrained BERT with model.fit (a custom loop "
                    "under MultiWorkerMirroredStrategy): AdamW, linear warmup then decay, "
                    "evaluation on the dev set after every epoch; the best model goes to "
                    "OUTPUT_DIR/best_model and the scores to OUTPUT_DIR/eval_results.json "
                    "(written by the chief only). Rerun on the same OUTPUT_DIR, an interrupted "
                    "run resumes at the epoch it was in (OUTPUT_DIR/checkpoints, saved after "
                    "every epoch) and a finished one is left as it is. Progress and the "
                    "summary go to stderr, the result (JSON) to stdout.")
    io = finetune.add_argument_group("inputs and outputs")
    io.add_argument("--task", choices=task_names(), required=True,
                    help="; ".join(f"{name}: {get_task(name).help}" for name in task_names()))
    io.add_argument("--init_checkpoint", required=True,
                    help="Google TF1 directory, Hugging Face directory, or a keras-bert checkpoint "
                         "(with vocab.txt)")
    io.add_argument("--train_file", required=True,
                    help="the training data, in the task's format (see --task)")
    io.add_argument("--dev_file", help="evaluated after every epoch (omit to keep the last epoch)")
    io.add_argument("--output_dir", required=True,
                    help="best_model/, eval_results.json and predictions go here")
    io.add_argument("--overwrite", action="store_true",
                    help="start afresh, discarding an earlier run in OUTPUT_DIR (finished or "
                         "interrupted)")
    add_lower_case_flag(io)
    data = finetune.add_argument_group("data")
    data.add_argument("--labels", type=_comma_list,
                      help="comma-separated label names, in output order (default: the task's, "
                           "such as the GLUE layout's or the training file's, sorted)")
    data.add_argument("--max_seq_length", dest="seq_length", metavar="MAX_SEQ_LENGTH", type=int,
                      help=f"packed length (default: a sentence-transformers checkpoint's "
                           f"max_seq_length, else {_seq_length_defaults()})")
    data.add_argument("--bucket_lengths", type=_bucket_lengths,
                      default=FinetuneSettings.bucket_lengths,
                      help="the lengths batches of rows of similar length are padded to: 'auto' "
                           "(at most 8 multiples of 8, chosen from the training rows' lengths), "
                           "comma-separated lengths, or 'none' (every batch padded to "
                           "max_seq_length) (default: %(default)s)")
    for name in task_names():
        try:
            get_task(name).add_arguments(finetune)
        except argparse.ArgumentError as e:
            raise ValueError(f"the {name} task adds a flag that another task has: {e}") from e
    train = finetune.add_argument_group("optimization (BERT's recipe by default)")
    train.add_argument("--learning_rate", type=float, default=FinetuneSettings.learning_rate,
                       help="peak learning rate (default: %(default)s)")
    train.add_argument("--batch_size", type=int, default=FinetuneSettings.batch_size,
                       help="global batch size, all replicas (default: %(default)s)")
    train.add_argument("--epochs", type=int, default=FinetuneSettings.epochs,
                       help="(default: %(default)s)")
    train.add_argument("--warmup_fraction", type=float,
                       default=FinetuneSettings.warmup_fraction,
                       help="share of steps with linear warmup, then linear decay "
                            "(default: %(default)s)")
    train.add_argument("--weight_decay", type=float, default=FinetuneSettings.weight_decay,
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
    finetune.set_defaults(run=run_finetune_command, check=check_finetune_inputs)


def _bucket_lengths(text: str) -> list[int] | str | None:
    """An argparse type: 'auto', 'none' (None) or comma-separated positive lengths."""
    try:
        return normalize_bucket_lengths(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected 'auto', 'none' or comma-separated positive lengths, got {text!r}")


def _comma_list(text: str) -> list[str] | None:
    return [x.strip() for x in text.split(",")] if text else None


def _seq_length_defaults() -> str:
    """'128' and each task with another default, e.g. '128; squad: 384'."""
    others = [f"{name}: {get_task(name).default_seq_length}" for name in task_names()
              if get_task(name).default_seq_length != TaskSpec.default_seq_length]
    return "; ".join([str(TaskSpec.default_seq_length), *others])


def _options_from_flags(task: TaskSpec, args: argparse.Namespace) -> CommonOptions:
    """The task's options from the flags; ValueError naming a flag of another task that was
    given (set to other than its default)."""
    own = option_defaults(task.options_class)
    for name in task_names():
        for field, default in option_defaults(get_task(name).options_class).items():
            if field not in own and getattr(args, field, default) != default:
                owners = [n for n in task_names()
                          if field in option_defaults(get_task(n).options_class)]
                raise ValueError(f"--{field} is a flag of --task {' or '.join(owners)}, not "
                                 f"{task.name}")
    return task.make_options({field: getattr(args, field) for field in own
                              if hasattr(args, field)})


def check_finetune_inputs(args: argparse.Namespace) -> None:
    """Before TensorFlow loads: the paths exist, --init_checkpoint holds a BERT checkpoint,
    and the training and dev files hold examples in the task's format with the columns asked
    for and labels among the task's (DataError naming the file and line)."""
    task = get_task(args.task)
    options = _options_from_flags(task, args)  # a flag of another task first: it is no path
    check_inputs_exist(args, "init_checkpoint", "train_file", "dev_file")
    check_checkpoint(args, "init_checkpoint")
    train, dev = task.read_run_files(options, args.train_file, args.dev_file)
    labels = task.label_names(train, options)
    for examples in (train, dev or []):
        task.check_labels(examples, labels)


def run_finetune_command(args: argparse.Namespace) -> int:
    if args.num_cpu_devices:
        from keras_bert.distribute import use_logical_cpu_devices
        use_logical_cpu_devices(args.num_cpu_devices)
    from keras_bert.finetuning.finetune import FinetuneRun, run_finetune
    options = _options_from_flags(get_task(args.task), args)
    start = time.monotonic()
    with contextlib.redirect_stdout(sys.stderr):  # Keras' progress; stdout has the result
        results = run_finetune(FinetuneRun(
            task=args.task, init_checkpoint=args.init_checkpoint, train_file=args.train_file,
            dev_file=args.dev_file, output_dir=args.output_dir, options=options,
            learning_rate=args.learning_rate, batch_size=args.batch_size, epochs=args.epochs,
            warmup_fraction=args.warmup_fraction, weight_decay=args.weight_decay,
            bucket_lengths=args.bucket_lengths, strategy=args.strategy, tpu=args.tpu,
            seed=args.seed, overwrite=args.overwrite, verbose=1 if args.progress else 2,
            lower_case=args.do_lower_case))
    print("\n".join(run_summary(args, results, time.monotonic() - start)), file=sys.stderr)
    print(json.dumps({"best_epoch": results["best_epoch"], "best": results["best"],
                      "best_model": results["best_model"], "warning": results.get("warning")},
                     indent=2))
    return 0


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def run_summary(args: argparse.Namespace, results: dict, elapsed_s: float) -> list[str]:
    """What a finished run prints for a person: the time, the dev scores beside their baseline
    and per class, any warning, where the outputs are and the commands that come next."""
    from keras_bert.finetuning.curves import CURVES_NAME
    epochs = len(results["epochs"])
    lines = ["", f"keras-bert finetune: {results['task']} on {results['train_rows']:,} training "
                 f"rows, {epochs} epoch{'s' * (epochs != 1)}, in {_duration(elapsed_s)}"
                 f" (best epoch: {results['best_epoch']})"]
    if results["best"] is not None:
        lines.append(f"dev ({results['dev_examples']:,} examples): "
                     f"{score_line(results['best'], results['primary_metric'])}")
        lines += ["  " + line for line in score_table(results["best"])]
    if results.get("warning"):
        lines.append(f"WARNING: {results['warning']}")
    model = results["best_model"]
    name = args.task.replace("-", "_")
    exports = os.path.join(args.output_dir, "exports")
    lines += [f"model: {model}",
              f"curves: {os.path.join(args.output_dir, CURVES_NAME)}",
              "next:"]
    if args.dev_file:
        defaults = option_defaults(get_task(args.task).options_class)
        columns = "".join(f" --{name} {getattr(args, name)}"
                          for name in getattr(get_task(args.task), "COLUMN_FLAGS", ())
                          if getattr(args, name) != defaults[name])
        lines.append(f"  keras-bert evaluate --model {model} --input_file {args.dev_file}"
                     f"{columns}")
    lines += [f"  keras-bert export {model} {exports} --model_name {name}",
              f"  keras-bert serve --model_name {name} --model_base_path "
              f"{os.path.join(exports, name)} --rest_api_port 8501"]
    return lines
