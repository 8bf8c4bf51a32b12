"""The fine-tuning run behind ``keras-bert finetune``: read the task's files, build the task
model on a pretrained encoder under the chosen tf.distribute strategy, train (tokenization in
tf.data, batches bucketed by length), score the dev set with the task's metric after every epoch,
keep the best model, and write the results as JSON.

Training is ``model.fit``, except under MultiWorkerMirroredStrategy, where Keras 3.15's fit does
not run: there every worker runs the custom loop of ``finetune_loop`` on its rows of the same
global batches and scores the dev set on a local copy of the model, outside any collective op.
Only the chief writes files.

Outputs in ``output_dir``: ``best_model/`` (``model.keras`` plus ``bert_config.json`` and
``vocab.txt``, loadable by every ``from_pretrained`` and as ``--init_checkpoint``),
``eval_results.json``, and the best epoch's dev predictions (SQuAD: ``predictions.json``,
``nbest_predictions.json``; NER: ``dev_predictions.conll``). Every file appears atomically.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Sequence

import keras
import tensorflow as tf

from keras_bert import fileio
from keras_bert.fileio import atomic_output_dir, atomic_write, join
from keras_bert.tasks import get_task
from keras_bert.tasks.base import CommonOptions, Task, TaskOptions
from keras_bert.training.finetune_loop import distribute_global_batches, fit_distributed

logger = logging.getLogger(__name__)

RESULTS_NAME = "eval_results.json"
BEST_MODEL_DIR = "best_model"


@dataclasses.dataclass
class FinetuneConfig:
    """Everything a fine-tuning run needs; the defaults are BERT's recipe.

    Args:
        task: a task name (``keras_bert.tasks.task_names()``).
        init_checkpoint: a Google TF1 directory, a Hugging Face directory, or ours
            (a keras-bert checkpoint or a previous run's ``best_model``); its vocab.txt is used.
        train_file, dev_file: the task's files (dev_file may be None: no evaluation, the last
            epoch is kept).
        output_dir: where the results go (local or gs://).
        options: the task's settings, an instance of its ``options_class`` (labels and
            seq_length, which every task has, and its own; None: its defaults). A TaskOptions
            (deprecated) is converted.
        learning_rate, batch_size, epochs, warmup_fraction, weight_decay: AdamW with linear
            warmup then decay (3e-5, 32, 3, 0.1, 0.01); the batch size is global (all
            replicas of all workers together).
        bucket_lengths: padded lengths for batching by length; None: seq_length/4, /2, 1.
        strategy, tpu: see ``keras_bert.training.distribute.get_strategy``.
        seed: shuffling and initialization seed.
        overwrite: replace the results of an earlier run in output_dir.
        verbose: progress output (0 silent, 1 progress bar, 2 one line per epoch); with
            several workers, the chief's progress bar only.
        lower_case: overrides the casing read from init_checkpoint (None: read it).

    Example:
    >>> from keras_bert.tasks.classification.task import ClassificationOptions
    >>> config = FinetuneConfig("classification", "uncased_L-12_H-768_A-12", "train.tsv",
    ...                         "dev.tsv", "out", ClassificationOptions(data_format="mrpc"))
    >>> config.learning_rate, config.batch_size, config.epochs, config.warmup_fraction
    (3e-05, 32, 3, 0.1)
    """
    task: str
    init_checkpoint: str
    train_file: str
    dev_file: str | None
    output_dir: str
    options: CommonOptions | TaskOptions | None = None
    learning_rate: float = 3e-5
    batch_size: int = 32
    epochs: int = 3
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    bucket_lengths: Sequence[int] | None = None
    strategy: str | None = None
    tpu: str | None = None
    seed: int = 0
    overwrite: bool = False
    verbose: int | str = "auto"
    lower_case: bool | None = None


def write_json(path: str, value) -> None:
    """Writes JSON to a temporary name and renames it, so the file never appears half-written."""
    with atomic_write(path) as f:
        f.write(json.dumps(value, indent=2) + "\n")


def save_task_model(model, directory: str, vocab_file: str | None) -> None:
    """Saves a task model as a keras-bert checkpoint directory, atomically (replacing one)."""
    with atomic_output_dir(directory, overwrite=True) as scratch:
        model.save(os.path.join(scratch, "model.keras"))
        model.encoder.bert_config.to_json_file(os.path.join(scratch, "bert_config.json"))
        if vocab_file:
            fileio.copy(vocab_file, os.path.join(scratch, "vocab.txt"), overwrite=True)


class DevEvaluation(keras.callbacks.Callback):
    """After each epoch: scores the dev set, logs it, and saves the model when it is the best.

    ``write_outputs=False`` (the workers other than the chief) keeps the scores and the best
    epoch but writes nothing.
    """

    def __init__(self, config: FinetuneConfig, examples, vocab_file, write_outputs: bool = True):
        super().__init__()
        self.config, self.examples, self.vocab_file = config, examples, vocab_file
        self.task, self.write_outputs = get_task(config.task), write_outputs
        self.metric = self.task.primary_metric
        self.history: list[dict] = []
        self.best: dict | None = None

    def on_epoch_end(self, epoch, logs=None):
        record = {"epoch": epoch + 1, **{k: float(v) for k, v in (logs or {}).items()}}
        if self.examples is not None:
            scores, artifacts = self.task.evaluate(self.model, self.examples, self.config.options,
                                                   self.config.batch_size)
            record["dev"] = scores
            logger.info("epoch %d: dev %s = %.4f", epoch + 1, self.metric, scores[self.metric])
        self.history.append(record)
        score = record["dev"][self.metric] if self.examples is not None else epoch
        if self.best is None or score > self.best["score"]:
            self.best = {"epoch": epoch + 1, "score": score, **record}
            if not self.write_outputs:
                return
            save_task_model(self.model, join(self.config.output_dir, BEST_MODEL_DIR),
                            self.vocab_file)
            if self.examples is not None:
                self._write_artifacts(artifacts)

    def _write_artifacts(self, artifacts: dict) -> None:
        for name, value in artifacts.items():
            path = join(self.config.output_dir, name)
            if callable(value):
                value(path)
            else:
                write_json(path, value)


def _bucket_lengths(config: FinetuneConfig) -> list[int]:
    if config.bucket_lengths:
        lengths = sorted(int(b) for b in config.bucket_lengths)
        return lengths if lengths[-1] >= config.options.seq_length else [
            *lengths, config.options.seq_length]
    length = config.options.seq_length
    return sorted({max(length // 4, 8), max(length // 2, 8), length})


def _task_options(task: Task, options: CommonOptions | TaskOptions | None) -> CommonOptions:
    """``options`` as the task's own (None: its defaults; a deprecated TaskOptions: converted);
    ValueError when they are another task's."""
    if options is None:
        return task.options_class()
    if isinstance(options, TaskOptions):
        return task.make_options(options.settings)
    if not isinstance(options, task.options_class):
        raise ValueError(f"the {task.name} task takes {task.options_class.__name__}, not "
                         f"{type(options).__name__}")
    return options


