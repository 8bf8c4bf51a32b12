"""The fine-tuning run behind ``keras-bert finetune``: read the task's files, build the task
model on a pretrained encoder under the chosen tf.distribute strategy, train (examples tokenized
once, batches grouped by length), score the dev set with the task's metric after every epoch,
keep the best model, and write the results as JSON.

Training is ``model.fit``, except under MultiWorkerMirroredStrategy, where Keras 3.15's fit does
not run: there every worker runs the custom loop of ``finetune_loop`` on its rows of the same
global batches and scores the dev set on a local copy of the model, outside any collective op.
Only the chief writes files.

Outputs in ``output_dir``: ``best_model/`` (``model.keras`` plus ``bert_config.json`` and
``vocab.txt``, loadable by every ``from_pretrained`` and as ``--init_checkpoint``),
``eval_results.json`` (the dev scores with their baseline, and a ``warning`` when the best
model learned nothing useful: one class for every row, or no better than always guessing the
most frequent one), ``training_curves.png`` (loss and dev score), and the best epoch's dev
predictions (classification, regression and multiple choice: ``dev_predictions.jsonl``;
SQuAD: ``predictions.json``, ``nbest_predictions.json``; NER: ``dev_predictions.conll``).
Every file appears atomically.

A run resumes: after every epoch the weights, optimizer state, dropout random state, the
epoch and the dev scores so far go to ``output_dir/checkpoints/`` (``EpochCheckpoint``, in
``finetune_callbacks`` with the dev evaluation), and epoch e's batches are a function of
(seed, e), so the same command rerun after a crash goes on at the interrupted epoch and ends as
an uninterrupted run would. A finished run (its ``eval_results.json`` is there) is reported and
left as it is; ``overwrite`` starts afresh.
"""

from __future__ import annotations

import dataclasses
import logging

import keras
import tensorflow as tf

from keras_bert import fileio
from keras_bert.fileio import join
from keras_bert.config import FinetuneSettings
from keras_bert.recipe.fit import fit_plan, keep_text_sample, use_recipe_optimizer
from keras_bert.recipe.plan import FinetuningPlan
from keras_bert.tasks import get_task
from keras_bert.tasks.spec import CommonOptions, TaskSpec
from keras_bert.checkpoints.reading import read_checkpoint
from keras_bert.tasks.reporting import learning_warning
from keras_bert.finetuning.curves import CURVES_NAME, plot_training_curves
from keras_bert.distribute import get_strategy, worker_role
from keras_bert.finetuning.finetune_callbacks import (BEST_MODEL_DIR, DevEvaluation,
                                                      EpochCheckpoint)
from keras_bert.finetuning.finetune_loop import distribute_global_batches, fit_distributed
from keras_bert.finetuning.run_records import (CHECKPOINT_DIR, RESULTS_NAME, check_same_run,
                                               finished_run, write_run_settings)

logger = logging.getLogger(__name__)

@dataclasses.dataclass
class FinetuneRun(FinetuneSettings):
    """Everything a fine-tuning run needs; the recipe's fields (``learning_rate``,
    ``batch_size``, ``epochs``, ``warmup_fraction``, ``weight_decay``, ``bucket_lengths``) are
    ``FinetuneSettings``', with BERT's defaults, given by keyword.

    Args:
        task: a task name (``keras_bert.tasks.task_names()``).
        init_checkpoint: a Google TF1 directory, a Hugging Face directory, or ours
            (a keras-bert checkpoint or a previous run's ``best_model``); its vocab.txt is used.
        train_file, dev_file: the task's files (dev_file may be None: no evaluation, the last
            epoch is kept).
        output_dir: where the results go (local or gs://).
        options: the task's settings, an instance of its ``options_class`` (labels and
            seq_length, which every task has, and its own; None: its defaults).
        strategy, tpu: see ``keras_bert.distribute.get_strategy``.
        seed: shuffling and initialization seed; epoch e's batches depend on (seed, e) only.
        overwrite: start afresh, discarding an earlier run in output_dir (finished or
            interrupted); without it an interrupted run resumes and a finished one is kept.
        verbose: progress output (0 silent, 1 progress bar, 2 one line per epoch); with
            several workers, the chief's progress bar only.
        lower_case: overrides the casing read from init_checkpoint (None: read it).

    The batch size is global (all replicas of all workers together).

    Example:
    >>> from keras_bert.tasks.classification.task import ClassificationOptions
    >>> config = FinetuneRun("classification", "uncased_L-12_H-768_A-12", "train.tsv",
    ...                      "dev.tsv", "out", ClassificationOptions(data_format="mrpc"))
    >>> config.learning_rate, config.batch_size, config.epochs, config.warmup_fraction
    (0.0001, 32, 3, 0.1)
    """
    task: str
    init_checkpoint: str
    train_file: str
    dev_file: str | None
    output_dir: str
    options: CommonOptions | None = None
    strategy: str | None = None
    tpu: str | None = None
    seed: int = 0
    overwrite: bool = False
    verbose: int | str = "auto"
    lower_case: bool | None = None


