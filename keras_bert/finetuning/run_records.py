"""A fine-tuning run's records in its output directory: the results of a finished run, and the
settings an interrupted run recorded, which the run resuming it must share (pure Python)."""

from __future__ import annotations

import dataclasses
import json
import logging

from keras_bert import fileio
from keras_bert.fileio import join

logger = logging.getLogger(__name__)

RESULTS_NAME = "eval_results.json"  # a finished run's results
CHECKPOINT_DIR = "checkpoints"  # what an interrupted run resumes from; removed when it finishes
RUN_SETTINGS_NAME = "finetune_settings.json"  # in CHECKPOINT_DIR: what a resumed run must match
# The settings a resumed run must share with the interrupted one (the others do not change what
# it computes).
RESUMED_SETTINGS = ("task", "init_checkpoint", "train_file", "dev_file", "learning_rate",
                    "batch_size", "epochs", "warmup_fraction", "weight_decay", "bucket_lengths",
                    "seed", "lower_case")


def run_settings(config) -> dict:
    """The settings of ``config`` (a ``FinetuneRun``) that a resumed run must share."""
    settings = {name: getattr(config, name) for name in RESUMED_SETTINGS}
    settings["options"] = dataclasses.asdict(config.options)
    return json.loads(json.dumps(settings))  # lists, not tuples, as read back


def check_same_run(config, checkpoint_dir: str) -> None:
    """ValueError when ``checkpoint_dir`` holds an interrupted run with other settings."""
    path = join(checkpoint_dir, RUN_SETTINGS_NAME)
    if not fileio.exists(path):
        return
    with fileio.open_file(path) as f:
        saved = json.load(f)
    wanted = run_settings(config)
    changed = [f"{name}: {saved.get(name)!r} -> {wanted[name]!r}" for name in wanted
               if saved.get(name) != wanted[name]]
    if changed:
        raise ValueError(f"{config.output_dir} holds an interrupted run with other settings "
                         f"({'; '.join(changed)}); rerun it as it was to resume, or pass "
                         f"--overwrite to start afresh")


def finished_run(output_dir: str) -> dict:
    """The results of the finished run in ``output_dir`` (its ``eval_results.json``), which is
    kept as it is."""
    with fileio.open_file(join(output_dir, RESULTS_NAME)) as f:
        results = json.load(f)
    logger.info("%s holds a finished run (%d epochs, best epoch %d); nothing to do: pass "
                "--overwrite to start afresh", output_dir, len(results["epochs"]),
                results["best_epoch"])
    return results


def write_run_settings(config, checkpoint_dir: str) -> None:
    """Records ``run_settings(config)`` in ``checkpoint_dir`` for a resumed run to check."""
    fileio.write_json(join(checkpoint_dir, RUN_SETTINGS_NAME), run_settings(config))
