"""One loaded SavedModel version: its SignatureDefs (as TF Serving reports them) and a way to run
each signature on NumPy inputs, directly or through a batch queue.

A version is loaded the way ``tensorflow_model_server`` loads it: TensorFlow's graph-mode loader
(``LoadSavedModel`` in C++, ``tf.compat.v1.saved_model.loader.load`` here) imports the ``serve``
MetaGraph into a graph, restores the variables through the MetaGraph's saver and runs its init op
in a session; a request is a ``Session.run`` of the signature's tensors. So a SavedModel that
would fail on TF Serving (variables that graph mode cannot restore, ops outside core TensorFlow
and tensorflow-text) fails to load here too, instead of being served by a more forgiving path."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import prediction_log_pb2

from keras_bert import fileio
from keras_bert.serving import tensors
from keras_bert.serving.batching import BatchQueue, BatchScheduler
from keras_bert.serving.errors import Unloaded, failed_precondition

logger = logging.getLogger(__name__)

SERVE_TAG = "serve"
DEFAULT_SIGNATURE = "serving_default"
WARMUP_FILE = "assets.extra/tf_serving_warmup_requests"
MAX_WARMUP_RECORDS = 1000  # TF Serving's limit (saved_model_warmup_util.cc)


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
        max_rows_per_call: without a scheduler, requests with more rows run in parts of at most
            this many rows (None: whole).
        session_config: the TensorFlow session's options (threads); None: TensorFlow's
            defaults.
    """

    def __init__(self, name: str, version: int, path: str,
                 scheduler: BatchScheduler | None = None, max_rows_per_call: int | None = None,
                 session_config: tf.compat.v1.ConfigProto | None = None):
        self.name = name
        self.version = version
        self.path = path
        self.max_rows_per_call = max_rows_per_call
        self._in_flight = 0
        self._calls_done = 0
        self._last_call_end = time.monotonic()
        self._unloaded = False
        self._closing = False
        self._released = False
        self._closed = threading.Event()
        self._state_lock = threading.Lock()
        # All of them, __saved_model_init_op included, as TF Serving's metadata lists them.
        self.signature_defs = self._load(session_config)
        self._runnable = {key: signature for key, signature in self.signature_defs.items()
                          if signature.inputs and signature.outputs}
        try:
            self._warm_up()
        except Exception:
            self._release()
            raise
        self._warm_up_calls = self._calls_done
        self._queues: dict[str, BatchQueue] = {}
        if scheduler is not None:
            for signature_name in self._runnable:
                self._queues[signature_name] = scheduler.add_queue(
                    f"{name}:{version}:{signature_name}",
                    lambda inputs, key=signature_name: self._call(key, inputs))
        logger.info("loaded %s version %d from %s: signatures %s", name, version, path,
                    ", ".join(sorted(self.signature_defs)))

    def _load(self, session_config: tf.compat.v1.ConfigProto | None) -> dict:
        """Loads the version (here: the SavedModel into a graph-mode session) and returns its
        SignatureDefs by key; releases what it took if it fails."""
        _import_custom_ops()
        self._graph = tf.Graph()
        self._session = tf.compat.v1.Session(graph=self._graph, config=session_config)
        try:
            with self._graph.as_default():
                meta_graph = tf.compat.v1.saved_model.loader.load(self._session, [SERVE_TAG],
                                                                  self.path)
            _check_servable_ops(meta_graph, self.path)
        except Exception:
            self._session.close()
            raise
        return dict(meta_graph.signature_def)

    def _run_model(self, signature_name: str, inputs: dict[str, np.ndarray]
                   ) -> dict[str, np.ndarray]:
        """One model call: the signature's outputs for ``inputs``, all of them."""
        signature = self._runnable[signature_name]
        feeds = {signature.inputs[k].name: inputs[k] for k in sorted(signature.inputs)}
        fetches = {k: signature.outputs[k].name for k in sorted(signature.outputs)}
        return self._session.run(fetches, feeds)

    def _release(self) -> None:
        """Frees the loaded model (here: closes the session)."""
        self._session.close()

    def _warm_up(self) -> None:
        """Replays the SavedModel's warm-up requests (assets.extra/tf_serving_warmup_requests,
        PredictionLogs), as TF Serving does before a version serves: each one runs once, in
        this session; one that fails fails the load.

        They run through ``_call``, the path of every request: one ``Session.run`` with all of
        the signature's feeds and fetches, in one order, so a request runs the executor that
        the replay built (graph optimization, function instantiation happen once per
        executor) on shapes it has run. After one replay, a request of a warmed batch size and
        length costs the server the CPU time of steady state (MiniLM: benchmarks/README.md,
        warm-up), so records are not replayed twice."""
        path = f"{self.path.rstrip('/')}/{WARMUP_FILE}"
        if not fileio.exists(path):
            return
        start = time.monotonic()
        count = 0
        for record in tf.data.TFRecordDataset(path):
            count += 1
            if count > MAX_WARMUP_RECORDS:
                raise ValueError(f"{path} has more than {MAX_WARMUP_RECORDS} warm-up records "
                                 "(TF Serving's limit)")
            log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
            kind = log.WhichOneof("log_type")
            if kind == "predict_log":
                request = log.predict_log.request
                key, signature = self.signature(request.model_spec.signature_name)
                tensors.check_inputs(signature, request.inputs)
                self._call(key, {name: tensors.to_numpy(name, proto)
                                 for name, proto in request.inputs.items()})
            elif kind in ("classify_log", "regress_log"):
                request = getattr(log, kind).request
                key, _ = self.signature(request.model_spec.signature_name)
                examples = tensors.serialized_examples(request.input)
                self._call(key, {"inputs": np.array(examples, dtype=object)})
            else:
                raise ValueError(f"{path}: warm-up record {count} is a {kind}; only predict, "
                                 "classify and regress logs are replayed")
        logger.info("warmed up %s version %d with %d requests in %.1f s", self.name,
                    self.version, count, time.monotonic() - start)

    def signature(self, signature_name: str):
        """The SignatureDef called ``signature_name`` ('' means serving_default), or
        FAILED_PRECONDITION as TF Serving answers for an unknown one."""
        key = signature_name or DEFAULT_SIGNATURE
        if key not in self.signature_defs or key not in self._runnable:
            raise failed_precondition(f"Serving signature key \"{key}\" not found.")
        return key, self.signature_defs[key]

    def run(self, signature_name: str, inputs: dict[str, np.ndarray], batch_size: int | None,
            deadline: float | None = None) -> dict[str, np.ndarray]:
        """The signature's outputs for ``inputs`` (checked by the caller); batched when possible.

        Without batching, a request of more than ``max_rows_per_call`` rows runs as several
        calls of at most that many rows, so one huge request cannot hold memory in proportion to
        its size; outputs whose other axes differ between the parts (a sequence axis padded to
        each part's longest text) are padded to the longest part.

        Args:
            signature_name: a key of ``signature_defs``.
            inputs: name -> array, each [batch_size, ...] when batch_size is not None.
            batch_size: rows in this request, or None for inputs that cannot be batched.
            deadline: time.monotonic() after which a queued request is dropped.
        """
        queue = self._queues.get(signature_name)
        if queue is not None and batch_size:
            return queue.submit(inputs, batch_size, deadline)  # Unloaded once unloaded
        if self._unloaded:  # the session may still be open, for calls already under way
            raise Unloaded(f"{self.name} version {self.version} was unloaded; retry the request")
        if batch_size is None or batch_size == 0:  # nothing to batch with others
            return self._call(signature_name, inputs)
        step = self.max_rows_per_call
        if not step or batch_size <= step:
            return self._call(signature_name, inputs)
        parts = [self._call(signature_name, {k: v[start:start + step] for k, v in inputs.items()})
                 for start in range(0, batch_size, step)]
        return {name: concatenate_padded([part[name] for part in parts]) for name in parts[0]}

    def _call(self, signature_name: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with self._state_lock:
            if self._released:
                raise Unloaded(f"{self.name} version {self.version} was unloaded; retry "
                               "the request")
            self._in_flight += 1
        try:
            return self._run_model(signature_name, inputs)
        finally:
            with self._state_lock:
                self._in_flight -= 1
                self._calls_done += 1
                self._last_call_end = time.monotonic()
                self._maybe_close()

    def activity(self) -> tuple[int, float]:
        """(model calls answered since the version was loaded, the warm-up's not counted;
        seconds since the last model call ended, 0 while one runs)."""
        with self._state_lock:
            idle_s = 0.0 if self._in_flight else time.monotonic() - self._last_call_end
            return self._calls_done - self._warm_up_calls, idle_s

    def unload(self) -> None:
        """Stops taking requests (they get Unloaded, and the service runs them again on the
        version now serving). Requests in flight, and those already queued for a batch, still
        run; the memory stays until ``close``."""
        for queue in self._queues.values():
            queue.close()
        with self._state_lock:
            self._unloaded = True

    def close(self) -> None:
        """Unloads, and releases the model (closes the session, freeing its memory) once
        requests in flight and queued finish; ``wait_closed`` waits for that."""
        self.unload()
        with self._state_lock:
            self._closing = True
            self._maybe_close()

    def wait_closed(self, timeout_s: float) -> bool:
        """Waits (after ``close``) until the session has closed; False if it has not yet."""
        return self._closed.wait(timeout_s)

    def _maybe_close(self) -> None:  # with _state_lock held
        if (self._closing and not self._in_flight and not self._released
                and all(queue.drained for queue in self._queues.values())):
            self._release()
            self._released = True
            self._queues = {}  # they call back into this object: a reference cycle
            self._closed.set()


def concatenate_padded(parts: list[np.ndarray]) -> np.ndarray:
    """``parts`` joined along axis 0; where their other axes differ, each is padded at the end
    to the largest (0, False or b"")."""
    if len(parts) == 1:
        return parts[0]
    shape = np.max([part.shape for part in parts], axis=0)
    padded = [np.pad(part, [(0, 0)] + [(0, int(n) - d) for n, d in zip(shape[1:], part.shape[1:])],
                     constant_values=b"" if part.dtype == object else 0)
              if part.shape[1:] != tuple(shape[1:]) else part for part in parts]
    return np.concatenate(padded)


def _check_servable_ops(meta_graph, path: str) -> None:
    """Refuses a SavedModel whose graph calls back into Python (py_function and friends):
    TF Serving has no Python, so it would load and then fail every request."""
    from keras_bert.export.ops import PYTHON_CALLBACK_OPS
    graph = meta_graph.graph_def
    used = {node.op for node in graph.node}
    used.update(node.op for function in graph.library.function for node in function.node_def)
    bad = sorted(used & PYTHON_CALLBACK_OPS)
    if bad:
        raise ValueError(f"SavedModel {path!r} calls Python ({', '.join(bad)}); TF Serving "
                         "cannot run it")
