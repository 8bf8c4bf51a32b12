"""Running an export the way TF Serving does: TensorFlow's graph-mode loader
(``tf.compat.v1.saved_model.loader.load``, the Python face of the C++ ``LoadSavedModel`` that
tensorflow_model_server links) into a graph and a session, and ``saved_model_cli run``."""

import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (TF Serving links tensorflow-text's ops)


class GraphModeModel:
    """A SavedModel loaded into a tf.Graph + tf.compat.v1.Session, signatures run by Session.run.

    ``signatures[name](**inputs)`` returns {output: tf.Tensor} (constants of the fetched values),
    so tests written against ``tf.saved_model.load`` read it the same way.
    """

    def __init__(self, path: str):
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph)
        with self.graph.as_default():
            meta_graph = tf.compat.v1.saved_model.loader.load(self.session, ["serve"], path)
        self.signature_defs = dict(meta_graph.signature_def)
        self.signatures = {name: self._runner(name) for name, signature
                           in self.signature_defs.items() if signature.inputs}

    def run(self, signature: str, **inputs) -> dict[str, np.ndarray]:
        signature_def = self.signature_defs[signature]
        feeds = {signature_def.inputs[k].name: np.asarray(v) for k, v in inputs.items()}
        return self.session.run({k: v.name for k, v in signature_def.outputs.items()}, feeds)

    def _runner(self, name: str):
        def run(**inputs):
            values = {k: v.numpy() if isinstance(v, tf.Tensor) else v for k, v in inputs.items()}
            return {k: tf.constant(v) for k, v in self.run(name, **values).items()}
        return run


# saved_model_cli's own main, once per command line, its absl flags back at their defaults
# before each (a flag one line set would otherwise stay set for the next), in one process that
# links tensorflow-text's ops as tensorflow_model_server does; each run's output follows a
# marker line.
SAVED_MODEL_CLI = ("import json, sys, tensorflow_text\n"
                   "from absl import flags\n"
                   "from tensorflow.python.tools import saved_model_cli\n"
                   "for args in json.loads(sys.argv[1]):\n"
                   "    flags.FLAGS.unparse_flags()\n"
                   "    print('@@saved_model_cli', flush=True)\n"
                   "    sys.argv = ['saved_model_cli', *args]\n"
                   "    try:\n"
                   "        saved_model_cli.main()\n"
                   "    except SystemExit as e:\n"
                   "        if e.code:\n"
                   "            raise\n")


def saved_model_cli_run(path: str, signature: str, input_exprs: str = "", inputs: str = "",
                        outdir: str = "") -> str:
    """``saved_model_cli run`` on ``signature``; returns what it printed. With ``outdir``, it
    writes each output there as <name>.npy."""
    return saved_model_cli_runs([dict(path=path, signature=signature, input_exprs=input_exprs,
                                      inputs=inputs, outdir=outdir)])[0]


def saved_model_cli_runs(runs: list[dict]) -> list[str]:
    """``saved_model_cli run`` for each of ``runs`` (saved_model_cli_run's arguments), one after
    another in one process (TensorFlow starts once); what each printed."""
    commands = []
    for run in runs:
        args = ["run", "--dir", run["path"], "--tag_set", "serve",
                "--signature_def", run["signature"]]
        for flag in ("outdir", "input_exprs", "inputs"):
            if run.get(flag):
                args += [f"--{flag}", run[flag]]
        commands.append(args)
    result = subprocess.run([sys.executable, "-c", SAVED_MODEL_CLI, json.dumps(commands)],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    printed = result.stdout.split("@@saved_model_cli\n")[1:]
    assert len(printed) == len(runs), result.stdout[-3000:]
    return printed
