"""Runs a SavedModel's raw-text ``serving_default`` as a CPU-only TF Serving does: in a process
that sees no GPU (the caller sets ``CUDA_VISIBLE_DEVICES=-1``), through TensorFlow's graph-mode
loader (tests/serving/graph_mode.py).

    python -m tests.gpu.serve_on_cpu SAVED_MODEL OUTPUTS.npz TEXT [TEXT ...]

Writes every output to OUTPUTS.npz and prints the devices TensorFlow saw as one JSON line.
"""

import json
import sys

import numpy as np
import tensorflow as tf

from tests.serving.graph_mode import GraphModeModel


def main(argv: list[str]) -> None:
    path, outputs_path, *texts = argv
    devices = sorted({d.device_type for d in tf.config.list_logical_devices()})
    outputs = GraphModeModel(path).run("serving_default", text=np.array(texts, object))
    np.savez(outputs_path, **outputs)
    print(json.dumps({"devices": devices}))


if __name__ == "__main__":
    main(sys.argv[1:])
