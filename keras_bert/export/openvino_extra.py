"""What an OpenVINO version holds (OpenVINO Model Server's file names) and whether the
``openvino`` extra (OpenVINO, openvino-tokenizers, NNCF) is installed, found without importing
it: pure Python, for ``keras-bert export --format openvino`` and ``serve``, which look before
TensorFlow loads."""

from __future__ import annotations

import importlib.util

IR_FILE = "model.xml"  # the graph; OpenVINO Model Server finds a version by it
WEIGHTS_FILE = "model.bin"
OPENVINO_PACKAGES = ("openvino", "openvino_tokenizers", "nncf")
INSTALL_HINT = "pip install 'keras-bert-tf[openvino]' (openvino, openvino-tokenizers, nncf)"


def check_openvino() -> None:
    """Raises ImportError, in one line, naming what is missing and how to install it."""
    missing = [name for name in OPENVINO_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise ImportError(f"an OpenVINO export needs {', '.join(missing)}, which "
                          f"{'is' if len(missing) == 1 else 'are'} not installed: "
                          f"{INSTALL_HINT}")
