"""`keras-bert export`: a checkpoint -> a TF Serving version directory (or TF Hub's pair)."""

from __future__ import annotations

import argparse
import logging
import os

from keras_bert.cli.flags import add_bool_flag, add_lower_case_flag, check_inputs_exist
from keras_bert.config import (DEFAULT_MAX_WINDOWS, EXPORT_FORMATS, SERVING_DEFAULTS,
                               check_window_stride)
from keras_bert.tasks.classification.task import ClassificationSpec

logger = logging.getLogger(__name__)


def add_parser(subparsers) -> None:
    export = subparsers.add_parser(
        "export",
        description="Write <EXPORT_BASE>/<model_name>/<version>/: a SavedModel whose "
                    "serving_default takes raw text and serve_ids packed ids. The directory "
                    "appears only when complete.")
    export.add_argument("checkpoint", metavar="CHECKPOINT",
                        help="a Google, Hugging Face or keras-bert checkpoint (or saved task model)")
    export.add_argument("export_base", metavar="EXPORT_BASE", help="the models directory")
    export.add_argument("--model_name", help="the name the model is served as (required unless "
                                             "--tf_hub)")
    export.add_argument("--tf_hub", action="store_true",
                        help="write TF Hub's pair instead: EXPORT_BASE/encoder (with mlm when "
                             "the checkpoint has its masked-LM head) and EXPORT_BASE/preprocess")
    export.add_argument("--version", type=int, help="version number (default: the next one)")
    export.add_argument("--format", choices=EXPORT_FORMATS, default="saved_model",
                        help="'saved_model' (TF Serving), or 'openvino': OpenVINO IR "
                             "(model.xml, model.bin; OpenVINO Model Server's layout) taking raw "
                             "text, with serving_default's outputs; --quantize int8 then needs "
                             "--calibration_file (NNCF); needs the openvino extra "
                             "(default: %(default)s)")
    export.add_argument("--vocab", help="vocab.txt (default: the checkpoint's)")
    add_lower_case_flag(export)
    export.add_argument("--seq_length", type=int, help="packed length of raw text (128)")
    add_bool_flag(export, "text_pair", None, "serving_default takes text and text_pair",
                  default_text="the task's")
    add_bool_flag(export, "dynamic_padding", True,
                  "pad raw text to each batch's longest text, not always to --seq_length "
                  "(false: static shapes, e.g. for XLA)")
    export.add_argument("--mixed_precision", choices=("bf16",),
                        help="compute in bfloat16 with float32 weights and outputs (GPUs, CPUs "
                             "with AVX512_BF16/AMX); default: float32")
    export.add_argument("--quantize", choices=("int8",),
                        help="int8 weights and matmuls in the encoder, a third of the size or "
                             "less (x86-64 CPUs: oneDNN's int8 kernel; with --tf_hub, an int8 "
                             "encoder without mlm); default: float32")
    export.add_argument("--serving_default", choices=SERVING_DEFAULTS, default="text",
                        help="what serving_default takes: 'text' (raw text), or "
                             "'transformers': what transformers' TF classes (TFBertFor*) "
                             "exported, input_ids, attention_mask and token_type_ids in, "
                             "logits (or their outputs) out, so their clients work unchanged; "
                             "raw text is then serve_text (default: %(default)s)")
    export.add_argument("--calibration_file", metavar="TEXTS",
                        help="with --quantize int8: a UTF-8 file of sample texts, one per line "
                             "(a few hundred like the ones to be served), from which the int8 "
                             "layers but each block's output layer get static per-channel "
                             "input ranges: faster than ranges found per row on every call. "
                             "Default: the sample of its training texts a checkpoint of "
                             "keras-bert finetune or distill keeps (calibration_texts.txt); "
                             "ranges per row for a checkpoint without one")
    windows = export.add_argument_group("long texts")
    ClassificationSpec().add_window_arguments(windows)
    windows.add_argument("--max_windows", type=int, metavar="N",
                         help="the most windows one text may be read as (a classifier, a "
                              "tagger, a question answerer's contexts); a request with a "
                              "longer text fails with INVALID_ARGUMENT naming the limit; 0: "
                              f"no limit (default: {DEFAULT_MAX_WINDOWS})")
    export.set_defaults(run=run_export, check=_check_inputs)