def _task_options(task: TaskSpec, options: CommonOptions | None) -> CommonOptions:
    """``options`` as the task's own (None: its defaults); ValueError when they are another
    task's."""
    if options is None:
        return task.options_class()
    if not isinstance(options, task.options_class):
        raise ValueError(f"the {task.name} task takes {task.options_class.__name__}, not "
                         f"{type(options).__name__}")
    return options


def _learning_hint(config: FinetuneRun) -> str:
    """What to try when a run learned nothing: more epochs, a higher learning rate."""
    hints = [f"more epochs (--epochs {max(3, 2 * config.epochs)})"]
    default = FinetuneSettings.learning_rate  # the rate that made short runs learn (config.py)
    if config.learning_rate < default:
        hints.append(f"a higher learning rate (--learning_rate {default:g})")
    return "try " + " or ".join(hints)


def run_finetune(config: FinetuneRun) -> dict:
    """Fine-tunes, evaluates after every epoch, keeps the best model; returns the results.

    Rerun on the same ``output_dir``, an interrupted run resumes at the epoch it was in, and a
    finished run returns its results as they are, writing nothing (``overwrite`` starts
    afresh in both cases).

    Raises:
        DataError: bad input (missing label column, unknown label, empty text, an answer not
            in its context...), naming the file and line.
        ValueError: output_dir holds an interrupted run with other settings.
    """
    task = get_task(config.task)
    results_path = join(config.output_dir, RESULTS_NAME)
    checkpoint_dir = join(config.output_dir, CHECKPOINT_DIR)
    strategy = get_strategy(config.strategy, config.tpu)
    multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    is_chief = worker_role(strategy)[0]
    if fileio.exists(results_path) and not config.overwrite:
        return finished_run(config.output_dir)
    options = _task_options(task, config.options)
    with strategy.scope():  # a saved keras-bert model's variables are the strategy's
        checkpoint = read_checkpoint(config.init_checkpoint)  # read once, for every use below
    if options.seq_length is None and checkpoint.seq_length:
        # the length a sentence-transformers checkpoint says it is read at comes first (at
        # most the encoder's positions, as from_pretrained takes it)
        options = dataclasses.replace(options, seq_length=min(
            checkpoint.seq_length, checkpoint.config.max_position_embeddings))
    train, dev = task.read_run_files(options, config.train_file, config.dev_file)
    options = task.resolve_options(options, [train, dev or []])
    config = dataclasses.replace(config, options=options)
    if config.overwrite and is_chief:
        fileio.rmtree(checkpoint_dir)
        if fileio.exists(results_path):
            fileio.remove(results_path)
    check_same_run(config, checkpoint_dir)
    labels = task.label_names(train, options)
    keras.utils.set_random_seed(config.seed)
    with strategy.scope():
        model = task.build_model(checkpoint, labels, train, options,
                                 lower_case=config.lower_case)
    if dev is not None:
        model.to_arrays(dev)  # bad dev labels fail now, with file and line, not after epoch 1
    # Outside the strategy's scope: the plan's epoch counter is a plain variable tf.data reads.
    plan = FinetuningPlan(model, train, settings=config.settings(), seed=config.seed)
    use_recipe_optimizer(model, plan)  # built before a checkpoint is restored into it
    keep_text_sample(model, plan)  # saved with best_model/, for int8 calibration
    evaluation = DevEvaluation(task, options, dev, config.output_dir, config.batch_size,
                               write_outputs=is_chief)
    checkpoint = EpochCheckpoint(model, evaluation, checkpoint_dir if is_chief else None,
                                 restore_from=checkpoint_dir)
    initial_epoch = checkpoint.restore()
    if multi_worker:
        _check_same_epoch(strategy, initial_epoch, checkpoint_dir)
    if initial_epoch:
        logger.info("resuming the run in %s after epoch %d of %d", config.output_dir,
                    initial_epoch, config.epochs)
    logger.info("fine-tuning %s on %d training rows (%s), %d epoch%s of %d steps",
                config.task, plan.rows, type(strategy).__name__, config.epochs,
                "s" * (config.epochs != 1), plan.steps_per_epoch)
    if is_chief:
        fileio.makedirs(checkpoint_dir)
        write_run_settings(config, checkpoint_dir)
    if multi_worker:
        _fit_multi_worker(model, strategy, distribute_global_batches(strategy, plan.make_dataset),
                          config, evaluation, checkpoint, plan, initial_epoch,
                          progress=is_chief and config.verbose in (1, "auto"))
    elif initial_epoch < config.epochs:
        fit_plan(model, plan, callbacks=[evaluation, checkpoint], initial_epoch=initial_epoch,
                 verbose=config.verbose)
    results = {
        "task": config.task, "primary_metric": task.primary_metric,
        "best_epoch": evaluation.best["epoch"], "best": evaluation.best.get("dev"),
        "epochs": evaluation.history, "train_rows": plan.rows,
        "dev_examples": None if dev is None else len(dev), "labels": labels,
        "best_model": join(config.output_dir, BEST_MODEL_DIR),
        "config": {k: v for k, v in dataclasses.asdict(config).items()
                   if k not in ("options", "overwrite")},
        "options": dataclasses.asdict(options),
        **task.result_fields(options),
    }
    warning = (learning_warning(results["best"], _learning_hint(config))
               if results["best"] is not None else None)
    if warning:
        results["warning"] = warning
    if is_chief:
        plot_training_curves(join(config.output_dir, CURVES_NAME), evaluation.history,
                             evaluation.steps, task.primary_metric)
        fileio.write_json(results_path, results)
    checkpoint.remove()
    return results


