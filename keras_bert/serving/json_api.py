"""TF Serving's REST JSON, both ways: predict requests in row ("instances") and columnar ("inputs")
form with {"b64": ...} binary strings, classify/regress examples, and the response bodies."""

from __future__ import annotations

import base64
import json
import sys
from typing import Mapping

import numpy as np
import tensorflow as tf
from google.protobuf import json_format
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow_serving.apis import get_model_metadata_pb2

from keras_bert.serving import tensors
from keras_bert.serving.errors import invalid_argument

ROW, COLUMNAR = "row", "columnar"
MAX_RANK = 64  # NumPy's limit on an array's dimensions


def parse_body(body: bytes) -> dict:
    """The request's JSON object, or INVALID_ARGUMENT."""
    if not body:
        raise invalid_argument("JSON Parse error: The document is empty")
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise invalid_argument(f"JSON Parse error: {e}") from None
    except RecursionError:
        raise invalid_argument("JSON Parse error: the document is nested too deeply") from None
    except ValueError:  # an integer of more than sys.get_int_max_str_digits() digits
        raise invalid_argument(f"JSON Parse error: a number has more than "
                               f"{sys.get_int_max_str_digits()} digits") from None
    if not isinstance(doc, dict):
        raise invalid_argument(f"JSON Value: {str(doc)[:200]} Is not object")
    try:  # Python's json takes "\ud800" alone; no UTF-8 string can hold it
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise invalid_argument("JSON Parse error: The surrogate pair in string is invalid."
                               ) from None
    return doc


def _is_b64(value) -> bool:
    return isinstance(value, dict) and set(value) == {"b64"}


def _leaf(value, dtype: tf.DType):
    if dtype == tf.string:
        if _is_b64(value):
            try:
                return base64.b64decode(value["b64"], validate=True)
            except (TypeError, ValueError):
                raise invalid_argument("Unable to base64 decode") from None
        if isinstance(value, str):
            return value.encode("utf-8")
    elif dtype == tf.bool:
        if isinstance(value, bool):
            return value
    elif dtype.is_integer:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif dtype.is_floating:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    raise invalid_argument(f"JSON Value: {json.dumps(value)[:200]} Type: "
                           f"{type(value).__name__} is not of expected type: {dtype.name}")


def _flatten(value, dtype: tf.DType, leaves: list) -> tuple[int, ...]:
    """Appends the leaves of nested lists ``value`` to ``leaves``; returns its dense shape."""
    if not isinstance(value, list):
        leaves.append(_leaf(value, dtype))
        return ()
    shapes = {_flatten(item, dtype, leaves) for item in value}
    if len(shapes) > 1:
        raise invalid_argument(f"Expecting a dense tensor; list items have different shapes "
                               f"{sorted(shapes)}")
    return (len(value),) + (shapes.pop() if shapes else ())


def to_array(value, dtype_enum: int) -> np.ndarray:
    """The NumPy tensor of JSON ``value`` (nested lists) for a signature input's dtype."""
    dtype = tf.dtypes.as_dtype(dtype_enum)
    leaves: list = []
    try:
        shape = _flatten(value, dtype, leaves)
    except RecursionError:
        raise invalid_argument("a tensor is nested too deeply") from None
    if len(shape) > MAX_RANK:
        raise invalid_argument(f"a tensor is nested {len(shape)} lists deep; at most "
                               f"{MAX_RANK} dimensions are supported")
    np_dtype = object if dtype == tf.string else dtype.as_numpy_dtype
    try:
        return np.array(leaves, dtype=np_dtype).reshape(shape)
    except OverflowError:
        raise invalid_argument(f"a JSON number does not fit {dtype.name}") from None


def fill_predict_request(doc: dict, signature_inputs: Mapping, request) -> str:
    """Fills request.inputs from "instances" or "inputs"; returns the format, ROW or COLUMNAR."""
    names = sorted(signature_inputs)
    if ("instances" in doc) == ("inputs" in doc):
        raise invalid_argument("Missing 'inputs' or 'instances' key" if "inputs" not in doc else
                               "Not formatted correctly expecting only one of 'inputs' or "
                               "'instances' keys to exist")
    columns: dict[str, np.ndarray] = {}
    if "instances" in doc:
        instances = doc["instances"]
        if not isinstance(instances, list):
            raise invalid_argument("Expecting 'instances' to be an list/array")
        if not instances:
            raise invalid_argument("No values in 'instances' array")
        as_objects = isinstance(instances[0], dict) and not _is_b64(instances[0])
        if not as_objects and len(names) > 1:
            raise invalid_argument("instances is a plain list, but expecting list of objects as "
                                   f"multiple input tensors required: {','.join(names)}")
        rows: dict[str, list] = {name: [] for name in names}
        for index, item in enumerate(instances):
            if as_objects != (isinstance(item, dict) and not _is_b64(item)):
                raise invalid_argument(f"Failed to process element: {index} of 'instances' "
                                       "list: mixes objects and values")
            if not as_objects:
                item = {names[0]: item}
            if set(item) != set(names):
                unknown = sorted(set(item) - set(names))
                raise invalid_argument(
                    f"Failed to process element: {index} of 'instances' list. " +
                    (f"JSON object: does not have named input: {unknown[0]}" if unknown else
                     f"keys must be equal to: {','.join(names)}"))
            for name in names:
                rows[name].append(item[name])
        columns = {name: to_array(rows[name], signature_inputs[name].dtype) for name in names}
        format_ = ROW
    else:
        inputs = doc["inputs"]
        if not isinstance(inputs, dict) or _is_b64(inputs):
            if len(names) > 1:
                raise invalid_argument("inputs is a plain value/list, but expecting an object as "
                                       f"multiple input tensors required: {','.join(names)}")
            inputs = {names[0]: inputs}
        for name in names:
            if name not in inputs:
                raise invalid_argument(f"Missing named input: {name} in 'inputs' object.")
            columns[name] = to_array(inputs[name], signature_inputs[name].dtype)
        format_ = COLUMNAR
    for name, value in columns.items():
        request.inputs[name].CopyFrom(tensors.to_proto(value))
    return format_