def _check_inputs(args: argparse.Namespace) -> None:
    """Before TensorFlow loads: the checkpoint and the files named exist."""
    if not os.path.exists(args.checkpoint) and "://" not in args.checkpoint:
        raise FileNotFoundError(f"checkpoint {args.checkpoint!r} does not exist")
    check_inputs_exist(args, "vocab", "calibration_file")
    check_window_stride(args.window_stride, None, "--window_stride")
    if args.max_windows is not None and args.max_windows < 0:
        raise ValueError(f"--max_windows must be at least 1, or 0 for no limit, got "
                         f"{args.max_windows}")
    if args.format == "openvino":
        _check_openvino_flags(args)


def run_export(args: argparse.Namespace) -> int:
    from keras_bert.checkpoints.reading import read_checkpoint
    from keras_bert.export.saved_model import check_export_target, export_model
    from keras_bert.models import BertPretrainer
    from keras_bert.tasks.checkpoint_models import model_of_checkpoint
    from keras_bert.tokenization.preprocessor import BertPreprocessor
    if not os.path.exists(args.checkpoint) and "://" not in args.checkpoint:
        raise FileNotFoundError(f"checkpoint {args.checkpoint!r} does not exist")
    if args.tf_hub:
        _check_tf_hub_flags(args)
    elif not args.model_name:
        raise ValueError("--model_name is required (the name the model is served as)")
    else:
        check_export_target(args.export_base, args.model_name, args.version)  # before loading
    calibration_texts = None
    if args.calibration_file is not None:
        if args.quantize != "int8":
            raise ValueError("--calibration_file is for int8 exports: add --quantize int8")
        if args.tf_hub:
            raise ValueError("--calibration_file does not apply to --tf_hub (TF Hub int8 "
                             "encoders find each row's range per call)")
        from keras_bert.export.int8 import read_calibration_file
        from keras_bert.models.int8_calibration import check_calibration_texts
        calibration_texts = check_calibration_texts(read_calibration_file(args.calibration_file),
                                                    args.calibration_file)
    checkpoint = read_checkpoint(args.checkpoint)  # read once: the model and its vocabulary
    model = model_of_checkpoint(checkpoint)
    if isinstance(model, BertPretrainer) and not args.tf_hub:
        logger.info("%s has pretraining heads; exporting its encoder", args.checkpoint)
        model = model.encoder
    elif isinstance(model, BertPretrainer) and args.quantize:
        logger.info("%s has pretraining heads; an int8 TF Hub encoder has no mlm (the head "
                    "reads the int8 word embeddings), so exporting its encoder",
                    args.checkpoint)
        model = model.encoder
    if args.window_stride is not None or args.window_combination is not None:
        if not hasattr(model, "set_windows"):
            raise ValueError(f"--window_stride and --window_combination apply to classifiers; "
                             f"{args.checkpoint!r} holds a {type(model).__name__}")
        model.set_windows(args.window_combination, args.window_stride)
    vocab = args.vocab
    lower_case = args.do_lower_case
    preprocessor = None
    if vocab is None and getattr(model, "preprocessor", None) is None:
        if checkpoint.vocabulary is None:
            raise FileNotFoundError(f"no vocabulary (vocab.txt or tokenizer.json) in "
                                    f"{args.checkpoint!r}; pass --vocab")
        preprocessor = BertPreprocessor.from_checkpoint(checkpoint, lower_case, args.seq_length)
    if args.tf_hub:
        from keras_bert.export.tf_hub import export_tf_hub
        encoder_dir, preprocess_dir = export_tf_hub(model, preprocessor, args.export_base,
                                                    vocab_file=vocab, lower_case=lower_case,
                                                    seq_length=args.seq_length,
                                                    quantize=args.quantize)
        print(f"exported a TF Hub encoder to {encoder_dir} and its preprocessing to "
              f"{preprocess_dir}")
        return 0
    path = export_model(model, args.export_base, args.model_name, args.version,
                        preprocessor=preprocessor, vocab_file=vocab, lower_case=lower_case,
                        seq_length=args.seq_length,
                        text_pair=args.text_pair, mixed_precision=args.mixed_precision,
                        dynamic_padding=args.dynamic_padding, quantize=args.quantize,
                        calibration_texts=calibration_texts,
                        serving_default=args.serving_default, format=args.format,
                        max_windows=args.max_windows)
    print(f"exported {args.model_name} to {path}{_int8_note(args, model, calibration_texts)}")
    return 0