def _check_same_epoch(strategy: tf.distribute.Strategy, epoch: int, checkpoint_dir: str) -> None:
    """ValueError on every worker when the workers would resume at different epochs (their
    output_dir is not one shared directory), before their steps could fall out of step."""
    value = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant([1.0, epoch, epoch * epoch], tf.float32))
    count, total, squares = strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None).numpy()
    if squares * count != total * total:  # the epochs' variance is not 0
        raise ValueError(f"the workers found checkpoints of different epochs in "
                         f"{checkpoint_dir}; every worker must be given the same output_dir, on "
                         f"storage they all reach (gs://)")


def _fit_multi_worker(model, strategy: tf.distribute.Strategy,
                      train_data: tf.distribute.DistributedDataset, config: FinetuneRun,
                      evaluation: DevEvaluation, checkpoint: EpochCheckpoint,
                      plan: FinetuningPlan, initial_epoch: int, progress: bool) -> None:
    """``model.fit`` for MultiWorkerMirroredStrategy, with ``evaluation`` and ``checkpoint``
    after every epoch.

    Every worker trains on its rows of the same global batches (``finetune_loop``), then copies
    the weights into a model outside the strategy and evaluates that: the same scores on every
    worker, without collective ops (the other workers wait for the chief's saves at the next
    step's all-reduce).
    """
    local = type(model).from_config(model.get_config())  # not under strategy.scope(): local
    local.calibration_texts = model.calibration_texts  # saved with best_model/
    evaluation.set_model(local)

    def on_epoch_end(epoch: int, logs: dict) -> None:
        local.set_weights([v.numpy() for v in model.weights])
        evaluation.on_epoch_end(epoch, logs)
        checkpoint.on_epoch_end(epoch, logs)

    fit_distributed(model, strategy, train_data, config.epochs, on_epoch_end,
                    plan.steps_per_epoch, progress, initial_epoch=initial_epoch,
                    on_epoch_begin=plan.on_epoch_begin)
