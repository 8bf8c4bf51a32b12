"""A task from outside keras_bert: a package of its own, found through the ``keras_bert.tasks``
entry point group, runs under `keras-bert finetune --task` end to end with its own options, flags,
model (a BertTask with its own ``to_arrays`` and the inherited ``from_pretrained``), metric and
result fields."""

import json
import os
import subprocess
import sys

import pytest

from tests.tasks.tiny_checkpoint import tiny_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TOY_TASK = '''
"""A toy task: how many words a text has (one text per line)."""

import dataclasses

import keras
import numpy as np

from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.models.task import BertTask
from keras_bert.recipe.inputs import as_string_array
from keras_bert.tasks.spec import CommonOptions, TaskSpec, require_vocabulary


@keras.saving.register_keras_serializable(package="toy_tasks")
class BertWordCounter(BertTask):
    default_seq_length = 16

    def __init__(self, encoder, preprocessor=None, **kwargs):
        head = keras.layers.Dense(1, name="count")
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUT_NAMES}
        outputs = head(encoder(inputs)["pooled_output"])
        super().__init__(inputs=inputs, outputs=outputs, encoder=encoder,
                         preprocessor=preprocessor, **kwargs)

    def to_arrays(self, x, y=None):
        if y is None and x and isinstance(x[0], dict):
            y = [example["words"] for example in x]
        texts = as_string_array([e["text"] if isinstance(e, dict) else e for e in x], "text")
        return texts, (None if y is None else np.asarray(y, np.float32).reshape(-1, 1))

    def default_loss(self):
        return keras.losses.MeanSquaredError()

    def get_config(self):
        return self._base_config()


@dataclasses.dataclass
class WordCountOptions(CommonOptions):
    tolerance: float = 0.5


class WordCountSpec(TaskSpec):
    name = "word-count"
    primary_metric = "within_tolerance"
    help = "how many words a text has"
    default_seq_length = 16
    options_class = WordCountOptions

    def add_arguments(self, parser):
        group = parser.add_argument_group("word-count")
        group.add_argument("--tolerance", type=float, default=WordCountOptions.tolerance,
                           help="a count this close to the truth is right")

    def read_examples(self, path, options, with_labels=True):
        with open(path) as f:
            return [{"text": line.strip(), "words": len(line.split())} for line in f]

    def build_model(self, checkpoint, labels, train_examples, options, lower_case=None):
        return require_vocabulary(BertWordCounter.from_checkpoint(
            checkpoint, options.seq_length, lower_case=lower_case), checkpoint)

    def evaluate(self, model, examples, options, batch_size=32):
        truth = model.to_arrays(examples)[1].reshape(-1)
        counts = model.predict(examples, batch_size=batch_size, verbose=0).reshape(-1)
        right = float(np.mean(np.abs(counts - truth) <= options.tolerance))
        return {"within_tolerance": right}, {"counts.json": [float(c) for c in counts]}

    def result_fields(self, options):
        return {"tolerance": options.tolerance}


TASKS = [WordCountSpec()]
'''

TEXTS = ["the cat sat", "john lives in paris", "a dog", "mary works in london city",
         "the movie was good", "it ran away"]


def install_toy_package(root):
    """The toy task as an installed distribution would leave it: the package and a dist-info
    directory whose entry_points.txt names its TASKS."""
    (root / "toy_tasks").mkdir(parents=True)
    (root / "toy_tasks" / "__init__.py").write_text("")
    (root / "toy_tasks" / "task.py").write_text(TOY_TASK)
    info = root / "toy_tasks-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-tasks\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[keras_bert.tasks]\ntoy = toy_tasks.task:TASKS\n")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "uncased_tiny"), "google")


@pytest.mark.slow
def test_finetune_runs_a_task_from_another_package(tmp_path, checkpoint):
    install_toy_package(tmp_path / "site")
    (tmp_path / "train.txt").write_text("\n".join(TEXTS * 2) + "\n")
    (tmp_path / "dev.txt").write_text("\n".join(TEXTS[:3]) + "\n")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "keras_bert.cli", "finetune", "--task", "word-count",
         "--init_checkpoint", checkpoint, "--train_file", str(tmp_path / "train.txt"),
         "--dev_file", str(tmp_path / "dev.txt"), "--output_dir", str(out), "--epochs", "1",
         "--batch_size", "4", "--tolerance", "100", "--no_progress"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"),
                                                                    ROOT])},
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((out / "eval_results.json").read_text())
    assert results["task"] == "word-count" and results["primary_metric"] == "within_tolerance"
    assert results["best"] == {"within_tolerance": 1.0}  # every count within 100 words
    assert results["options"] == {"labels": None, "seq_length": 16, "tolerance": 100.0}
    assert results["tolerance"] == 100.0 and results["train_rows"] == 12
    assert len(json.loads((out / "counts.json").read_text())) == 3
    assert sorted(os.listdir(out / "best_model")) == [
        "bert_config.json", "calibration_texts.txt", "model.keras", "tokenizer_config.json",
        "vocab.txt"]
