"""`keras-bert evaluate` (a trained model's scores on a labelled file, beside the baseline of
always guessing) and `keras-bert predict` (its predictions, one per example, for a file or for
texts on the command line; with ``--server``, a served model's).

Both load the model here, without a server: finetune's ``best_model``, a keras-bert checkpoint,
or a Hugging Face or Google folder whose head a task model takes. The task that reads the files
is the one whose model it is (``Task.takes``), with finetune's data flags (``--data_format``,
``--text_column``...).
"""

from __future__ import annotations

import argparse
import json
import sys

from keras_bert.cli.flags import check_inputs_exist
from keras_bert.config import FinetuneSettings, check_window_stride
from keras_bert.tasks import get_task, task_names
from keras_bert.tasks.spec import DEV_PREDICTIONS, TaskSpec, write_records
from keras_bert.tasks.classification.task import ClassificationSpec
from keras_bert.tasks.reporting import learning_warning, score_line, score_table


def add_parser(subparsers) -> None:
    evaluate = subparsers.add_parser(
        "evaluate",
        description="Score a trained model on a labelled file in its task's format (as "
                    "finetune reads it), without a server. Prints the scores beside the "
                    "baseline of always guessing the most frequent label, and per class, to "
                    "stderr; the scores as JSON to stdout; a warning when the model learned "
                    "nothing useful.")
    evaluate.add_argument("--model", required=True,
                          help="a trained model: finetune's best_model, a keras-bert "
                               "checkpoint, or a Hugging Face or Google folder with its head")
    evaluate.add_argument("--input_file", required=True,
                          help="labelled examples, in the task's format")
    evaluate.add_argument("--predictions_file",
                          help="also write one prediction per example here (JSON Lines, or "
                               "CSV when it ends in .csv)")
    _add_common_flags(evaluate, records="--predictions_file")
    evaluate.set_defaults(run=run_evaluate, check=_check_local_inputs)

    predict = subparsers.add_parser(
        "predict",
        description="A model's predictions, one per example: for --input_file (the task's "
                    "format; a label column there is ignored) or for the TEXTs given, written "
                    "to --output_file or stdout as JSON Lines (CSV when --output_file ends in "
                    ".csv). Classification: label and probabilities; regression: score; NER: "
                    "tags and entities with offsets; SQuAD: answer; multiple choice: choice "
                    "and probabilities. Without --server the model is loaded here; with "
                    "--server, a served model (TF Serving or keras-bert serve) is asked.")
    predict.add_argument("texts", metavar="TEXT", nargs="*",
                         help="texts to predict for (instead of --input_file)")
    predict.add_argument("--model", required=True,
                         help="without --server: a trained model's directory, as for "
                              "evaluate; with --server: the served model's name")
    predict.add_argument("--input_file", help="examples, in the task's format")
    predict.add_argument("--output_file", help="where the predictions go (default: stdout)")
    _add_common_flags(predict, records="the predictions")
    served = predict.add_argument_group("a served model (--server)")
    served.add_argument("--server", help="host:port of a model server")
    served.add_argument("--protocol", choices=("grpc", "rest"), default="grpc",
                        help="gRPC (port 8500) or REST (port 8501) (default: %(default)s)")
    served.add_argument("--text_pair", action="append",
                        help="the second text of a pair (once per TEXT)")
    served.add_argument("--choices", action="append", type=_choice_list,
                        help='a multiple-choice model\'s choices as a JSON list, e.g. '
                             '\'["and left.", "then slept."]\' (once per TEXT)')
    served.add_argument("--version", type=int, help="a specific version (default: latest)")
    served.add_argument("--signature", default="",
                        help="the signature to ask; it must take raw text (default: the one "
                             "the model's metadata says takes it: serving_default, or "
                             "serve_text in an export with --serving_default transformers)")
    served.add_argument("--outputs", help="comma-separated outputs to print (default: all)")
    served.add_argument("--timeout_s", type=float, default=30.0,
                        help="seconds to wait for the answer (default: %(default)s)")
    predict.set_defaults(run=run_predict, check=_check_predict_inputs)


def _add_common_flags(parser: argparse.ArgumentParser, records: str) -> None:
    parser.add_argument("--batch_size", type=int, default=FinetuneSettings.batch_size,
                        help="rows per batch (default: %(default)s)")
    spec = ClassificationSpec()
    group = spec.add_column_arguments(parser, files="--input_file")
    spec.add_keep_columns_argument(group, "--input_file", records)
    spec.add_window_arguments(group)


def _check_local_inputs(args: argparse.Namespace) -> None:
    """The paths exist; with --keep_columns, --input_file has them (read as classification
    reads it, since only classification and regression models keep columns)."""
    check_inputs_exist(args, "model", "input_file")
    check_window_stride(args.window_stride, None, "--window_stride")
    if args.keep_columns:
        if not args.input_file:
            raise ValueError("--keep_columns copies columns of --input_file; TEXTs have none")
        spec = ClassificationSpec()
        spec.read_examples(args.input_file, spec.options_class(**_column_flags(args)),
                           with_labels=False)


def _column_flags(args: argparse.Namespace) -> dict:
    """{field: value} of the classification flags given (set to other than their default)."""
    defaults = ClassificationSpec.options_class()
    return {name: getattr(args, name) for name in (*ClassificationSpec.COLUMN_FLAGS,
                                                   *ClassificationSpec.WINDOW_FLAGS,
                                                   "keep_columns")
            if getattr(args, name) != getattr(defaults, name)}


