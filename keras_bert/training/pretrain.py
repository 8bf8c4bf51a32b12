"""A BERT pretraining run: build under a strategy, train with checkpoints and resume, export.

``run_pretraining(PretrainingConfig(...))`` trains a BertPretrainer on pretraining TFRecords with
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
    summaries/                 TensorBoard scalars: losses, accuracies, learning rate, grad norm, speed
    export/google/             bert_config.json, bert_model.ckpt.*, vocab.txt (when given)
    export/keras/              model.keras, bert_config.json, vocab.txt
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import uuid

import keras
import tensorflow as tf
import tqdm
from tensorflow.core.framework import summary_pb2

from keras_bert.config import BertConfig
from keras_bert.io_utils import join
from keras_bert.models import BertEncoder, BertPretrainer
from keras_bert.training.distribute import get_strategy, num_local_replicas
from keras_bert.training.optimization import create_optimizer
from keras_bert.training.pretraining_input import pretraining_dataset
from keras_bert.training.pretraining_loss import summarize
from keras_bert.training.pretraining_step import make_eval_loop, make_train_loop

logger = logging.getLogger(__name__)

MIXED_PRECISION = {None: None, "none": None, "bf16": "mixed_bfloat16",
                   "mixed_bfloat16": "mixed_bfloat16", "fp16": "mixed_float16",
                   "mixed_float16": "mixed_float16"}


@dataclasses.dataclass
class PretrainingConfig:
    """Settings of a pretraining run (defaults: the paper's, at sequence length 128).

    Args:
        input_files: comma-separated globs of pretraining TFRecords (local or gs://).
        output_dir: where checkpoints, summaries and the export go; a rerun resumes from it.
        bert_config: the architecture; may be None with ``init_checkpoint`` (its config is used).
        init_checkpoint: start from these weights (Google, HF or keras-bert directory), e.g. the
            sequence-length-128 phase when training the 512 phase. Ignored when resuming.
        max_seq_length, max_predictions_per_seq: the lengths the records were written with.
        train_batch_size: global examples per optimizer update, over all replicas and
            accumulation steps.
        num_train_steps, num_warmup_steps, learning_rate, optimizer, weight_decay, clip_norm:
            see ``create_optimizer``.
        gradient_accumulation_steps: micro-batches per update (memory per step / this).
        mixed_precision: None, "bf16" (TPUs, recent GPUs/CPUs) or "fp16" (with loss scaling).
        vocab_file: copied into the export; required for ``dynamic_masking``.
        dynamic_masking: re-mask every batch (RoBERTa-style) instead of the records' masks.
        whole_word_mask, masked_lm_prob: dynamic masking options.
        seed: weight initialisation, dropout, shuffling and masking seed.
        deterministic: deterministic TensorFlow ops, for bit-exact reruns (slower on GPUs).
        shuffle_buffer_size: records held for shuffling.
        steps_per_loop: steps per compiled loop call; also the summary and logging interval.
        save_checkpoints_steps, keep_checkpoint_max: checkpoint interval and how many to keep.
        checkpoint_input_pipeline: save the input iterator, for exact resume.
        eval_input_files, eval_batch_size, max_eval_steps: evaluate at the end on these records.
        export: write export/google and export/keras at the end.
        progress: show a progress bar (steps/s, ETA).
    """

    input_files: str
    output_dir: str
    bert_config: BertConfig | None = None
    init_checkpoint: str | None = None
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    train_batch_size: int = 256
    num_train_steps: int = 1_000_000
    num_warmup_steps: int = 10_000
    learning_rate: float = 1e-4
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    clip_norm: float | None = 1.0
    gradient_accumulation_steps: int = 1
    mixed_precision: str | None = None
    vocab_file: str | None = None
    dynamic_masking: bool = False
    whole_word_mask: bool = False
    masked_lm_prob: float = 0.15
    seed: int = 12345
    deterministic: bool = False
    shuffle_buffer_size: int = 1000
    steps_per_loop: int = 100
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    checkpoint_input_pipeline: bool = True
    eval_input_files: str | None = None
    eval_batch_size: int = 8
    max_eval_steps: int = 100
    export: bool = True
    progress: bool = True

    def validate(self, num_replicas: int = 1) -> None:
        """Raises ValueError naming the setting that cannot work."""
        if self.bert_config is None and not self.init_checkpoint:
            raise ValueError("give bert_config (e.g. --bert_config_file or --preset) or "
                             "init_checkpoint")
        if self.mixed_precision not in MIXED_PRECISION:
            raise ValueError(f"mixed_precision must be one of bf16, fp16 or none, got "
                             f"{self.mixed_precision!r}")
        for name in ("train_batch_size", "num_train_steps", "steps_per_loop",
                     "save_checkpoints_steps", "gradient_accumulation_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        parts = num_replicas * self.gradient_accumulation_steps
        if self.train_batch_size % parts:
            raise ValueError(f"train_batch_size={self.train_batch_size} is not divisible by "
                             f"{num_replicas} replica(s) x gradient_accumulation_steps="
                             f"{self.gradient_accumulation_steps}; make it a multiple of {parts}")
        if self.dynamic_masking and not self.vocab_file:
            raise ValueError("dynamic_masking needs vocab_file (the [MASK] id and the tokens)")

    def to_json(self) -> str:
        values = dataclasses.asdict(self)
        values["bert_config"] = self.bert_config.to_dict() if self.bert_config else None
        return json.dumps(values, indent=2, sort_keys=True)


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


def _is_chief(strategy: tf.distribute.Strategy) -> tuple[bool, int]:
    """(whether this task writes the shared outputs, its worker index)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type or isinstance(strategy, tf.distribute.TPUStrategy):
        return True, 0
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    is_chief = resolver.task_type == "chief" or (not has_chief and resolver.task_id == 0)
    return is_chief, (resolver.task_id or 0) + (1 if has_chief and not is_chief else 0)


def _scalar_metadata() -> summary_pb2.SummaryMetadata:
    """What TensorBoard's scalar plugin writes; lets tf.summary.write work without tensorboard."""
    metadata = summary_pb2.SummaryMetadata(data_class=summary_pb2.DATA_CLASS_SCALAR)
    metadata.plugin_data.plugin_name = "scalars"
    return metadata


def _checkpoint_step(path: str) -> int:
    """The step of a CheckpointManager path (``.../ckpt-<step>``)."""
    return int(path.rsplit("-", 1)[1])


def _write_text_atomically(path: str, text: str) -> None:
    temp = f"{path}.tmp-{uuid.uuid4().hex}"
    with tf.io.gfile.GFile(temp, "w") as f:
        f.write(text)
    tf.io.gfile.rename(temp, path, overwrite=True)


def _build(config: PretrainingConfig, resuming: bool):
    """The pretrainer and its optimizer; call under ``strategy.scope()``."""
    dtype = MIXED_PRECISION[config.mixed_precision]
    if config.init_checkpoint and not resuming:
        model = BertPretrainer.from_pretrained(config.init_checkpoint, dtype=dtype)
        logger.info("initialised from %s", config.init_checkpoint)
    else:
        bert_config = config.bert_config or BertEncoder.from_pretrained(
            config.init_checkpoint).bert_config
        model = BertPretrainer(BertEncoder.from_bert_config(bert_config, dtype=dtype))
    optimizer = create_optimizer(
        config.learning_rate, config.num_train_steps, config.num_warmup_steps,
        weight_decay=config.weight_decay, optimizer=config.optimizer, clipnorm=config.clip_norm,
        loss_scale=dtype == "mixed_float16")
    optimizer.build(model.trainable_variables)
    return model, optimizer


def run_pretraining(config: PretrainingConfig,
                    strategy: tf.distribute.Strategy | None = None) -> PretrainingResult:
    """Pretrains (or resumes pretraining) as ``config`` says; see the module docstring.

    Args:
        config: the run's settings.
        strategy: defaults to ``get_strategy()`` (chosen from the machine).

    Returns:
        The final step, the metrics of the last loop (loss, mlm_loss, mlm_accuracy, nsp_loss,
        nsp_accuracy, grad_norm, learning_rate, steps_per_second), the last checkpoint and
        the export directory.

    Example:
        >>> result = run_pretraining(PretrainingConfig(
        ...     "data/*.tfrecord", "runs/tiny", BertConfig.preset("L-2_H-128_A-2"),
        ...     train_batch_size=32, num_train_steps=1000, num_warmup_steps=100))
    """
    strategy = strategy or get_strategy()
    config.validate(strategy.num_replicas_in_sync)
    if config.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(config.seed)
    is_chief, worker_index = _is_chief(strategy)
    checkpoint_dir = join(config.output_dir, "checkpoints")
    if not is_chief:
        checkpoint_dir = join(checkpoint_dir, f"worker_{worker_index}")
    tf.io.gfile.makedirs(checkpoint_dir)
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    if is_chief:
        _write_text_atomically(join(config.output_dir, "pretraining_config.json"),
                               config.to_json())

    with strategy.scope():
        model, optimizer = _build(config, resuming=latest is not None)
    masker = None
    if config.dynamic_masking:
        from keras_bert.data.dynamic_masking import DynamicMasker
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

    train_loop = make_train_loop(model, optimizer, strategy, config.gradient_accumulation_steps,
                                 split_worker_batch=config.checkpoint_input_pipeline)
    writer = tf.summary.create_file_writer(join(config.output_dir, "summaries")) if is_chief \
        else tf.summary.create_noop_writer()
    current = int(step.numpy())
    metrics: dict[str, float] = {}
    progress = tqdm.tqdm(total=config.num_train_steps, initial=current, unit="step",
                         disable=not (config.progress and is_chief), dynamic_ncols=True)
    while current < config.num_train_steps:
        num_steps = min(config.steps_per_loop, config.num_train_steps - current,
                        config.save_checkpoints_steps - current % config.save_checkpoints_steps)
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
    progress.close()
    writer.flush()

    eval_metrics = None
    if config.eval_input_files:
        eval_metrics = evaluate_pretraining(
            model, config.eval_input_files, config.eval_batch_size, config.max_seq_length,
            config.max_predictions_per_seq, config.max_eval_steps, strategy)
        logger.info("evaluation at step %d: %s", current,
                    ", ".join(f"{k}={v:.4g}" for k, v in eval_metrics.items()))
        with writer.as_default():
            for name, value in eval_metrics.items():
                tf.summary.write(f"eval/{name}", tf.constant(value, tf.float32), step=current,
                                 metadata=_scalar_metadata())
        writer.flush()

    export_dir = None
    if config.export and is_chief:
        from keras_bert.checkpoints import save_checkpoint
        export_dir = join(config.output_dir, "export")
        for fmt in ("google", "keras"):
            save_checkpoint(model, join(export_dir, fmt), fmt, vocab_file=config.vocab_file,
                            overwrite=True)
    return PretrainingResult(step=current, metrics=metrics, checkpoint=manager.latest_checkpoint,
                             export_dir=export_dir, eval_metrics=eval_metrics, model=model)


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
