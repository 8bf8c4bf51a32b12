"""One loaded OpenVINO version (``model.xml`` + ``model.bin``, as ``export_model(...,
format="openvino")`` writes it): served with the same API as a SavedModel version, its one
signature ``serving_default`` described as TF Serving describes a SavedModel's (a SignatureDef
built from the model's inputs and outputs), so that a client cannot tell the two apart.

It runs on OpenVINO's CPU plugin in float32 (``INFERENCE_PRECISION_HINT``; the plugin would
pick bfloat16 on CPUs that have it), with ``--tensorflow_intra_op_parallelism`` threads when
set; each call takes an infer request from a pool, so calls run side by side."""

from __future__ import annotations

import queue

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2

from keras_bert.export.openvino_extra import IR_FILE, check_openvino
from keras_bert.export.openvino_tokenizer import max_windows_node_name
from keras_bert.serving.errors import invalid_argument
from keras_bert.serving.servable import DEFAULT_SIGNATURE, Servable

PREDICT_METHOD = "tensorflow/serving/predict"


def _tensor_info(name: str, element_type, partial_shape) -> meta_graph_pb2.TensorInfo:
    """A SignatureDef entry for an OpenVINO input or output: its dtype, and its shape with -1
    for a size known only at run time."""
    import openvino as ov

    if element_type == ov.Type.string:
        dtype = tf.string
    else:
        dtype = tf.as_dtype(np.dtype(element_type.to_dtype()))
    info = meta_graph_pb2.TensorInfo(name=f"{name}:0", dtype=dtype.as_datatype_enum)
    if partial_shape.rank.is_dynamic:
        info.tensor_shape.unknown_rank = True
    else:
        for dimension in partial_shape:
            info.tensor_shape.dim.add(size=dimension.get_length() if dimension.is_static
                                      else -1)
    return info


class OpenVinoServable(Servable):
    """An OpenVINO version directory, loaded and ready to run; see ``Servable`` for the
    arguments (``session_config``'s intra-op threads become OpenVINO's inference threads)."""

    def _load(self, session_config) -> dict:
        check_openvino()
        import openvino as ov
        import openvino_tokenizers  # noqa: F401  (registers the tokenizer's operations)

        config = {"INFERENCE_PRECISION_HINT": "f32"}
        threads = session_config.intra_op_parallelism_threads if session_config else 0
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        core = ov.Core()
        model = core.read_model(f"{self.path.rstrip('/')}/{IR_FILE}")
        self._max_windows = (model.get_rt_info(["keras_bert", "max_windows"]).astype(int)
                             if model.has_rt_info(["keras_bert", "max_windows"]) else None)
        self._compiled = core.compile_model(model, "CPU", config)
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        signature = meta_graph_pb2.SignatureDef(method_name=PREDICT_METHOD)
        for port in self._compiled.inputs:
            signature.inputs[port.get_any_name()].CopyFrom(
                _tensor_info(port.get_any_name(), port.get_element_type(),
                             port.get_partial_shape()))
        for port in self._compiled.outputs:
            signature.outputs[port.get_any_name()].CopyFrom(
                _tensor_info(port.get_any_name(), port.get_element_type(),
                             port.get_partial_shape()))
        return {DEFAULT_SIGNATURE: signature}

    def _run_model(self, signature_name: str, inputs: dict[str, np.ndarray]
                   ) -> dict[str, np.ndarray]:
        rows = {len(value) for value in inputs.values()}
        if rows == {0}:
            raise invalid_argument("the batch is empty: send at least one text")
        texts = {name: np.array([v if isinstance(v, bytes) else str(v).encode("utf-8")
                                 for v in value.reshape(-1).tolist()],
                                dtype=np.bytes_).reshape(value.shape)
                 for name, value in inputs.items()}
        try:
            request = self._requests.get_nowait()
        except queue.Empty:
            request = self._compiled.create_infer_request()
        try:
            results = request.infer(texts)
            outputs = {}
            for port, value in results.items():
                value = np.array(value, copy=True)
                if value.dtype.kind == "U":  # strings: bytes, as TensorFlow returns them
                    value = np.array([v.encode("utf-8") for v in value.reshape(-1).tolist()],
                                     dtype=object).reshape(value.shape)
                outputs[port.get_any_name()] = value
        except RuntimeError as error:
            if (self._max_windows is not None
                    and max_windows_node_name(self._max_windows) in str(error)):
                raise invalid_argument(
                    f"a text is longer than max_windows={self._max_windows} windows; send "
                    f"shorter texts, or export with a larger --max_windows (0: no limit)"
                ) from None
            raise invalid_argument(f"OpenVINO could not run the request: "
                                   f"{str(error).strip().splitlines()[-1]}") from None
        finally:
            self._requests.put(request)
        return outputs

    def _release(self) -> None:
        self._compiled = None
        self._requests = queue.SimpleQueue()
