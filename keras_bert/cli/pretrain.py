"""`keras-bert pretrain`: pretrain BERT on TFRecords (flags follow Google's run_pretraining.py)."""

from __future__ import annotations

import argparse
import json
import logging

from keras_bert.cli.flags import add_bool_flag, check_inputs_exist
from keras_bert.config import BertConfig
from keras_bert.distribute import STRATEGIES
from keras_bert.optimization import OPTIMIZERS
from keras_bert.pretraining.settings import PretrainingSettings


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "pretrain",
        description="Pretrain BERT on TFRecords written by `keras-bert pretraining-data` "
                    "or google-research/bert. Rerunning with the same --output_dir resumes from "
                    "the last checkpoint. Writes checkpoints/, summaries/ (TensorBoard) and, at "
                    "the end, export/google (TF1 checkpoint) and export/keras.")
    io = parser.add_argument_group("inputs and outputs")
    io.add_argument("--input_file", required=True,
                    help="comma-separated globs of TFRecord files (local or gs://)")
    io.add_argument("--output_dir", required=True,
                    help="checkpoints/, summaries/ and export/ go here; rerun to resume")
    io.add_argument("--bert_config_file", help="bert_config.json of the model to train")
    io.add_argument("--preset", help=f"or a named architecture: {', '.join(BertConfig.presets())}")
    io.add_argument("--vocab_size", type=int,
                    help="with --preset: the vocabulary size of your data (default 30522)")
    io.add_argument("--init_checkpoint",
                    help="start from these weights: a Google, HF or keras-bert directory, or an "
                         "earlier pretraining run's --output_dir (a second phase)")
    add_bool_flag(io, "init_optimizer_state", False,
                  "with --init_checkpoint an earlier run: also take its optimizer state and "
                  "step, so the learning-rate schedule goes on (--num_train_steps then counts "
                  "both phases); false: weights only, the schedule starts again")
    io.add_argument("--vocab_file", help="copied into the export; needed by --dynamic_masking")
    io.add_argument("--no_export", dest="export", action="store_false",
                    help="skip export/google and export/keras at the end")

    data = parser.add_argument_group("data")
    data.add_argument("--max_seq_length", type=int, default=128,
                      help="the records' sequence length (default: %(default)s)")
    data.add_argument("--max_predictions_per_seq", type=int, default=20,
                      help="the records' masked positions per sequence (default: %(default)s)")
    data.add_argument("--dynamic_masking", action="store_true",
                      help="re-mask every batch instead of using the records' masks")
    data.add_argument("--whole_word_mask", action="store_true", help="with --dynamic_masking")
    data.add_argument("--masked_lm_prob", type=float, default=0.15,
                      help="with --dynamic_masking: share of tokens masked (default: %(default)s)")
    data.add_argument("--shuffle_buffer_size", type=int, default=1000,
                      help="examples in the shuffle buffer (default: %(default)s)")
    data.add_argument("--seed", type=int, default=12345,
                      help="shuffling, masking and initialization seed (default: %(default)s)")

    train = parser.add_argument_group("optimization")
    train.add_argument("--train_batch_size", type=int, default=PretrainingSettings.train_batch_size,
                       help="global examples per update (all replicas, all accumulation steps)")
    train.add_argument("--num_train_steps", type=int, default=PretrainingSettings.num_train_steps,
                       help="optimizer updates in all (default: %(default)s)")
    train.add_argument("--num_warmup_steps", type=int,
                       default=PretrainingSettings.num_warmup_steps,
                       help="linear warmup steps, then linear decay to 0 (default: %(default)s)")
    train.add_argument("--learning_rate", type=float, default=PretrainingSettings.learning_rate,
                       help="peak learning rate (default: %(default)s)")
    train.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw",
                       help="adamw: Google's AdamWeightDecay; lamb: for large batches "
                            "(default: %(default)s)")
    train.add_argument("--weight_decay", type=float, default=0.01,
                       help="decoupled weight decay, not on LayerNorm or biases "
                            "(default: %(default)s)")
    train.add_argument("--clip_norm", type=float, default=1.0, help="global norm; 0 disables")
    train.add_argument("--gradient_accumulation_steps", type=int, default=1,
                       help="micro-batches summed per update (default: %(default)s)")
    train.add_argument("--mixed_precision", choices=("none", "bf16", "fp16"), default="none",
                       help="compute dtype; bf16 for TPUs and recent GPUs/CPUs, fp16 with loss "
                            "scaling (default: %(default)s)")
    train.add_argument("--jit_compile", action="store_true",
                       help="compile each replica's forward and backward pass with XLA")

    evaluation = parser.add_argument_group("evaluation (as Google's run_pretraining.py)")
    evaluation.add_argument("--eval_input_file",
                            help="comma-separated globs of held-out TFRecords, evaluated at "
                                 "the end (results in OUTPUT_DIR/eval_results.txt)")
    add_bool_flag(evaluation, "do_eval", False,
                  "evaluate at the end; on --eval_input_file, else on --input_file as "
                  "Google's script does")
    evaluation.add_argument("--eval_batch_size", type=int, default=8,
                            help="examples per evaluation batch (default: %(default)s)")
    evaluation.add_argument("--max_eval_steps", type=int, default=100,
                            help="batches evaluated at most (default: %(default)s)")
    evaluation.add_argument("--eval_every_steps", type=int, default=0,
                            help="also evaluate every this many steps; TensorBoard shows the "
                                 "results (summaries/eval) beside the training curves "
                                 "(default: 0, only at the end)")

    run = parser.add_argument_group("run")
    run.add_argument("--strategy", choices=STRATEGIES, default="auto",
                     help="tf.distribute strategy; auto: TPU, several GPUs, or the default "
                          "(default: %(default)s)")
    run.add_argument("--tpu", help="TPU name or address ('local' on a TPU VM)")
    run.add_argument("--num_cpu_devices", type=int, default=0,
                     help="split the CPU into this many devices (data parallelism without GPUs)")
    run.add_argument("--steps_per_loop", type=int, default=100,
                     help="steps per compiled loop; also the logging/summary interval")
    run.add_argument("--save_checkpoints_steps", type=int, default=1000,
                     help="steps between checkpoints (default: %(default)s)")
    run.add_argument("--keep_checkpoint_max", type=int, default=5,
                     help="checkpoints kept (default: %(default)s)")
    run.add_argument("--no_checkpoint_input_pipeline", dest="checkpoint_input_pipeline",
                     action="store_false", help="do not save the input iterator (resume then "
                     "restarts the data order)")
    run.add_argument("--deterministic", action="store_true",
                     help="deterministic TensorFlow ops (bit-exact reruns; slower on GPU)")
    run.add_argument("--no_progress", dest="progress", action="store_false",
                     help="no progress bar (log a line per loop instead)")
    parser.set_defaults(run=run_pretrain,
                        check=lambda args: check_inputs_exist(args, "init_checkpoint",
                                                              "vocab_file"))


