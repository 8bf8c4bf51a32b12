"""A BERT pretraining run: build under a strategy, train with checkpoints and resume, export.

``run_pretraining(PretrainingSettings(...))`` trains a BertPretrainer on pretraining TFRecords with
the custom loop of ``pretraining_step`` (works on CPU, GPUs, several workers and TPUs). Every
``save_checkpoints_steps`` it writes model, optimizer, step and input-iterator state with
``tf.train.CheckpointManager`` (the ``checkpoint`` index file is replaced atomically, so a run
killed at any moment resumes from the last complete checkpoint and, with a deterministic
pipeline, reproduces the uninterrupted run). TensorBoard summaries go to ``summaries/``. At the
end it exports a Google TF1 checkpoint and a ``.keras`` save that ``BertEncoder.from_pretrained``
and ``BertPretrainer.from_pretrained`` load.

Output directory layout::

    pretraining_config.json   the run's settings
    checkpoints/ckpt-<step>.*  the last keep_checkpoint_max checkpoints (other workers: worker_<i>/)
    summaries/                 TensorBoard scalars: losses, accuracies, learning rate, speed
    export/google/             bert_config.json, bert_model.ckpt.*, vocab.txt (when given)
    export/keras/              model.keras, bert_config.json, vocab.txt
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time

import keras
import tensorflow as tf
import tqdm
from tensorflow.core.framework import summary_pb2

from keras_bert.pretraining.dynamic_masking import DynamicMasker
from keras_bert import fileio
from keras_bert.checkpoints.saving import save_checkpoint
from keras_bert.fileio import join
from keras_bert.checkpoints.reading import read_checkpoint
from keras_bert.config import BertConfig
from keras_bert.models import BertEncoder, BertPretrainer
from keras_bert.distribute import get_strategy, num_local_replicas, worker_role
from keras_bert.optimization.optimizers import create_optimizer
from keras_bert.pretraining.settings import MIXED_PRECISION, PretrainingSettings
from keras_bert.pretraining.input import check_record_lengths, pretraining_dataset
from keras_bert.pretraining.loss import summarize
from keras_bert.pretraining.step import make_eval_loop, make_pretraining_train_loop

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class PretrainingResult:
    """What a run ended with: the step, the metrics of its last loop (and of the evaluation,
    when asked for), the last checkpoint and the export directory."""

    step: int
    metrics: dict[str, float]
    checkpoint: str | None
    export_dir: str | None
    eval_metrics: dict[str, float] | None = None
    model: BertPretrainer | None = dataclasses.field(default=None, repr=False)


def _scalar_metadata() -> summary_pb2.SummaryMetadata:
    """What TensorBoard's scalar plugin writes; lets tf.summary.write work without tensorboard."""
    metadata = summary_pb2.SummaryMetadata(data_class=summary_pb2.DATA_CLASS_SCALAR)
    metadata.plugin_data.plugin_name = "scalars"
    return metadata


def _checkpoint_step(path: str) -> int:
    """The step of a CheckpointManager path (``.../ckpt-<step>``)."""
    return int(path.rsplit("-", 1)[1])


def _check_same_model(config: PretrainingSettings, saved_path: str) -> None:
    """Raises ValueError when resuming a run whose saved architecture differs from ``config``'s."""
    if config.bert_config is None or not fileio.exists(saved_path):
        return
    with fileio.open_file(saved_path) as f:
        saved = json.load(f).get("bert_config") or {}
    wanted = config.bert_config.to_dict()
    changed = [f"{k}: {saved[k]!r} -> {wanted[k]!r}" for k in wanted
               if k in saved and saved[k] != wanted[k]]
    if changed:
        raise ValueError(f"{saved_path} holds checkpoints of another architecture "
                         f"({'; '.join(changed)}); resume with the same bert_config or use a "
                         "new output_dir (with init_checkpoint to start from those weights)")


def _write_text_atomically(path: str, text: str) -> None:
    with fileio.atomic_write(path) as f:
        f.write(text)


EVAL_RESULTS_NAME = "eval_results.txt"
# Our metric names -> Google's run_pretraining.py names in eval_results.txt.
GOOGLE_EVAL_NAMES = {"loss": "loss", "mlm_accuracy": "masked_lm_accuracy",
                     "mlm_loss": "masked_lm_loss", "nsp_accuracy": "next_sentence_accuracy",
                     "nsp_loss": "next_sentence_loss"}


