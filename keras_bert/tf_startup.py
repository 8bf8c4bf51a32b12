"""TensorFlow started without the lines its C++ side writes while it loads.

Importing TensorFlow writes to file descriptor 2 before its log level applies: "All log messages
before absl::InitializeLog() is called are written to STDERR", the CUDA stub's "Could not find
cuda drivers", the CPU-feature notice and, on a machine without a GPU, a red
"E0000 ... failed call to cuInit". TF_CPP_MIN_LOG_LEVEL does not stop all of them (it is read
too late for the first ones), and a Jupyter kernel forwards descriptor 2 into the cell's output.
``start_tensorflow_quietly`` imports TensorFlow and lists its devices with descriptor 2 sent to a
scratch file, so those lines go nowhere unless the start-up fails. The command line
(``keras_bert.cli``) and the Colab notebooks call it; importing this module loads no TensorFlow.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile


@contextlib.contextmanager
def stderr_captured():
    """Sends file descriptor 2 (where C++ libraries write) to a temporary file for the block;
    if the block raises, what was captured is written out before the error propagates."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def start_tensorflow_quietly() -> None:
    """Imports TensorFlow and initialises its devices without the start-up lines it writes from
    C++ (the absl notice, the oneDNN notice, the CUDA stub and CPU-feature lines, and the cuInit
    error on machines without a GPU). Unless TF_CPP_MIN_LOG_LEVEL is set, TensorFlow's later
    C++ logs are kept to errors (level 2). If the start-up fails, what it wrote is shown with
    the error. Call it before anything imports TensorFlow (``import keras`` does); once
    TensorFlow is loaded its start-up lines are already out, and this only lists the devices.

    >>> import keras_bert
    >>> keras_bert.start_tensorflow_quietly()
    >>> import tensorflow as tf  # already loaded: nothing more is written
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with stderr_captured():
        import tensorflow as tf
        tf.config.list_physical_devices()