def run_finetune(config: FinetuneConfig) -> dict:
    """Fine-tunes, evaluates after every epoch, keeps the best model; returns the results.

    Raises:
        DataError: bad input (missing label column, unknown label, empty text, an answer not
            in its context...), naming the file and line.
        FileExistsError: output_dir holds results and ``overwrite`` is False.
    """
    from keras_bert.checkpoints import find_vocab
    from keras_bert.training.distribute import get_strategy, worker_role
    from keras_bert.optimization.optimizers import create_optimizer

    task = get_task(config.task)
    results_path = join(config.output_dir, RESULTS_NAME)
    if fileio.exists(results_path) and not config.overwrite:
        raise FileExistsError(f"{results_path} exists; pass --overwrite to replace that run")
    strategy = get_strategy(config.strategy, config.tpu)
    multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    is_chief = worker_role(strategy)[0]
    options = _task_options(task, config.options)
    train = task.read_examples(config.train_file, options)
    dev = task.read_examples(config.dev_file, options) if config.dev_file else None
    options = task.resolve_options(options, [train, dev or []])
    config = dataclasses.replace(config, options=options)
    labels = task.label_names(train, options)
    keras.utils.set_random_seed(config.seed)
    with strategy.scope():
        model = task.build_model(config.init_checkpoint, labels, train, options,
                                 lower_case=config.lower_case)
        buckets = _bucket_lengths(config)
        is_tpu = isinstance(strategy, tf.distribute.TPUStrategy)

        def make_train_data() -> tf.data.Dataset:
            return model.make_dataset(train, batch_size=config.batch_size, shuffle=True,
                                      seed=config.seed, bucket_lengths=buckets,
                                      drop_remainder=is_tpu)

        train_data = (distribute_global_batches(strategy, make_train_data) if multi_worker
                      else make_train_data())
        if dev is not None:
            model.to_arrays(dev)  # bad dev labels fail now, with file and line, not after epoch 1
        rows = task.num_train_rows(model, train)
        steps_per_epoch = math.ceil(rows / config.batch_size) + len(buckets)
        total_steps = steps_per_epoch * config.epochs
        model.compile(optimizer=create_optimizer(
            config.learning_rate, total_steps, int(total_steps * config.warmup_fraction),
            weight_decay=config.weight_decay,
            learning_rate_multipliers=model.learning_rate_multipliers()))
    logger.info("fine-tuning %s on %d training rows (%s), %d epochs of about %d steps",
                config.task, rows, type(strategy).__name__, config.epochs, steps_per_epoch)
    evaluation = DevEvaluation(config, dev, find_vocab(config.init_checkpoint),
                               write_outputs=is_chief)
    if is_chief:
        fileio.makedirs(config.output_dir)
    if multi_worker:
        _fit_multi_worker(model, strategy, train_data, config, evaluation, steps_per_epoch,
                          progress=is_chief and config.verbose in (1, "auto"))
    else:
        model.fit(train_data, epochs=config.epochs, callbacks=[evaluation],
                  verbose=config.verbose)
    results = {
        "task": config.task, "primary_metric": task.primary_metric,
        "best_epoch": evaluation.best["epoch"], "best": evaluation.best.get("dev"),
        "epochs": evaluation.history, "train_rows": rows,
        "dev_examples": None if dev is None else len(dev), "labels": labels,
        "best_model": join(config.output_dir, BEST_MODEL_DIR),
        "config": {k: v for k, v in dataclasses.asdict(config).items() if k != "options"},
        "options": dataclasses.asdict(options),
        **task.result_fields(options),
    }
    if is_chief:
        write_json(results_path, results)
    return results


def _fit_multi_worker(model, strategy: tf.distribute.Strategy,
                      train_data: tf.distribute.DistributedDataset, config: FinetuneConfig,
                      evaluation: DevEvaluation, steps_per_epoch: int, progress: bool) -> None:
    """``model.fit`` for MultiWorkerMirroredStrategy, with ``evaluation`` after every epoch.

    Every worker trains on its rows of the same global batches (``finetune_loop``), then copies
    the weights into a model outside the strategy and evaluates that: the same scores on every
    worker, without collective ops (the other workers wait for the chief's saves at the next
    step's all-reduce).
    """
    local = type(model).from_config(model.get_config())  # not under strategy.scope(): local
    evaluation.set_model(local)

    def on_epoch_end(epoch: int, logs: dict) -> None:
        local.set_weights([v.numpy() for v in model.weights])
        evaluation.on_epoch_end(epoch, logs)

    fit_distributed(model, strategy, train_data, config.epochs, on_epoch_end, steps_per_epoch,
                    progress)