def _int8_note(args: argparse.Namespace, model, calibration_texts) -> str:
    """What an int8 export calibrated on, for the line that reports it."""
    if args.quantize != "int8":
        return ""
    if calibration_texts is not None:
        return f" (int8, calibrated on {len(calibration_texts)} texts of {args.calibration_file})"
    from keras_bert.models.int8_calibration import kept_calibration_texts
    kept = kept_calibration_texts(model)
    if kept:
        return f" (int8, calibrated on {len(kept)} of the texts it was trained on)"
    return (" (int8, input ranges found per row: pass --calibration_file with a few hundred "
            "texts like the served ones for the faster calibrated export)")


def _check_openvino_flags(args: argparse.Namespace) -> None:
    """--format openvino: OpenVINO installed, and no SavedModel-only flag, before the
    checkpoint loads."""
    from keras_bert.export.openvino_extra import check_openvino

    try:
        check_openvino()
    except ImportError as error:
        raise ValueError(str(error)) from None
    saved_model_only = [flag for flag, given in (
        ("--tf_hub", args.tf_hub), ("--mixed_precision", args.mixed_precision is not None),
        ("--no_dynamic_padding", not args.dynamic_padding),
        ("--serving_default", args.serving_default != "text")) if given]
    if saved_model_only:
        raise ValueError(f"{', '.join(saved_model_only)} do not apply to --format openvino, "
                         f"which writes float32 or int8 IR on raw text")
    from keras_bert.checkpoints.formats import CALIBRATION_TEXTS_NAME
    kept = os.path.join(args.checkpoint, CALIBRATION_TEXTS_NAME)
    if args.quantize == "int8" and args.calibration_file is None and not os.path.exists(kept):
        raise ValueError(f"--format openvino --quantize int8 needs --calibration_file (NNCF "
                         f"measures activation ranges on its texts): {args.checkpoint!r} "
                         f"keeps no {CALIBRATION_TEXTS_NAME} of its training texts")


def _check_tf_hub_flags(args: argparse.Namespace) -> None:
    """--tf_hub writes a new directory of two SavedModels: refuses the TF Serving-only flags,
    and an existing EXPORT_BASE, before the checkpoint loads."""
    serving_only = [f"--{name}" for name in ("model_name", "version", "text_pair",
                                             "mixed_precision", "window_stride",
                                             "window_combination", "max_windows")
                    if getattr(args, name) is not None]
    if args.serving_default != "text":
        serving_only.append("--serving_default")
    if serving_only:
        raise ValueError(f"{', '.join(serving_only)} do not apply to --tf_hub, which writes "
                         f"EXPORT_BASE/encoder and EXPORT_BASE/preprocess")
    from keras_bert import fileio
    if fileio.exists(args.export_base):
        raise FileExistsError(f"{args.export_base!r} exists; export the TF Hub pair to a new "
                              f"directory")
