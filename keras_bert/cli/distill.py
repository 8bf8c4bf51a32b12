"""`keras-bert distill`: a fine-tuned classifier (or regressor) as the teacher of a smaller
student (``keras_bert.distill``), from the finetune command's data files, plus texts without
labels; writes the student in our format and a report of teacher and student side by side."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time

from keras_bert.cli.flags import check_checkpoint
from keras_bert.config import (DistillationSettings, FinetuneSettings, kept_layers,
                               normalize_bucket_lengths)
from keras_bert.tasks.classification.task import (ClassificationOptions, ClassificationSpec,
                                                  RegressionSpec)

STUDENT_DIR = "student"  # OUTPUT_DIR/student: the student, a keras-bert checkpoint
REPORT_FILE = "distillation_report.json"
BACKUP_DIR = "checkpoints"  # the epoch backup an interrupted run resumes from


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "distill",
        description="Distil a fine-tuned classifier into a smaller student of the same task: "
                    "the teacher's outputs on the training texts (and on texts without labels, "
                    "such as a service's traffic) are computed once, then the student learns "
                    "them (KL divergence at a temperature, mixed with the labels where given) "
                    "by BERT's fine-tuning recipe. Writes OUTPUT_DIR/student (export and serve "
                    "it like any model, also --quantize int8) and OUTPUT_DIR/"
                    f"{REPORT_FILE} (teacher and student on the dev set, sizes and speeds). "
                    "Rerun on the same OUTPUT_DIR, an interrupted run resumes at its epoch.")
    io = parser.add_argument_group("inputs and outputs")
    io.add_argument("--teacher", required=True,
                    help="a fine-tuned classifier: a keras-bert checkpoint (finetune's "
                         "best_model), or a Hugging Face or Google folder with its head")
    io.add_argument("--train_file", required=True,
                    help="texts with labels, in finetune's classification formats")
    io.add_argument("--unlabeled_file",
                    help="more texts, without labels (the teacher labels them), in the same "
                         "format; a label column there is ignored")
    io.add_argument("--dev_file", help="labelled texts scored after every epoch and in the report")
    io.add_argument("--output_dir", required=True, help=f"{STUDENT_DIR}/ and {REPORT_FILE} go here")
    io.add_argument("--overwrite", action="store_true",
                    help="replace an earlier student in OUTPUT_DIR")
    student = parser.add_argument_group("student (one of)")
    which = student.add_mutually_exclusive_group(required=True)
    which.add_argument("--num_layers", type=int,
                       help="this many of the teacher's layers, spread evenly with the top one "
                            "kept, on its embeddings and head")
    which.add_argument("--student", help="a checkpoint with the teacher's vocabulary")
    ClassificationSpec().add_column_arguments(
        parser, files="--train_file, --dev_file and --unlabeled_file")
    train = parser.add_argument_group("distillation")
    train.add_argument("--temperature", type=float, default=DistillationSettings.temperature,
                       help="softens both distributions in the KL term (default: %(default)s)")
    train.add_argument("--label_weight", type=float, default=DistillationSettings.label_weight,
                       help="the labels' share of a labelled text's loss; 0: the teacher's "
                            "outputs alone (default: %(default)s)")
    train.add_argument("--augment", type=int, default=DistillationSettings.augment, metavar="N",
                       help="N changed copies of each text (words dropped, n-grams kept) join "
                            "the texts, labelled by the teacher: for when there is no "
                            "--unlabeled_file; each copy costs a text's training (default: "
                            "%(default)s)")
    train.add_argument("--learning_rate", type=float, default=DistillationSettings.learning_rate,
                       help="AdamW's peak rate (default: %(default)s)")
    train.add_argument("--batch_size", type=int, default=FinetuneSettings.batch_size,
                       help="(default: %(default)s)")
    train.add_argument("--epochs", type=int, default=FinetuneSettings.epochs,
                       help="(default: %(default)s)")
    train.add_argument("--bucket_lengths", default="auto",
                       help="as finetune's (default: %(default)s)")
    train.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    train.add_argument("--no_progress", dest="progress", action="store_false",
                       help="one log line per epoch instead of a progress bar")
    parser.set_defaults(run=run_distill_command, check=_check_inputs)


def _check_paths(args: argparse.Namespace) -> None:
    """Missing inputs and a finished output, before TensorFlow does anything."""
    for flag in ("teacher", "train_file", "unlabeled_file", "dev_file", "student"):
        path = getattr(args, flag)
        if path and "://" not in path and not os.path.exists(path):
            raise FileNotFoundError(f"--{flag} {path!r} does not exist")
    student_dir = os.path.join(args.output_dir, STUDENT_DIR)
    if os.path.exists(student_dir) and not args.overwrite:
        raise ValueError(f"{student_dir!r} already holds a student; pass --overwrite to "
                         f"distil again")


def _options(args: argparse.Namespace) -> ClassificationOptions:
    return ClassificationOptions(data_format=args.data_format, text_column=args.text_column,
                                 text_pair_column=args.text_pair_column,
                                 label_column=args.label_column)


def _check_inputs(args: argparse.Namespace) -> None:
    """Before TensorFlow loads: the paths (``_check_paths``), --teacher and --student hold BERT
    checkpoints, --num_layers is fewer than the teacher's layers (as its config file states
    them), the text files read as texts, and their labels are the teacher's where its files
    name them (``_check_labels``)."""
    _check_paths(args)
    teacher = check_checkpoint(args, "teacher")
    check_checkpoint(args, "student")
    if args.num_layers is not None and teacher is not None:
        try:
            kept_layers(teacher.num_hidden_layers, args.num_layers)
        except ValueError as e:
            raise ValueError(f"--num_layers {args.num_layers}: {e}") from None
    if args.augment < 0:
        raise ValueError(f"--augment {args.augment}: give 0 or more copies")
    for flag in ("train_file", "unlabeled_file", "dev_file"):
        if getattr(args, flag):
            _read(RegressionSpec(), getattr(args, flag), _options(args), with_labels=False)
    _check_labels(args)


def _check_labels(args: argparse.Namespace) -> None:
    """DataError naming the file and line of a --train_file or --dev_file label the teacher
    does not know, where its files name its labels (``stored_label_names``)."""
    from keras_bert.checkpoints.formats import stored_label_names
    try:
        names = stored_label_names(args.teacher)
    except (OSError, ValueError, KeyError):  # the loader says what is wrong, in one line
        return
    if names is None:
        return
    task = ClassificationSpec()
    for flag in ("train_file", "dev_file"):
        if getattr(args, flag):
            task.check_labels(_read(task, getattr(args, flag), _options(args), with_labels=True),
                              names)


def _read(task, path: str, options, with_labels: bool) -> list:
    examples = task.read_examples(path, options, with_labels=with_labels)
    if not examples:
        raise ValueError(f"{path!r} holds no examples")
    return examples


def _columns(examples) -> tuple[list, list | None]:
    texts = [e.text for e in examples]
    pairs = [e.text_pair for e in examples]
    return texts, (None if all(p is None for p in pairs) else pairs)


def run_distill_command(args: argparse.Namespace) -> int:
    _check_paths(args)
    import keras
    from keras_bert import fileio
    from keras_bert.checkpoints.saving import save_checkpoint
    from keras_bert.finetuning.distillation.comparison import size_note, sizes
    from keras_bert.finetuning.distillation.run import distill
    from keras_bert.finetuning.distillation.teacher import load_teacher
    from keras_bert.tasks.classification.model import BertClassifier

    bucket_lengths = normalize_bucket_lengths(args.bucket_lengths)
    started = time.perf_counter()
    teacher = load_teacher(args.teacher)
    if not isinstance(teacher, BertClassifier):
        raise ValueError(f"--teacher {args.teacher!r} holds a {type(teacher).__name__}; "
                         f"keras-bert distill takes a classifier (distil other tasks with "
                         f"keras_bert.distill in Python)")
    if teacher.feature_names:
        raise ValueError(f"--teacher {args.teacher!r} takes the features "
                         f"{', '.join(teacher.feature_names)}; keras-bert distill takes "
                         f"text-only classifiers")
    task = RegressionSpec() if teacher.is_regression else ClassificationSpec()
    options = _options(args)
    train = _read(task, args.train_file, options, with_labels=True)
    unlabeled = (_read(task, args.unlabeled_file, options, with_labels=False)
                 if args.unlabeled_file else [])
    dev = _read(task, args.dev_file, options, with_labels=True) if args.dev_file else None
    texts, pairs = _columns(train + unlabeled)
    labels = [e.label for e in train] + [None] * len(unlabeled)
    validation = None
    if dev is not None:
        dev_texts, dev_pairs = _columns(dev)
        dev_labels = [e.label for e in dev]
        validation = ((dev_texts, dev_labels) if dev_pairs is None
                      else (dev_texts, dev_pairs, dev_labels))
    warning = DistillationSettings().few_texts_warning(len(train), len(unlabeled), args.augment,
                                                       "--augment {}")
    backup = fileio.join(args.output_dir, BACKUP_DIR)
    with contextlib.redirect_stdout(sys.stderr):  # Keras' progress; stdout has the report
        student = distill(
            teacher, texts, labels, text_pairs=pairs, num_layers=args.num_layers,
            student=args.student, epochs=args.epochs, batch_size=args.batch_size,
            learning_rate=args.learning_rate, temperature=args.temperature,
            label_weight=args.label_weight, augment=args.augment,
            bucket_lengths=bucket_lengths, seed=args.seed,
            validation_data=validation, verbose=1 if args.progress else 2,
            callbacks=[keras.callbacks.BackupAndRestore(backup)])
    student.distillation = {**student.distillation, "teacher": args.teacher}
    student_dir = fileio.join(args.output_dir, STUDENT_DIR)
    save_checkpoint(student, student_dir, overwrite=args.overwrite)
    counts = sizes(teacher, student)
    report = {
        "teacher": {"path": args.teacher, **counts["teacher"]},
        "student": {"path": student_dir, **counts["student"], **student.distillation},
        "size": size_note(counts),
        "texts": {"labelled": len(train), "unlabeled": len(unlabeled),
                  "augmented": args.augment * len(texts)},
        "warning": warning,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    if student.dev_scores is not None:
        report["dev"] = json.loads(json.dumps(student.dev_scores))
    with fileio.atomic_write(fileio.join(args.output_dir, REPORT_FILE)) as f:
        f.write(json.dumps(report, indent=2) + "\n")
    if fileio.exists(backup):
        fileio.rmtree(backup)
    print(json.dumps(report, indent=2))
    print(f"size: {report['size']}", file=sys.stderr)
    if warning:
        print(f"WARNING: {warning}", file=sys.stderr)
    print(f"next: keras-bert export {student_dir} EXPORT_BASE --model_name NAME --quantize int8",
          file=sys.stderr)
    return 0