def _json_values(name: str, value: np.ndarray):
    if value.dtype == object or value.dtype.kind == "S":
        def encode(item: bytes):
            if name.endswith("_bytes"):
                return {"b64": base64.b64encode(item).decode("ascii")}
            try:
                return item.decode("utf-8")
            except UnicodeDecodeError:
                return {"b64": base64.b64encode(item).decode("ascii")}
        return np.vectorize(encode, otypes=[object])(value).tolist() if value.size else \
            value.tolist()
    return value.tolist()


def predict_response(response, format_: str) -> dict:
    """The "predictions" (row) or "outputs" (columnar) body for a PredictResponse."""
    outputs = {name: tensors.to_numpy(name, proto) for name, proto in response.outputs.items()}
    if not outputs:
        raise invalid_argument("Cannot convert empty tensor map to JSON")
    if format_ == COLUMNAR:
        values = {name: _json_values(name, value) for name, value in outputs.items()}
        return {"outputs": next(iter(values.values())) if len(values) == 1 else values}
    sizes = {name: value.shape[0] if value.ndim else None for name, value in outputs.items()}
    if None in sizes.values() or len(set(sizes.values())) > 1:
        raise invalid_argument(f"outputs have inconsistent batch sizes {sizes}; use the "
                               "columnar 'inputs' format for this signature")
    values = {name: _json_values(name, value) for name, value in outputs.items()}
    if len(values) == 1:
        return {"predictions": next(iter(values.values()))}
    batch = next(iter(sizes.values()))
    return {"predictions": [{name: values[name][row] for name in sorted(values)}
                            for row in range(batch)]}


def _feature(value, where: str) -> feature_pb2.Feature:
    items = value if isinstance(value, list) else [value]
    feature = feature_pb2.Feature()
    try:
        if all(isinstance(v, str) or _is_b64(v) for v in items):
            feature.bytes_list.value.extend(_leaf(v, tf.string) for v in items)
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            feature.int64_list.value.extend(items)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
            feature.float_list.value.extend(items)
        else:
            raise invalid_argument(f"Unexpected element type in feature: {where}")
    except (ValueError, OverflowError):  # an integer beyond int64, a number beyond float
        raise invalid_argument(f"a number in feature {where} is out of range") from None
    return feature


def _example(obj, where: str) -> example_pb2.Example:
    if not isinstance(obj, dict):
        raise invalid_argument(f"Example must be JSON object but got JSON {type(obj).__name__}")
    example = example_pb2.Example()
    for name, value in obj.items():
        example.features.feature[name].CopyFrom(_feature(value, f"{where}.{name}"))
    return example


def fill_example_request(doc: dict, request) -> None:
    """Fills a Classification/RegressionRequest's signature and input from its JSON body."""
    if "signature_name" in doc:
        request.model_spec.signature_name = doc["signature_name"]
    examples = doc.get("examples")
    if not isinstance(examples, list):
        raise invalid_argument("Expecting 'examples' to be an list/array")
    if "context" in doc:
        target = request.input.example_list_with_context
        target.context.CopyFrom(_example(doc["context"], "context"))
    else:
        target = request.input.example_list
    for index, obj in enumerate(examples):
        target.examples.add().CopyFrom(_example(obj, f"examples[{index}]"))


def classify_response(response) -> dict:
    return {"result": [[[c.label, c.score] for c in item.classes]
                       for item in response.result.classifications]}


def regress_response(response) -> dict:
    return {"result": [r.value for r in response.result.regressions]}


def _to_dict(message) -> dict:
    return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)


def metadata_response(response) -> dict:
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signature_map)
    return {"model_spec": _to_dict(response.model_spec),
            "metadata": {"signature_def": _to_dict(signature_map)}}


def status_response(response) -> dict:
    return _to_dict(response)