def _check_predict_inputs(args: argparse.Namespace) -> None:
    if args.server is None:
        _check_local_inputs(args)
        if bool(args.texts) == bool(args.input_file):
            raise ValueError("give either --input_file or TEXTs to predict for")
        served_only = [f"--{name}" for name in ("text_pair", "choices", "version", "outputs")
                       if getattr(args, name) is not None]
        if served_only:
            raise ValueError(f"{', '.join(served_only)} apply to a served model (--server)")
    elif args.keep_columns:
        raise ValueError("--keep_columns copies columns of --input_file, which a served model "
                         "(--server) does not read")
    elif not args.texts or args.input_file:
        raise ValueError("a served model (--server) is asked about TEXTs given on the command "
                         "line, not --input_file")


def model_task(model) -> TaskSpec:
    """The task whose model ``model`` is (``Task.takes``); ValueError naming the class when
    no task takes it."""
    for name in task_names():
        if get_task(name).takes(model):
            return get_task(name)
    raise ValueError(f"{type(model).__name__} is no fine-tuned task model that evaluate and "
                     f"predict read files for; they take {', '.join(task_names())} models")


def _load(args: argparse.Namespace):
    """(model, task, options) for ``args.model``: the options the model fixes, with the column
    flags given (classification and regression only)."""
    from keras_bert.tasks.checkpoint_models import model_of_checkpoint
    model = model_of_checkpoint(args.model)
    task = model_task(model)
    flags = _column_flags(args)
    if flags and not isinstance(task, ClassificationSpec):
        raise ValueError(f"{', '.join('--' + name for name in flags)} apply to classification "
                         f"and regression models; {args.model!r} holds a {task.name} model")
    return model, task, task.options_for(model, task.options_class(**flags))


def _read(task: TaskSpec, path: str, options, with_labels: bool = True) -> tuple[list, object]:
    """The examples in ``path`` and the options resolved on them; ValueError when it holds
    none."""
    examples = task.read_examples(path, options, with_labels=with_labels)
    if not examples:
        raise ValueError(f"{path}: holds no examples (a header alone, or nothing)")
    return examples, task.resolve_options(options, [examples])


def run_evaluate(args: argparse.Namespace) -> int:
    model, task, options = _load(args)
    examples, options = _read(task, args.input_file, options)
    scores, artifacts = task.evaluate(model, examples, options, args.batch_size)
    if args.predictions_file:
        if DEV_PREDICTIONS in artifacts:  # the records evaluate made, not a second pass
            write_records(args.predictions_file, artifacts[DEV_PREDICTIONS].records)
        else:
            write_records(args.predictions_file,
                          task.predict(model, examples, options, args.batch_size))
    lines = [f"{args.model} on {args.input_file} ({len(examples):,} examples): "
             f"{score_line(scores, task.primary_metric)}",
             *("  " + line for line in score_table(scores))]
    warning = learning_warning(scores)
    if warning:
        lines.append(f"WARNING: {warning}")
    print("\n".join(lines), file=sys.stderr)
    print(json.dumps({"task": task.name, "examples": len(examples), **scores,
                      "warning": warning}, indent=2))
    return 0


def run_predict(args: argparse.Namespace) -> int:
    if args.server is not None:
        return _predict_served(args)
    model, task, options = _load(args)
    if args.input_file:
        examples, options = _read(task, args.input_file, options, with_labels=False)
    else:
        examples = task.examples_of_texts(args.texts)
        options = task.resolve_options(options, [])
    _put(task.predict(model, examples, options, args.batch_size), args.output_file)
    return 0


def _put(records: list[dict], output_file: str | None) -> None:
    """The predictions written to ``output_file`` (and where, and how many, said on stderr),
    or printed to stdout, one JSON object a line."""
    if output_file:
        write_records(output_file, records)
        print(f"wrote {len(records):,} predictions to {output_file}", file=sys.stderr)
    else:
        for record in records:
            print(json.dumps(record, ensure_ascii=False))


def _predict_served(args: argparse.Namespace) -> int:
    import numpy as np

    from keras_bert.export.client import ServingClient, ServingError
    for flag, values in (("--text_pair", args.text_pair), ("--choices", args.choices)):
        if values is not None and len(values) != len(args.texts):
            raise ValueError(f"got {len(args.texts)} texts but {len(values)} {flag}; give one "
                             f"{flag} per text")
    with ServingClient(args.server, args.protocol, args.timeout_s) as client:
        try:
            outputs = client.predict_text(args.model, args.texts, args.text_pair,
                                          signature_name=args.signature, version=args.version,
                                          choices=args.choices)
        except ServingError as e:
            print(f"keras-bert predict: the server at {args.server} refused the request: {e}",
                  file=sys.stderr)
            return 1
    wanted = args.outputs.split(",") if args.outputs else sorted(outputs)
    unknown = [name for name in wanted if name not in outputs]
    if unknown:
        raise ValueError(f"the model has no output {unknown[0]!r}; it has {sorted(outputs)}")

    def jsonable(value):
        """One row of an output as JSON values; strings decoded as UTF-8."""
        value = np.asarray(value)
        if value.dtype == object or value.dtype.kind == "S":
            value = np.vectorize(lambda b: b.decode("utf-8", "replace") if isinstance(b, bytes)
                                 else b, otypes=[object])(value) if value.size else value
        return value.tolist()

    records = []
    for row, text in enumerate(args.texts):
        record = {"text": text}
        if args.text_pair:
            record["text_pair"] = args.text_pair[row]
        if args.choices:
            record["choices"] = args.choices[row]
        record.update({name: jsonable(outputs[name][row]) for name in wanted})
        records.append(record)
    _put(records, args.output_file)
    return 0


def _choice_list(value: str) -> list[str]:
    try:
        choices = json.loads(value)
    except ValueError:
        choices = None
    if not (isinstance(choices, list) and choices and all(isinstance(c, str) for c in choices)):
        raise argparse.ArgumentTypeError(f"expected a JSON list of strings, got {value!r}")
    return choices