def pretraining_run_checkpoint(path: str) -> str | None:
    """The latest training checkpoint when ``path`` is an earlier pretraining run (its
    output_dir, or that run's checkpoints/), else None."""
    for directory in (join(path, "checkpoints"), path):
        if fileio.isdir(directory) and fileio.exists(
                join(directory, "checkpoint")):
            return tf.train.latest_checkpoint(directory)
    return None


def _run_bert_config(run_dir: str) -> BertConfig | None:
    """The architecture an earlier pretraining run saved in its pretraining_config.json."""
    for path in (join(run_dir, "pretraining_config.json"),
                 join(run_dir, "..", "pretraining_config.json")):
        if fileio.exists(path):
            with fileio.open_file(path) as f:
                saved = json.load(f).get("bert_config")
            if saved:
                return BertConfig.from_dict(saved)
    return None


def _build(config: PretrainingSettings, resuming: bool):
    """The pretrainer, its optimizer and the earlier run's checkpoint to start from (when
    init_checkpoint names one); call under ``strategy.scope()``."""
    dtype = MIXED_PRECISION[config.mixed_precision]
    run_checkpoint = (pretraining_run_checkpoint(config.init_checkpoint)
                      if config.init_checkpoint else None)
    if config.init_optimizer_state and run_checkpoint is None:
        raise ValueError(f"init_optimizer_state needs an earlier pretraining run as "
                         f"init_checkpoint (a directory with checkpoints/); "
                         f"{config.init_checkpoint!r} is not one")
    if config.init_checkpoint and not resuming and run_checkpoint is None:
        model = BertPretrainer.from_pretrained(config.init_checkpoint, dtype=dtype)
        logger.info("initialised from %s", config.init_checkpoint)
    else:
        bert_config = config.bert_config or (
            _run_bert_config(config.init_checkpoint) if run_checkpoint
            else read_checkpoint(config.init_checkpoint).config)
        if bert_config is None:
            raise ValueError(f"{config.init_checkpoint!r} has no pretraining_config.json; "
                             "pass bert_config (--bert_config_file)")
        model = BertPretrainer(BertEncoder.from_bert_config(bert_config, dtype=dtype))
    optimizer = create_optimizer(
        config.learning_rate, config.num_train_steps, config.num_warmup_steps,
        weight_decay=config.weight_decay, optimizer=config.optimizer, clipnorm=config.clip_norm,
        loss_scale=dtype == "mixed_float16")
    optimizer.build(model.trainable_variables)
    if model.encoder.bert_config.max_position_embeddings < config.max_seq_length:
        raise ValueError(
            f"max_seq_length={config.max_seq_length} is longer than the model's "
            f"max_position_embeddings={model.encoder.bert_config.max_position_embeddings}; "
            "train the first phase with as many positions as the second needs (BERT's configs "
            "have 512)")
    return model, optimizer, (None if resuming else run_checkpoint)


