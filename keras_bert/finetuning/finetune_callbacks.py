"""What a fine-tuning run does after every epoch: ``DevEvaluation`` scores the dev set and
keeps the best model (``best_model/``, a keras-bert checkpoint written by ``save_checkpoint``,
with its dev predictions); ``EpochCheckpoint`` saves what
an interrupted run resumes from. Both are Keras callbacks, and the multi-worker loop calls their
``on_epoch_end`` itself (``finetune._fit_multi_worker``).
"""

from __future__ import annotations

import json
import logging
import tempfile

import keras
import tensorflow as tf

from keras_bert import fileio
from keras_bert.checkpoints.saving import save_checkpoint
from keras_bert.fileio import join
from keras_bert.tasks.spec import CommonOptions, TaskSpec
from keras_bert.tasks.reporting import score_line

logger = logging.getLogger(__name__)

BEST_MODEL_DIR = "best_model"


class DevEvaluation(keras.callbacks.Callback):
    """After each epoch: scores the dev set, logs it, and saves the model when it is the best.

    Args:
        task: the task, whose ``evaluate`` scores the dev set and whose ``primary_metric``
            picks the best epoch.
        options: the task's options.
        examples: the dev examples (None: no evaluation; the last epoch is the best).
        output_dir: where ``best_model/`` and the best epoch's dev predictions go.
        batch_size: the prediction batch size.
        write_outputs: False (the workers other than the chief) keeps the scores and the
            best epoch but writes nothing.

    ``state()`` and ``load_state()`` carry the scores so far across a resumed run, and the
    training loss as Keras reports it after each step (``steps``: [step, loss], the running
    mean of the epoch so far), which the run's curves plot.
    """

    def __init__(self, task: TaskSpec, options: CommonOptions, examples, output_dir: str,
                 batch_size: int, write_outputs: bool = True):
        super().__init__()
        self.task, self.options, self.examples = task, options, examples
        self.output_dir, self.batch_size = output_dir, batch_size
        self.write_outputs = write_outputs
        self.metric = task.primary_metric
        self.history: list[dict] = []
        self.best: dict | None = None
        self.steps: list[list[float]] = []
        self._epoch_start_step = 0

    def state(self) -> dict:
        return {"history": self.history, "best": self.best, "steps": self.steps}

    def load_state(self, state: dict) -> None:
        self.history, self.best = list(state["history"]), state["best"]
        self.steps = [list(step) for step in state.get("steps", [])]

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start_step = int(self.steps[-1][0]) if self.steps else 0

    def on_train_batch_end(self, batch, logs=None):
        if logs and "loss" in logs:
            self.steps.append([self._epoch_start_step + batch + 1, float(logs["loss"])])

    def on_epoch_end(self, epoch, logs=None):
        record = {"epoch": epoch + 1, **{k: float(v) for k, v in (logs or {}).items()}}
        if self.examples is not None:
            scores, artifacts = self.task.evaluate(self.model, self.examples, self.options,
                                                   self.batch_size)
            record["dev"] = scores
            logger.info("epoch %d: dev %s", epoch + 1, score_line(scores, self.metric))
        self.history.append(record)
        score = record["dev"][self.metric] if self.examples is not None else epoch
        if self.best is None or score > self.best["score"]:
            self.best = {"epoch": epoch + 1, "score": score, **record}
            if not self.write_outputs:
                return
            save_checkpoint(self.model, join(self.output_dir, BEST_MODEL_DIR),
                            overwrite=True)
            if self.examples is not None:
                self._write_artifacts(artifacts)

    def _write_artifacts(self, artifacts: dict) -> None:
        for name, value in artifacts.items():
            path = join(self.output_dir, name)
            if callable(value):
                value(path)
            else:
                fileio.write_json(path, value)


class EpochCheckpoint(keras.callbacks.Callback):
    """What an interrupted run resumes from, saved after every epoch (after the dev evaluation):
    the model's weights, the optimizer's state (its step drives the learning-rate schedule),
    the dropout layers' random state, the epochs done and the dev scores so far.

    ``tf.train.CheckpointManager`` replaces its index file atomically, so a run killed at any
    moment resumes from the last complete epoch. ``directory`` is where this worker saves; a
    worker other than the chief saves to a temporary directory (every worker of a multi-worker
    run must save) and restores from ``restore_from``, the chief's.

    Args:
        model: the compiled task model; its optimizer must be built.
        evaluation: the run's DevEvaluation, whose scores are saved and restored.
        directory: where to save (None: a temporary directory, removed by ``remove``).
        restore_from: where to look for the checkpoint to resume from (None: ``directory``).
    """

    def __init__(self, model: keras.Model, evaluation: DevEvaluation, directory: str | None,
                 restore_from: str | None = None):
        super().__init__()
        self.evaluation = evaluation
        self.directory = tempfile.mkdtemp(prefix="keras_bert_ckpt-") if directory is None \
            else directory
        self.restore_from = restore_from or self.directory
        self.epochs_done = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.scores = tf.Variable("", dtype=tf.string, trainable=False)
        # Keras' dropout seed generators are not part of the model's checkpoint graph; their
        # states make a resumed run draw the dropout masks an uninterrupted one would.
        random_state = tf.Module()
        random_state.variables_by_index = [v.value for v in model.non_trainable_variables]
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer,
                                              epochs_done=self.epochs_done, scores=self.scores,
                                              random_state=random_state)
        self.manager = tf.train.CheckpointManager(self.checkpoint, self.directory, max_to_keep=1)

    def restore(self) -> int:
        """Restores the latest checkpoint, if any; returns the epochs it had done (0: none)."""
        latest = tf.train.latest_checkpoint(self.restore_from)
        if latest is None:
            return 0
        self.checkpoint.restore(latest).assert_existing_objects_matched()
        self.evaluation.load_state(json.loads(self.scores.numpy().decode("utf-8")))
        return int(self.epochs_done.numpy())

    def on_epoch_end(self, epoch, logs=None):
        self.epochs_done.assign(epoch + 1)
        self.scores.assign(json.dumps(self.evaluation.state()))
        self.manager.save(checkpoint_number=epoch + 1)

    def remove(self) -> None:
        """Removes this worker's checkpoints (the run is finished)."""
        fileio.rmtree(self.directory)
