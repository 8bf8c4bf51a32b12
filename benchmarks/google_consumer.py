"""Google's own inference path for a fine-tuned BERT checkpoint: google-research/bert's
run_classifier.py or run_squad.py ``create_model``, restored as their model_fn restores it, run on
packed ids under TensorFlow 2.x's ``tf.compat.v1`` graph mode.

It is the reference consumer for fine-tuned checkpoints that keras-bert reads or writes: a
checkpoint directory is right if Google's code restores every variable of its graph from it, uses
every model variable in it, and gives the expected logits.

Usage (from the repository root, in the project venv: tensorflow 2.21 and tf_keras)::

    python benchmarks/google_consumer.py --bert_repo /work/.mirror/google-research+bert/repo \\
        --checkpoint tests/fixtures/google_heads/classifier \\
        --inputs tests/fixtures/google_heads/classifier/expected.npz --output /tmp/classifier.json

``--bert_repo`` is a directory holding modeling.py, optimization.py, tokenization.py,
run_classifier.py and run_squad.py, or a git directory of google-research/bert (the files are
then taken from its HEAD into a temporary directory). ``--checkpoint`` is a directory with
bert_config.json and a TF1 checkpoint (the ``checkpoint`` file's latest entry, else the single
``*.index``), or a checkpoint prefix with bert_config.json beside it. ``--inputs`` is an .npz or
.json holding int32 ``input_ids``, ``input_mask`` and ``segment_ids`` [batch, seq_length].
The task comes from the checkpoint: ``output_weights`` [num_labels, hidden] is run_classifier.py's
head, ``cls/squad/output_weights`` [2, hidden] run_squad.py's. The output JSON holds ``logits``
and ``probabilities`` [batch, num_labels] (classifier) or ``start_logits`` and ``end_logits``
[batch, seq_length] (squad), the checkpoint prefix, and the checkpoint variables left unused
because they are training state (``global_step``, AdamWeightDecayOptimizer's ``adam_m`` /
``adam_v``), which an inference graph has no variables for, as in Google's own prediction.

The TF 2.x shim, all of it (``load_google_modules``):

- ``TF_USE_LEGACY_KERAS=1`` before TensorFlow is imported, so that ``tf.compat.v1.layers.dense``
  (modeling.py's dense layers) exists: TensorFlow 2.16+ takes it from tf_keras.
- ``tf.compat.v1.disable_v2_behavior()``: graph mode, and TensorShape dimensions with ``.value``
  (run_classifier.py reads ``output_layer.shape[-1].value``).
- Each file is executed as a module whose ``tf`` is ``tensorflow.compat.v1`` plus one function,
  ``tf.contrib.layers.layer_norm`` (TF 1.x's, rewritten below: ``beta`` and ``gamma`` under the
  scope, ``LayerNorm`` by default, epsilon 1e-12); the file's line ``import tensorflow as tf`` is turned
  into a comment so that the name stays bound, and line numbers stay those of Google's file.

run_classifier.py and run_squad.py define the same absl flags, so one process imports only one of
them (the one the checkpoint needs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import types

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tf.compat.v1.layers (modeling.py's dense) is tf_keras'
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

GOOGLE_FILES = ("tokenization.py", "optimization.py", "modeling.py", "run_classifier.py",
                "run_squad.py")
TF_IMPORT = "import tensorflow as tf\n"
TASK_SCRIPTS = {"classifier": "run_classifier", "squad": "run_squad"}
HEAD_WEIGHTS = {"classifier": "output_weights", "squad": "cls/squad/output_weights"}
INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")
# What Google's fine-tuning saves besides the model: the step and AdamWeightDecayOptimizer's slots.
TRAINING_STATE = re.compile(r"^global_step$|/adam_[mv]$")


# ------------------------------------------------------------------------------------------ shim
def contrib_layer_norm(inputs, begin_norm_axis=1, begin_params_axis=-1, scope=None):
    """TF 1.x's ``tf.contrib.layers.layer_norm`` for float32 with its defaults (center and scale,
    no activation): variables ``beta`` (zeros) and ``gamma`` (ones) of shape
    ``inputs.shape[begin_params_axis:]`` under ``scope`` (default ``LayerNorm``), moments over
    axes ``begin_norm_axis:``, epsilon 1e-12."""
    v1 = tf.compat.v1
    with v1.variable_scope(scope, "LayerNorm", [inputs]):
        inputs = tf.convert_to_tensor(inputs)
        rank = inputs.shape.ndims
        params_shape = inputs.shape[begin_params_axis:]
        beta = v1.get_variable("beta", shape=params_shape, dtype=inputs.dtype,
                               initializer=v1.zeros_initializer())
        gamma = v1.get_variable("gamma", shape=params_shape, dtype=inputs.dtype,
                                initializer=v1.ones_initializer())
        norm_axes = list(range(begin_norm_axis % rank, rank))
        mean, variance = tf.nn.moments(inputs, norm_axes, keepdims=True)
        outputs = tf.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma,
                                             variance_epsilon=1e-12)
        outputs.set_shape(inputs.shape)
        return outputs


class TensorFlowV1(types.ModuleType):
    """The ``tf`` that Google's files see: ``tensorflow.compat.v1``, plus
    ``contrib.layers.layer_norm``, the only ``tf.contrib`` function their model code calls."""

    def __init__(self):
        super().__init__("tensorflow_compat_v1_for_google_bert")
        self.contrib = types.SimpleNamespace(
            layers=types.SimpleNamespace(layer_norm=contrib_layer_norm))

    def __getattr__(self, name):
        return getattr(tf.compat.v1, name)


def google_files(bert_repo: str) -> str:
    """A directory holding GOOGLE_FILES: ``bert_repo`` itself, or, for a git directory of
    google-research/bert, a temporary directory with the files of its HEAD."""
    if os.path.exists(os.path.join(bert_repo, "modeling.py")):
        return bert_repo
    if not os.path.exists(os.path.join(bert_repo, "HEAD")):
        raise SystemExit(f"--bert_repo {bert_repo!r} holds neither modeling.py nor a git "
                         "repository of google-research/bert")
    directory = tempfile.mkdtemp(prefix="google_bert_")
    for name in GOOGLE_FILES:
        source = subprocess.run(["git", "--git-dir", bert_repo, "show", f"HEAD:{name}"],
                                check=True, capture_output=True, text=True).stdout
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write(source)
    return directory


def load_google_modules(bert_repo: str, task: str) -> dict[str, types.ModuleType]:
    """Imports tokenization, optimization, modeling and the task's script (run_classifier or
    run_squad) from ``bert_repo`` under the shim above; returns them by module name."""
    tf.compat.v1.disable_v2_behavior()
    tf1 = TensorFlowV1()
    directory = google_files(bert_repo)
    modules = {}
    for name in ("tokenization", "optimization", "modeling", TASK_SCRIPTS[task]):
        path = os.path.join(directory, name + ".py")
        with open(path, encoding="utf-8") as f:
            source = f.read()
        if source.count(TF_IMPORT) != 1:
            raise SystemExit(f"{path} does not have exactly one line {TF_IMPORT.strip()!r}; "
                             "this shim expects google-research/bert's files")
        module = types.ModuleType(name)
        module.__file__ = path
        module.tf = tf1
        sys.modules[name] = module  # `import modeling` in run_classifier.py finds this one
        code = compile(source.replace(TF_IMPORT, "# " + TF_IMPORT), path, "exec")
        exec(code, module.__dict__)  # noqa: S102  (Google's file, run as `import` would run it)
        modules[name] = module
    return modules


# ------------------------------------------------------------------------------ the checkpoint
def find_checkpoint(path: str) -> tuple[str, str]:
    """(checkpoint prefix, bert_config.json path) for a directory or a checkpoint prefix."""
    if os.path.exists(path + ".index"):
        prefix = path
    else:
        prefix = tf.train.latest_checkpoint(path)
        if prefix is None:
            indexes = sorted(f for f in os.listdir(path) if f.endswith(".index"))
            if len(indexes) != 1:
                raise SystemExit(f"{path!r} has no 'checkpoint' file and {len(indexes)} *.index "
                                 "files; pass the checkpoint prefix")
            prefix = os.path.join(path, indexes[0][:-len(".index")])
    config = os.path.join(os.path.dirname(prefix), "bert_config.json")
    if not os.path.exists(config):
        raise SystemExit(f"no bert_config.json beside the checkpoint {prefix!r}")
    return prefix, config


def checkpoint_task(prefix: str) -> tuple[str, int]:
    """('classifier', num_labels) or ('squad', 2), from the head variable in the checkpoint."""
    shapes = dict(tf.train.list_variables(prefix))
    tasks = [task for task, name in HEAD_WEIGHTS.items() if name in shapes]
    if len(tasks) != 1:
        raise SystemExit(f"{prefix!r} holds {' and '.join(HEAD_WEIGHTS[t] for t in tasks) or 'neither'}"
                         f" of {' / '.join(HEAD_WEIGHTS.values())}: not one fine-tuned head of "
                         "run_classifier.py or run_squad.py")
    return tasks[0], shapes[HEAD_WEIGHTS[tasks[0]]][0]


def build_model(modules: dict[str, types.ModuleType], task: str, bert_config_file: str,
                num_labels: int, batch_size: int, seq_length: int):
    """(placeholders, outputs) of the task's ``create_model(is_training=False)`` in the current
    graph. Placeholders: int32 [batch_size, seq_length] named as INPUT_NAMES. Outputs: classifier
    ``logits``, ``probabilities`` [batch, num_labels]; squad ``start_logits``, ``end_logits``
    [batch, seq_length]; both ``pooled_output`` [batch, hidden] and ``sequence_output``
    [batch, seq_length, hidden], BertModel's, found in the graph by op name."""
    v1 = tf.compat.v1
    bert_config = modules["modeling"].BertConfig.from_json_file(bert_config_file)
    inputs = {name: v1.placeholder(tf.int32, [batch_size, seq_length], name=name)
              for name in INPUT_NAMES}
    if task == "classifier":
        labels = tf.zeros([batch_size], tf.int32)  # create_model's loss needs some; not fetched
        _, _, logits, probabilities = modules["run_classifier"].create_model(
            bert_config, False, inputs["input_ids"], inputs["input_mask"],
            inputs["segment_ids"], labels, num_labels, use_one_hot_embeddings=False)
        outputs = {"logits": logits, "probabilities": probabilities}
    else:
        start_logits, end_logits = modules["run_squad"].create_model(
            bert_config, False, inputs["input_ids"], inputs["input_mask"],
            inputs["segment_ids"], use_one_hot_embeddings=False)
        outputs = {"start_logits": start_logits, "end_logits": end_logits}
    graph = v1.get_default_graph()
    outputs["pooled_output"] = graph.get_tensor_by_name("bert/pooler/dense/Tanh:0")
    outputs["sequence_output"] = graph.get_operation_by_name("bert/pooler/strided_slice").inputs[0]
    return inputs, outputs


