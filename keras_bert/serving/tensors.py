"""Tensors in requests: TensorProto <-> NumPy, and the checks TF Serving makes of a request's
inputs and output filter against a SignatureDef before it runs the model."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

from keras_bert.serving.errors import invalid_argument, resource_exhausted


def dtype_name(dtype_enum: int) -> str:
    try:
        return tf.dtypes.as_dtype(dtype_enum).name
    except TypeError:
        return f"<unknown dtype {dtype_enum}>"


def to_numpy(name: str, proto, max_bytes: int | None = None) -> np.ndarray:
    """The NumPy value of the TensorProto ``proto`` sent as input ``name``.

    A TensorProto may declare a shape far larger than its values (the last value repeats), so
    the decoded size is checked first: RESOURCE_EXHAUSTED beyond ``max_bytes``;
    INVALID_ARGUMENT when the proto cannot be decoded.
    """
    dims = [d.size for d in proto.tensor_shape.dim]
    if any(d < 0 for d in dims):
        raise invalid_argument(f"input '{name}' has a negative dimension: {dims}")
    if max_bytes is not None:
        item_bytes = 8 if proto.dtype == tf.string.as_datatype_enum else max(
            tf.dtypes.as_dtype(proto.dtype).size if proto.dtype else 1, 1)
        size = int(np.prod(dims, dtype=np.float64)) * item_bytes
        if size > max_bytes:
            raise resource_exhausted(f"input '{name}' of shape {dims} would take {size} bytes, "
                                     f"more than the limit of {max_bytes}")
    try:
        return tf.make_ndarray(proto)
    except Exception as e:  # malformed protos fail in many ways (TypeError, ValueError, ...)
        raise invalid_argument(f"tensor parsing error: input '{name}' is not a valid "
                               f"{dtype_name(proto.dtype)} tensor: {e}") from None


def to_proto(value: np.ndarray) -> tensor_pb2.TensorProto:
    """A TensorProto holding ``value``: numbers as tensor_content, strings as string_val.

    The same proto tf.make_tensor_proto builds, at a twentieth of its cost (it is on the path of
    every response).
    """
    value = np.asarray(value)
    proto = tensor_pb2.TensorProto()
    proto.tensor_shape.dim.extend(tensor_shape_pb2.TensorShapeProto.Dim(size=d)
                                  for d in value.shape)
    if value.dtype == object or value.dtype.kind in "SU":
        proto.dtype = types_pb2.DT_STRING
        proto.string_val.extend(v.encode("utf-8") if isinstance(v, str) else bytes(v)
                                for v in value.reshape(-1).tolist())
    else:
        proto.dtype = tf.dtypes.as_dtype(value.dtype).as_datatype_enum
        proto.tensor_content = np.ascontiguousarray(value).tobytes()
    return proto


def _expected_shape(info) -> list[int] | None:
    if info.tensor_shape.unknown_rank:
        return None
    return [d.size for d in info.tensor_shape.dim]


def check_inputs(signature, inputs: Mapping[str, object]) -> None:
    """Raises INVALID_ARGUMENT unless ``inputs`` (name -> TensorProto) fit ``signature``: the
    same names, each input's dtype, rank and fixed dimensions. Messages follow TF Serving's."""
    expected = set(signature.inputs)
    sent = set(inputs)
    if sent != expected:
        raise invalid_argument(
            f"input size does not match signature: {len(sent)}!={len(expected)} "
            f"len({{{','.join(sorted(sent))}}}) != len({{{','.join(sorted(expected))}}}). "
            f"Sent extra: {{{','.join(sorted(sent - expected))}}}. "
            f"Missing but required: {{{','.join(sorted(expected - sent))}}}.")
    for index, name in enumerate(sorted(expected)):
        info, proto = signature.inputs[name], inputs[name]
        if proto.dtype != info.dtype:
            raise invalid_argument(
                f"Expects arg[{index}] to be {dtype_name(info.dtype)} but "
                f"{dtype_name(proto.dtype)} is provided (input '{name}')")
        want = _expected_shape(info)
        got = [d.size for d in proto.tensor_shape.dim]
        if want is not None and (len(want) != len(got) or any(
                w >= 0 and w != g for w, g in zip(want, got))):
            raise invalid_argument(
                f"input '{name}' has shape {got} but the signature expects {want} "
                "(-1: any size)")


def batch_size(arrays: Mapping[str, np.ndarray]) -> int | None:
    """The shared 0th dimension of ``arrays``, or None when an input is a scalar.

    Raises INVALID_ARGUMENT for inputs of different 0th dimensions. An empty batch (0 rows) is
    a batch: it goes to the model, which answers with 0 rows.
    """
    sizes = {name: (value.shape[0] if value.ndim else None) for name, value in arrays.items()}
    if any(size is None for size in sizes.values()):
        return None
    if len(set(sizes.values())) > 1:
        raise invalid_argument(
            "Batching session Run() input tensors must have equal 0th-dimension size; got "
            + ", ".join(f"{name}: {size}" for name, size in sorted(sizes.items())))
    return next(iter(sizes.values()), None)


def check_output_filter(signature, output_filter: Sequence[str]) -> list[str]:
    """The output aliases to return: ``output_filter`` checked as TF Serving does, or all."""
    if not output_filter:
        return sorted(signature.outputs)
    seen = set()
    for alias in output_filter:
        if alias not in signature.outputs:
            raise invalid_argument(
                f"output tensor alias not found in signature: {alias} Outputs expected to be "
                f"in the set {{{','.join(sorted(signature.outputs))}}}.")
        if alias in seen:
            raise invalid_argument(f"duplicate output tensor alias: {alias}")
        seen.add(alias)
    return list(output_filter)


def serialized_examples(input_proto) -> list[bytes]:
    """Serialized tf.Examples of an Input proto (Classify, Regress); a shared context is merged
    into each one. INVALID_ARGUMENT when there are none."""
    kind = input_proto.WhichOneof("kind")
    if kind == "example_list":
        examples = [e.SerializeToString() for e in input_proto.example_list.examples]
    elif kind == "example_list_with_context":
        context = input_proto.example_list_with_context.context.SerializeToString()
        # Serialized protos concatenate as a merge: the features maps are unioned.
        examples = [context + e.SerializeToString()
                    for e in input_proto.example_list_with_context.examples]
    else:
        examples = []
    if not examples:
        raise invalid_argument("Input is empty.")
    return examples
