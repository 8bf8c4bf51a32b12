"""A client for TF Serving's APIs (tensorflow_model_server, or the local server in serving/),
over gRPC (PredictionService) or REST, returning NumPy arrays either way."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Mapping, Sequence

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2

PROTOCOLS = ("grpc", "rest")
MAX_MESSAGE_BYTES = 64 << 20
# The input that raw text goes into, and TF Serving's default signature: the one asked for raw
# text where several signatures take it (an export with serving_default="transformers" takes
# ids there and text in serve_text).
TEXT_INPUT = "text"
DEFAULT_SIGNATURE = "serving_default"


class ServingError(RuntimeError):
    """The server refused a request; ``code`` is the gRPC status name (e.g. "NOT_FOUND")."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


_HTTP_TO_CODE = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
                 499: "CANCELLED", 500: "INTERNAL", 501: "UNIMPLEMENTED", 503: "UNAVAILABLE",
                 504: "DEADLINE_EXCEEDED"}


class ServingClient:
    """Sends Predict and metadata requests to a model server.

    Args:
        server: "host:port" (TF Serving's defaults: 8500 for gRPC, 8501 for REST).
        protocol: "grpc" or "rest".
        timeout_s: per-request deadline.

    Example (needs a running server, so not run here):
        client = ServingClient("localhost:8500")
        client.predict_text("bert", ["a sentence"])["pooled_output"].shape  # (1, hidden)
    """

    def __init__(self, server: str, protocol: str = "grpc", timeout_s: float = 30.0):
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
        if ":" not in server:
            raise ValueError(f"server must be host:port, got {server!r}")
        self.server = server
        self.protocol = protocol
        self.timeout_s = timeout_s
        self._stub = self._channel = None
        self._output_dtypes: dict[tuple, dict[str, np.dtype]] = {}
        self._text_signatures: dict[tuple, str] = {}
        if protocol == "grpc":
            import grpc
            from tensorflow_serving.apis import prediction_service_pb2_grpc
            self._channel = grpc.insecure_channel(server, options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)])
            self._stub = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()

    def __enter__(self) -> "ServingClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------------------- predict
    def predict(self, model: str, inputs: Mapping[str, object], signature_name: str = "",
                version: int | None = None,
                output_filter: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """The signature's outputs for ``inputs`` (name -> array-like, strings as str/bytes)."""
        if self.protocol == "grpc":
            return self._predict_grpc(model, inputs, signature_name, version, output_filter)
        return self._predict_rest(model, inputs, signature_name, version, output_filter)

    def predict_text(self, model: str, texts: Sequence[str],
                     text_pairs: Sequence[str] | None = None, signature_name: str = "",
                     version: int | None = None,
                     choices: Sequence[Sequence[str]] | None = None) -> dict[str, np.ndarray]:
        """The outputs of the signature that takes raw text (``text_signature``: the one named,
        else the one the model's metadata says takes text) for ``texts`` (and ``text_pairs``,
        or for a multiple-choice model ``choices``: one list of the same length per text)."""
        signature_name = self.text_signature(model, version, signature_name)
        inputs = {TEXT_INPUT: np.array([t.encode("utf-8") for t in texts], dtype=object)}
        if text_pairs is not None:
            if len(text_pairs) != len(texts):
                raise ValueError(f"{len(texts)} texts but {len(text_pairs)} text_pairs")
            inputs["text_pair"] = np.array([t.encode("utf-8") for t in text_pairs], dtype=object)
        if choices is not None:
            if len(choices) != len(texts) or len({len(c) for c in choices}) > 1:
                raise ValueError(f"choices must be one list per text ({len(texts)}), all of one "
                                 f"length; got lengths {[len(c) for c in choices]}")
            inputs["choices"] = np.array([[c.encode("utf-8") for c in row] for row in choices],
                                         dtype=object)
        return self.predict(model, inputs, signature_name, version)

    def _predict_grpc(self, model, inputs, signature_name, version, output_filter):
        import grpc
        from tensorflow_serving.apis import predict_pb2
        request = predict_pb2.PredictRequest()
        request.model_spec.name = model
        request.model_spec.signature_name = signature_name
        if version is not None:
            request.model_spec.version.value = version
        request.output_filter.extend(output_filter or ())
        for name, value in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(_as_array(value)))
        try:
            response = self._stub.Predict(request, timeout=self.timeout_s)
        except grpc.RpcError as e:
            raise ServingError(e.code().name, e.details()) from None
        return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}

    def _predict_rest(self, model, inputs, signature_name, version, output_filter):
        columns = {name: _to_json(_as_array(value)) for name, value in inputs.items()}
        body = {"inputs": columns}
        if signature_name:
            body["signature_name"] = signature_name
        outputs = self._rest("POST", f"{_model_path(model, version)}:predict", body)["outputs"]
        dtypes = self._rest_output_dtypes(model, version, signature_name or "serving_default")
        if not isinstance(outputs, dict):  # one output: TF Serving leaves out its name
            outputs = {next(iter(dtypes)): outputs}
        wanted = list(output_filter) if output_filter else list(outputs)
        return {name: _from_json(outputs[name], dtypes.get(name)) for name in wanted}

    def _rest_output_dtypes(self, model, version, signature_name) -> dict[str, np.dtype]:
        key = (model, version, signature_name)
        if key not in self._output_dtypes:
            signature = self.metadata(model, version)["signature_def"][signature_name]
            self._output_dtypes[key] = {
                name: tf.dtypes.as_dtype(types_pb2.DataType.Value(info["dtype"])).as_numpy_dtype
                for name, info in signature["outputs"].items()}
        return self._output_dtypes[key]

    # ------------------------------------------------------------------------------- metadata
    def text_signature(self, model: str, version: int | None = None,
                       signature_name: str = "") -> str:
        """The name of the model's signature that takes raw text (a string input "text"), from
        its metadata (asked once per model and version): ``signature_name`` where it takes
        text, else serving_default where it does, else the first by name that does.

        Raises:
            ValueError: ``signature_name`` is missing or takes no text (naming those that do),
                or no signature takes text (listing each with its inputs); one line.
            ServingError: the server refused the metadata request.
        """
        key = (model, version, signature_name)
        if key not in self._text_signatures:
            self._text_signatures[key] = _text_signature(
                model, self.metadata(model, version)["signature_def"], signature_name)
        return self._text_signatures[key]

    def metadata(self, model: str, version: int | None = None) -> dict:
        """{"signature_def": {name: SignatureDef as JSON}} of the served version."""
        if self.protocol == "rest":
            return self._rest("GET", f"{_model_path(model, version)}/metadata")["metadata"][
                "signature_def"]
        import grpc
        from google.protobuf import json_format
        from tensorflow_serving.apis import get_model_metadata_pb2
        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        request.model_spec.name = model
        if version is not None:
            request.model_spec.version.value = version
        try:
            response = self._stub.GetModelMetadata(request, timeout=self.timeout_s)
        except grpc.RpcError as e:
            raise ServingError(e.code().name, e.details()) from None
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signature_map)
        return json_format.MessageToDict(signature_map, preserving_proto_field_name=True)

    def _rest(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(f"http://{self.server}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:
            try:
                message = json.loads(e.read()).get("error", "")
            except ValueError:
                message = str(e)
            raise ServingError(_HTTP_TO_CODE.get(e.code, f"HTTP {e.code}"), message) from None
        except urllib.error.URLError as e:
            raise ServingError("UNAVAILABLE", f"cannot reach http://{self.server}: "
                                              f"{e.reason}") from None
        except TimeoutError:
            raise ServingError("DEADLINE_EXCEEDED", f"no answer from http://{self.server} "
                                                    f"within {self.timeout_s} s") from None


def _takes_text(signature: dict) -> bool:
    return signature.get("inputs", {}).get(TEXT_INPUT, {}).get("dtype") == "DT_STRING"


def _inputs_line(signature: dict) -> str:
    """A signature's inputs as "name (dtype), ...", e.g. "input_ids (int32), text (string)"."""
    inputs = signature.get("inputs", {})
    return ", ".join(f"{name} ({info.get('dtype', 'DT_INVALID').removeprefix('DT_').lower()})"
                     for name, info in sorted(inputs.items())) or "no inputs"


def _text_signature(model: str, signatures: dict[str, dict], signature_name: str) -> str:
    """``ServingClient.text_signature`` on the model's {name: SignatureDef as JSON}."""
    # The SavedModel's own entries (__saved_model_init_op) are no signatures to call.
    signatures = {name: signature for name, signature in signatures.items()
                  if not name.startswith("__")}
    takes_text = sorted((name for name, signature in signatures.items()
                         if _takes_text(signature)),
                        key=lambda name: (name != DEFAULT_SIGNATURE, name))
    if signature_name in takes_text or (not signature_name and takes_text):
        return signature_name or takes_text[0]
    if not takes_text:
        listed = "; ".join(f"{name} takes {_inputs_line(signature)}"
                           for name, signature in sorted(signatures.items()))
        raise ValueError(f"no signature of model {model!r} takes raw text (a string input "
                         f"{TEXT_INPUT!r}): {listed}")
    if signature_name in signatures:
        problem = (f"signature {signature_name!r} of model {model!r} takes "
                   f"{_inputs_line(signatures[signature_name])}, not raw text")
    else:
        problem = (f"model {model!r} has no signature {signature_name!r} (it has "
                   f"{', '.join(sorted(signatures))})")
    raise ValueError(f"{problem}; {' and '.join(takes_text)} "
                     f"{'takes' if len(takes_text) == 1 else 'take'} raw text")


def _model_path(model: str, version: int | None) -> str:
    path = f"/v1/models/{urllib.request.quote(model, safe='')}"
    return path if version is None else f"{path}/versions/{version}"


def _as_array(value) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind == "U":
        array = np.vectorize(lambda s: s.encode("utf-8"), otypes=[object])(array)
    return array


def _to_json(array: np.ndarray):
    if array.dtype == object or array.dtype.kind == "S":
        encode = np.vectorize(lambda b: {"b64": base64.b64encode(b).decode("ascii")},
                              otypes=[object])
        return encode(array).tolist()
    return array.tolist()


def _from_json(value, dtype) -> np.ndarray:
    if dtype is None or dtype == object:
        def to_bytes(item):
            if isinstance(item, dict):
                return base64.b64decode(item["b64"])
            return item.encode("utf-8") if isinstance(item, str) else item
        array = np.array(value, dtype=object)
        return np.vectorize(to_bytes, otypes=[object])(array) if array.size else array
    return np.asarray(value, dtype=dtype)