def run_pretraining(config: PretrainingSettings,
                    strategy: tf.distribute.Strategy | None = None) -> PretrainingResult:
    """Pretrains (or resumes pretraining) as ``config`` says; see the module docstring.

    Args:
        config: the run's settings.
        strategy: defaults to ``get_strategy()`` (chosen from the machine).

    Returns:
        The final step, the metrics of the last loop (loss, mlm_loss, mlm_accuracy, nsp_loss,
        nsp_accuracy, grad_norm, learning_rate, steps_per_second), the last checkpoint and
        the export directory.

    Example (needs TFRecords, e.g. from ``keras-bert pretraining-data``)::

        result = run_pretraining(PretrainingSettings(
            "data/*.tfrecord", "runs/tiny", BertConfig.preset("L-2_H-128_A-2"),
            train_batch_size=32, num_train_steps=1000, num_warmup_steps=100))
    """
    strategy = strategy or get_strategy()
    config.validate(strategy.num_replicas_in_sync)
    for files in (config.input_files, config.eval_input_files):
        if files:  # before building anything: the end-of-run evaluation would fail last
            check_record_lengths(files, config.max_seq_length, config.max_predictions_per_seq)
    if config.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(config.seed)
    is_chief, worker_index = worker_role(strategy)
    checkpoint_dir = join(config.output_dir, "checkpoints")
    if not is_chief:
        checkpoint_dir = join(checkpoint_dir, f"worker_{worker_index}")
    fileio.makedirs(checkpoint_dir)
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    config_path = join(config.output_dir, "pretraining_config.json")
    if latest:
        _check_same_model(config, config_path)
    if is_chief:
        _write_text_atomically(config_path, config.to_json())

    with strategy.scope():
        model, optimizer, run_checkpoint = _build(config, resuming=latest is not None)
    masker = None
    if config.dynamic_masking:
        masker = DynamicMasker(config.vocab_file, config.max_predictions_per_seq,
                               config.masked_lm_prob, config.whole_word_mask, seed=config.seed)
    local_replicas = num_local_replicas(strategy)
    num_workers = strategy.num_replicas_in_sync // local_replicas

    def make_dataset(batch_size, context, seed):
        return pretraining_dataset(
            config.input_files, batch_size, config.max_seq_length,
            config.max_predictions_per_seq, seed=seed,
            shuffle_buffer_size=config.shuffle_buffer_size, masker=masker, input_context=context)

    if config.checkpoint_input_pipeline:
        # One host iterator per worker (tf.data iterators are checkpointable, distributed ones
        # are not); each step splits its batch among the worker's replicas.
        context = tf.distribute.InputContext(num_workers, worker_index,
                                             strategy.num_replicas_in_sync)
        iterator = iter(make_dataset(config.train_batch_size // num_workers, context,
                                     config.seed))
    else:
        # Per-replica pipelines prefetching to the devices (fastest on TPUs); a resumed run
        # reads a freshly seeded order rather than the one it was interrupted in.
        seed = config.seed + (_checkpoint_step(latest) if latest else 0)
        iterator = iter(strategy.distribute_datasets_from_function(
            lambda context: make_dataset(
                config.train_batch_size // strategy.num_replicas_in_sync, context, seed)))
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    # Keras' dropout seed generators are not part of the model's checkpoint graph; saving their
    # states too makes a resumed run draw the dropout masks an uninterrupted one would.
    random_state = tf.Module()
    random_state.variables_by_index = [v.value for v in model.non_trainable_variables]
    tracked = dict(model=model, optimizer=optimizer, step=step, random_state=random_state)
    if config.checkpoint_input_pipeline:
        tracked["iterator"] = iterator
    checkpoint = tf.train.Checkpoint(**tracked)
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir,
                                         max_to_keep=config.keep_checkpoint_max)
    if latest:
        checkpoint.restore(latest).expect_partial().assert_existing_objects_matched()
        logger.info("resumed from %s at step %d", latest, int(step.numpy()))
    elif run_checkpoint:
        # A second phase: the earlier run's weights, and with init_optimizer_state its
        # optimizer moments and step (the schedule goes on), not its data position.
        parts = dict(model=model)
        if config.init_optimizer_state:
            parts.update(optimizer=optimizer, step=step)
        tf.train.Checkpoint(**parts).restore(run_checkpoint).expect_partial() \
            .assert_existing_objects_matched()
        logger.info("initialised from %s (%s)", run_checkpoint,
                    f"weights, optimizer state and step {int(step.numpy())}"
                    if config.init_optimizer_state else "weights; the schedule starts at 0")
        if int(step.numpy()) >= config.num_train_steps:
            raise ValueError(f"{run_checkpoint} ended at step {int(step.numpy())}; "
                             f"num_train_steps={config.num_train_steps} leaves nothing to "
                             "train (it counts both phases' steps)")

    train_loop = make_pretraining_train_loop(
        model, optimizer, strategy, config.gradient_accumulation_steps,
        split_worker_batch=config.checkpoint_input_pipeline, jit_compile=config.jit_compile)
    writer = tf.summary.create_file_writer(join(config.output_dir, "summaries")) if is_chief \
        else tf.summary.create_noop_writer()
    eval_writer = tf.summary.create_file_writer(join(config.output_dir, "summaries", "eval")) \
        if is_chief and config.eval_input_files else tf.summary.create_noop_writer()
    eval_metrics = None
    evaluated_at = None

    def evaluate():
        metrics = evaluate_pretraining(
            model, config.eval_input_files, config.eval_batch_size, config.max_seq_length,
            config.max_predictions_per_seq, config.max_eval_steps, strategy)
        logger.info("evaluation at step %d: %s", current,
                    ", ".join(f"{k}={v:.4g}" for k, v in metrics.items()))
        with eval_writer.as_default():  # the training curves' names, in summaries/eval
            for name, value in metrics.items():
                tf.summary.write(name, tf.constant(value, tf.float32), step=current,
                                 metadata=_scalar_metadata())
        eval_writer.flush()
        return metrics

    current = int(step.numpy())
    metrics: dict[str, float] = {}
    progress = tqdm.tqdm(total=config.num_train_steps, initial=current, unit="step",
                         disable=not (config.progress and is_chief), dynamic_ncols=True)
    while current < config.num_train_steps:
        num_steps = min(config.steps_per_loop, config.num_train_steps - current,
                        config.save_checkpoints_steps - current % config.save_checkpoints_steps)
        if config.eval_every_steps:
            num_steps = min(num_steps,
                            config.eval_every_steps - current % config.eval_every_steps)
        started = time.perf_counter()
        totals, grad_norm_sum = train_loop(iterator, tf.constant(num_steps, tf.int32))
        step.assign_add(num_steps)
        elapsed = time.perf_counter() - started
        current = int(step.numpy())
        metrics = summarize({name: value.numpy() for name, value in totals.items()})
        metrics.update(grad_norm=float(grad_norm_sum) / num_steps,
                       learning_rate=float(optimizer.learning_rate),
                       steps_per_second=num_steps / elapsed,
                       examples_per_second=num_steps * config.train_batch_size / elapsed)
        with writer.as_default():
            for name, value in metrics.items():
                tf.summary.write(name, tf.constant(value, tf.float32), step=current,
                                 metadata=_scalar_metadata())
        # The progress bar shows the loss; the full line goes to the log (INFO without a bar).
        logger.log(logging.DEBUG if not progress.disable else logging.INFO, "step %d/%d: %s",
                   current, config.num_train_steps,
                   ", ".join(f"{k}={v:.4g}" for k, v in metrics.items()))
        progress.set_postfix(loss=f"{metrics['loss']:.3f}",
                             mlm_acc=f"{metrics['mlm_accuracy']:.3f}")
        progress.update(num_steps)
        if current % config.save_checkpoints_steps == 0 or current == config.num_train_steps:
            path = manager.save(checkpoint_number=current)
            logger.info("saved checkpoint %s", path)
        if config.eval_every_steps and current % config.eval_every_steps == 0:
            eval_metrics, evaluated_at = evaluate(), current
    progress.close()
    writer.flush()

    if config.eval_input_files:
        if evaluated_at != current:
            eval_metrics = evaluate()
        if is_chief:
            _write_text_atomically(join(config.output_dir, EVAL_RESULTS_NAME),
                                   google_eval_results(eval_metrics, current))

    export_dir = None
    if config.export and is_chief:
        export_dir = join(config.output_dir, "export")
        for fmt in ("google", "keras"):
            save_checkpoint(model, join(export_dir, fmt), fmt, vocabulary=config.vocab_file,
                            overwrite=True)
    return PretrainingResult(step=current, metrics=metrics, checkpoint=manager.latest_checkpoint,
                             export_dir=export_dir, eval_metrics=eval_metrics, model=model)


def google_eval_results(metrics: dict[str, float], step: int) -> str:
    """eval_results.txt as Google's run_pretraining.py writes it: ``key = value`` lines, sorted,
    with its names (masked_lm_accuracy, masked_lm_loss, next_sentence_accuracy,
    next_sentence_loss, loss, global_step)."""
    values = {google: metrics[ours] for ours, google in GOOGLE_EVAL_NAMES.items()}
    values["global_step"] = step
    return "".join(f"{key} = {values[key]}\n" for key in sorted(values))


def evaluate_pretraining(model: BertPretrainer, input_files: str, batch_size: int,
                         max_seq_length: int, max_predictions_per_seq: int, max_steps: int,
                         strategy: tf.distribute.Strategy | None = None) -> dict[str, float]:
    """Masked-LM and next-sentence loss and accuracy on (at most max_steps batches of) records.

    Args:
        model: the pretrainer, built under ``strategy.scope()``.
        input_files: comma-separated globs of pretraining TFRecords, read once in order.
        batch_size: global examples per batch.
        max_seq_length, max_predictions_per_seq: the lengths the records were written with.
        max_steps: stop after this many batches.
        strategy: the model's strategy (default: the current one).

    Returns:
        loss, mlm_loss, mlm_accuracy, nsp_loss, nsp_accuracy and num_examples.
    """
    strategy = strategy or tf.distribute.get_strategy()
    per_replica_batch = max(batch_size // strategy.num_replicas_in_sync, 1)
    dataset = strategy.distribute_datasets_from_function(
        lambda context: pretraining_dataset(input_files, per_replica_batch, max_seq_length,
                                            max_predictions_per_seq, is_training=False,
                                            input_context=context))
    totals = make_eval_loop(model, strategy)(iter(dataset), tf.constant(max_steps, tf.int32))
    totals = {name: value.numpy() for name, value in totals.items()}
    return {**summarize(totals), "num_examples": float(totals["num_examples"])}