def init_from_checkpoint_strictly(modules: dict[str, types.ModuleType], prefix: str) -> list[str]:
    """Google's restore (``modeling.get_assignment_map_from_checkpoint`` over the trainable
    variables, then ``tf.train.init_from_checkpoint``), refusing a checkpoint that leaves a graph
    variable uninitialized or holds a model variable the graph does not use. Returns the
    checkpoint's training state (TRAINING_STATE), which an inference graph does not use."""
    v1 = tf.compat.v1
    assignment_map, _ = modules["modeling"].get_assignment_map_from_checkpoint(
        v1.trainable_variables(), prefix)
    missing = sorted(v.op.name for v in v1.global_variables() if v.op.name not in assignment_map)
    unused = sorted(name for name, _ in tf.train.list_variables(prefix)
                    if name not in assignment_map)
    training_state = [name for name in unused if TRAINING_STATE.search(name)]
    unexpected = [name for name in unused if not TRAINING_STATE.search(name)]
    if missing or unexpected:
        raise SystemExit("\n".join(
            [f"checkpoint {prefix!r} does not fit Google's graph:"]
            + [f"  graph variable not in the checkpoint: {name}" for name in missing]
            + [f"  checkpoint variable not used by the graph: {name}" for name in unexpected]))
    v1.train.init_from_checkpoint(prefix, assignment_map)
    return training_state


