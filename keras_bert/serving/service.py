"""The serving logic both protocols share: Predict, Classify, Regress, GetModelMetadata and
GetModelStatus on request protos, with TF Serving's checks and status codes. gRPC calls it
directly; REST turns its JSON into the same protos first, as TF Serving does."""

from __future__ import annotations

import functools

import numpy as np
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2,
                                     get_model_status_pb2, predict_pb2, regression_pb2)

from keras_bert.serving import tensors
from keras_bert.serving.errors import Unloaded, invalid_argument
from keras_bert.serving.model_manager import ModelManager
from keras_bert.serving.servable import Servable

SIGNATURE_DEF_FIELD = "signature_def"


def _on_the_serving_version(method):
    """Runs a request again, once, when the version it was given to is retired before it runs
    (a version switch under load): the second lookup finds the version that replaced it."""
    @functools.wraps(method)
    def run(self, request, deadline: float | None = None):
        try:
            return method(self, request, deadline)
        except Unloaded:
            return method(self, request, deadline)
    return run


class ServingCore:
    """Answers TF Serving API requests from the models a ModelManager holds.

    Args:
        manager: the served models.
        max_tensor_bytes: the largest decoded input tensor accepted (None: no limit).
    """

    def __init__(self, manager: ModelManager, max_tensor_bytes: int | None = None):
        self.manager = manager
        self.max_tensor_bytes = max_tensor_bytes

    def _fill_model_spec(self, spec, servable: Servable, signature_name: str | None) -> None:
        spec.name = servable.name
        spec.version.value = servable.version
        if signature_name is not None:
            spec.signature_name = signature_name

    # ------------------------------------------------------------------------------- Predict
    @_on_the_serving_version
    def predict(self, request, deadline: float | None = None):
        """A PredictResponse for a PredictRequest."""
        servable = self.manager.servable(request.model_spec)
        key, signature = servable.signature(request.model_spec.signature_name)
        tensors.check_inputs(signature, request.inputs)
        aliases = tensors.check_output_filter(signature, request.output_filter)
        arrays = {name: tensors.to_numpy(name, proto, self.max_tensor_bytes)
                  for name, proto in request.inputs.items()}
        outputs = servable.run(key, arrays, tensors.batch_size(arrays), deadline)
        response = predict_pb2.PredictResponse()
        self._fill_model_spec(response.model_spec, servable, key)
        for alias in aliases:
            response.outputs[alias].CopyFrom(tensors.to_proto(outputs[alias]))
        return response

    # ------------------------------------------------------------------------------- Classify
    def _example_signature(self, model_spec, what: str):
        servable = self.manager.servable(model_spec)
        key = model_spec.signature_name or "serving_default"
        if key not in servable.signature_defs:
            raise invalid_argument(f"No signature was found with the name: {key}")
        key, signature = servable.signature(key)
        if len(signature.inputs) != 1 or "inputs" not in signature.inputs:
            raise invalid_argument(
                f"Expected one input Tensor named \"inputs\" (serialized tf.Examples) in the "
                f"{what} signature \"{key}\"; it has {sorted(signature.inputs)}")
        if signature.inputs["inputs"].dtype != types_pb2.DT_STRING:
            raise invalid_argument(f"{what} signature \"{key}\": input \"inputs\" must be "
                                   "DT_STRING (serialized tf.Examples)")
        return servable, key, signature

    @_on_the_serving_version
    def classify(self, request, deadline: float | None = None):
        """A ClassificationResponse; the signature takes serialized tf.Examples ("inputs") and
        returns "classes" [batch, num_classes] strings and/or "scores" [batch, num_classes]."""
        servable, key, signature = self._example_signature(request.model_spec, "classification")
        names = [n for n in ("classes", "scores") if n in signature.outputs]
        if not names:
            raise invalid_argument(
                "Expected classification signature outputs to contain at least one of "
                f"\"classes\" or \"scores\". Signature \"{key}\" has {sorted(signature.outputs)}")
        examples = tensors.serialized_examples(request.input)
        outputs = servable.run(key, {"inputs": np.array(examples, dtype=object)},
                               len(examples), deadline)
        classes, scores = outputs.get("classes"), outputs.get("scores")
        for name, value in (("classes", classes), ("scores", scores)):
            if value is not None and (value.ndim != 2 or value.shape[0] != len(examples)):
                raise invalid_argument(f"Expected Tensor shape: [batch_size num_classes] but "
                                       f"got {list(value.shape)} for \"{name}\"")
        if classes is not None and scores is not None and classes.shape != scores.shape:
            raise invalid_argument("Tensors class and score should match in dim_size(1). Got "
                                   f"{classes.shape[1]} vs. {scores.shape[1]}")
        response = classification_pb2.ClassificationResponse()
        self._fill_model_spec(response.model_spec, servable, key)
        num_classes = (classes if classes is not None else scores).shape[1]
        for row in range(len(examples)):
            classifications = response.result.classifications.add()
            for column in range(num_classes):
                item = classifications.classes.add()
                if classes is not None:
                    item.label = classes[row, column].decode("utf-8", "replace")
                if scores is not None:
                    item.score = float(scores[row, column])
        return response

    # ------------------------------------------------------------------------------- Regress
    @_on_the_serving_version
    def regress(self, request, deadline: float | None = None):
        """A RegressionResponse; the signature maps "inputs" (serialized tf.Examples) to
        "outputs", float [batch] or [batch, 1]."""
        servable, key, signature = self._example_signature(request.model_spec, "regression")
        if len(signature.outputs) != 1 or "outputs" not in signature.outputs:
            raise invalid_argument(f"Expected one output Tensor named \"outputs\" in the "
                                   f"regression signature \"{key}\"; it has "
                                   f"{sorted(signature.outputs)}")
        examples = tensors.serialized_examples(request.input)
        values = servable.run(key, {"inputs": np.array(examples, dtype=object)},
                              len(examples), deadline)["outputs"]
        if values.dtype != np.float32 or not (
                values.shape == (len(examples),) or values.shape == (len(examples), 1)):
            raise invalid_argument("Expected output Tensor shape to be either [batch_size] or "
                                   f"[batch_size, 1] of DT_FLOAT but got {list(values.shape)} "
                                   f"{values.dtype}")
        response = regression_pb2.RegressionResponse()
        self._fill_model_spec(response.model_spec, servable, key)
        for value in values.reshape(-1):
            response.result.regressions.add(value=float(value))
        return response

    # ------------------------------------------------------------------------------- metadata
    def get_model_metadata(self, request):
        """GetModelMetadataResponse with the SignatureDefMap (the only field TF Serving has)."""
        if not request.metadata_field:
            raise invalid_argument(
                "GetModelMetadataRequest must specify at least one metadata_field")
        for field in request.metadata_field:
            if field != SIGNATURE_DEF_FIELD:
                raise invalid_argument(f"Metadata field {field} is not supported")
        servable = self.manager.servable(request.model_spec)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        self._fill_model_spec(response.model_spec, servable, None)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for name, signature in servable.signature_defs.items():
            signature_map.signature_def[name].CopyFrom(signature)
        response.metadata[SIGNATURE_DEF_FIELD].Pack(signature_map)
        return response

    def get_model_status(self, request):
        """GetModelStatusResponse: the state of one version, or of every version seen."""
        if not request.HasField("model_spec"):
            raise invalid_argument("Missing ModelSpec")
        response = get_model_status_pb2.GetModelStatusResponse()
        for version, state in sorted(self.manager.version_states(request.model_spec).items()):
            status = response.model_version_status.add(version=version, state=state.state)
            status.status.error_code = state.error_code
            status.status.error_message = state.error_message
        return response
