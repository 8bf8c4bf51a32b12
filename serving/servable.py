"""One loaded SavedModel version: its SignatureDefs (as TF Serving reports them) and a way to run
each signature on NumPy inputs, directly or through a batch queue."""

from __future__ import annotations

import logging
import os

import numpy as np
import tensorflow as tf
from tensorflow.python.saved_model import loader_impl

from serving.batching import BatchQueue, BatchScheduler
from serving.errors import failed_precondition

logger = logging.getLogger(__name__)

SERVE_TAG = "serve"
DEFAULT_SIGNATURE = "serving_default"


def _import_custom_ops() -> None:
    """Registers tensorflow-text's ops, which raw-text SavedModels use (TF Serving links them)."""
    try:
        import tensorflow_text  # noqa: F401
    except ImportError:
        logger.warning("tensorflow_text is not installed; SavedModels with its ops will not load")


class Servable:
    """A SavedModel version directory, loaded and ready to run.

    Args:
        name: the model name it is served under.
        version: its version number (the directory name).
        path: the version directory (local or gs://).
        scheduler: when given, every batchable signature runs through its own batch queue.
    """

    def __init__(self, name: str, version: int, path: str,
                 scheduler: BatchScheduler | None = None):
        _import_custom_ops()
        self.name = name
        self.version = version
        self.path = path
        saved_model = loader_impl.parse_saved_model(path)
        meta_graphs = [m for m in saved_model.meta_graphs if SERVE_TAG in m.meta_info_def.tags]
        if not meta_graphs:
            raise ValueError(f"SavedModel {path!r} has no MetaGraph tagged {SERVE_TAG!r}")
        # All of them, __saved_model_init_op included, as TF Serving's metadata lists them.
        self.signature_defs = dict(meta_graphs[0].signature_def)
        self._loaded = tf.saved_model.load(path, tags=[SERVE_TAG])
        self._functions = dict(self._loaded.signatures)
        self._queues: dict[str, BatchQueue] = {}
        if scheduler is not None:
            for signature_name in self._functions:
                self._queues[signature_name] = scheduler.add_queue(
                    f"{name}:{version}:{signature_name}",
                    lambda inputs, key=signature_name: self._call(key, inputs))
        logger.info("loaded %s version %d from %s: signatures %s", name, version, path,
                    ", ".join(sorted(self.signature_defs)))

    def signature(self, signature_name: str):
        """The SignatureDef called ``signature_name`` ('' means serving_default), or
        FAILED_PRECONDITION as TF Serving answers for an unknown one."""
        key = signature_name or DEFAULT_SIGNATURE
        if key not in self.signature_defs or key not in self._functions:
            raise failed_precondition(f"Serving signature key \"{key}\" not found.")
        return key, self.signature_defs[key]

    def run(self, signature_name: str, inputs: dict[str, np.ndarray], batch_size: int | None,
            deadline: float | None = None) -> dict[str, np.ndarray]:
        """The signature's outputs for ``inputs`` (checked by the caller); batched when possible.

        Args:
            signature_name: a key of ``signature_defs``.
            inputs: name -> array, each [batch_size, ...] when batch_size is not None.
            batch_size: rows in this request, or None for inputs that cannot be batched.
            deadline: time.monotonic() after which a queued request is dropped.
        """
        queue = self._queues.get(signature_name)
        if queue is None or batch_size is None:
            return self._call(signature_name, inputs)
        return queue.submit(inputs, batch_size, deadline)

    def _call(self, signature_name: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self._functions[signature_name](
            **{k: tf.convert_to_tensor(v) for k, v in inputs.items()})
        return {k: v.numpy() for k, v in outputs.items()}

    def unload(self) -> None:
        """Stops taking batched requests; the model is freed once in-flight requests finish."""
        for queue in self._queues.values():
            queue.close()


def is_version_dir(path: str) -> bool:
    """True for a complete SavedModel directory (saved_model.pb or .pbtxt present)."""
    return any(tf.io.gfile.exists(os.path.join(path, f) if "://" not in path else f"{path}/{f}")
               for f in ("saved_model.pb", "saved_model.pbtxt"))