def run_checkpoint(modules: dict[str, types.ModuleType], checkpoint: str,
                   inputs: dict[str, np.ndarray]) -> dict:
    """Builds the checkpoint's task model in a new graph, restores it strictly, runs ``inputs``
    (INPUT_NAMES, int32 [batch, seq_length]) and returns the outputs of ``build_model`` as
    arrays, with ``task``, ``checkpoint`` (the prefix) and ``ignored_checkpoint_variables``."""
    prefix, config_file = find_checkpoint(checkpoint)
    task, num_labels = checkpoint_task(prefix)
    batch_size, seq_length = np.shape(inputs["input_ids"])
    with tf.Graph().as_default():
        placeholders, outputs = build_model(modules, task, config_file, num_labels, batch_size,
                                            seq_length)
        ignored = init_from_checkpoint_strictly(modules, prefix)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            values = session.run(outputs, {placeholders[name]: np.asarray(inputs[name], np.int32)
                                           for name in INPUT_NAMES})
    return {"task": task, "checkpoint": prefix, "ignored_checkpoint_variables": ignored, **values}


def read_inputs(path: str) -> dict[str, np.ndarray]:
    """INPUT_NAMES from an .npz or .json file, as int32 arrays [batch, seq_length]."""
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    else:
        with np.load(path) as data:
            values = {name: data[name] for name in data.files}
    missing = [name for name in INPUT_NAMES if name not in values]
    if missing:
        raise SystemExit(f"--inputs {path!r} lacks {', '.join(missing)}")
    return {name: np.asarray(values[name], np.int32) for name in INPUT_NAMES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bert_repo", required=True,
                        help="directory with google-research/bert's files, or its git directory")
    parser.add_argument("--checkpoint", required=True,
                        help="fine-tuned checkpoint directory (or prefix) with bert_config.json")
    parser.add_argument("--inputs", required=True,
                        help=".npz or .json with input_ids, input_mask, segment_ids")
    parser.add_argument("--output", required=True, help="JSON file to write")
    args = parser.parse_args()
    prefix, _ = find_checkpoint(args.checkpoint)
    task, _ = checkpoint_task(prefix)
    modules = load_google_modules(args.bert_repo, task)
    result = run_checkpoint(modules, args.checkpoint, read_inputs(args.inputs))
    fields = (("logits", "probabilities") if task == "classifier"
              else ("start_logits", "end_logits"))
    report = {"task": task, "checkpoint": result["checkpoint"],
              "ignored_checkpoint_variables": result["ignored_checkpoint_variables"],
              **{name: result[name].tolist() for name in fields}}
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    print(f"{task}: {', '.join(fields)} of {len(result[fields[0]])} rows -> {args.output}")


if __name__ == "__main__":
    main()