def _bert_config(args: argparse.Namespace) -> BertConfig | None:
    if args.bert_config_file and args.preset:
        raise ValueError("give --bert_config_file or --preset, not both")
    if args.bert_config_file:
        return BertConfig.from_json_file(args.bert_config_file)
    if args.preset:
        overrides = {"vocab_size": args.vocab_size} if args.vocab_size else {}
        return BertConfig.preset(args.preset, **overrides)
    return None


def run_pretrain(args: argparse.Namespace) -> int:
    # Devices and the strategy must be set up before any other TensorFlow work.
    from keras_bert.distribute import get_strategy, use_logical_cpu_devices
    if args.num_cpu_devices > 1:
        use_logical_cpu_devices(args.num_cpu_devices)
    strategy = get_strategy(args.strategy, tpu=args.tpu)
    from keras_bert.pretraining.run import PretrainingSettings, run_pretraining

    config = PretrainingSettings(
        input_files=args.input_file, output_dir=args.output_dir, bert_config=_bert_config(args),
        init_checkpoint=args.init_checkpoint, max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
        train_batch_size=args.train_batch_size, num_train_steps=args.num_train_steps,
        num_warmup_steps=args.num_warmup_steps, learning_rate=args.learning_rate,
        optimizer=args.optimizer, weight_decay=args.weight_decay,
        clip_norm=args.clip_norm or None,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        mixed_precision=args.mixed_precision, jit_compile=args.jit_compile,
        vocab_file=args.vocab_file,
        dynamic_masking=args.dynamic_masking, whole_word_mask=args.whole_word_mask,
        masked_lm_prob=args.masked_lm_prob, seed=args.seed,
        shuffle_buffer_size=args.shuffle_buffer_size, steps_per_loop=args.steps_per_loop,
        save_checkpoints_steps=args.save_checkpoints_steps,
        keep_checkpoint_max=args.keep_checkpoint_max,
        checkpoint_input_pipeline=args.checkpoint_input_pipeline,
        deterministic=args.deterministic, export=args.export, progress=args.progress,
        eval_input_files=args.eval_input_file or (args.input_file if args.do_eval else None),
        eval_batch_size=args.eval_batch_size, max_eval_steps=args.max_eval_steps,
        eval_every_steps=args.eval_every_steps,
        init_optimizer_state=args.init_optimizer_state)
    result = run_pretraining(config, strategy)
    logging.getLogger(__name__).info("finished at step %d", result.step)
    print(json.dumps({"step": result.step, "metrics": result.metrics,
                      "eval_metrics": result.eval_metrics,
                      "checkpoint": result.checkpoint, "export_dir": result.export_dir}))
    return 0
