"""TF Serving's SavedModel warm-up file, written into every export:
``assets.extra/tf_serving_warmup_requests``, a TFRecord of ``tensorflow.serving.PredictionLog``
protos that TF Serving (and ``keras-bert serve``) replays before a new version serves, so the
first requests after a switch do not pay for graph optimization and kernel creation.

Each signature gets requests of batch sizes ``BATCH_SIZES`` at several lengths: raw text is
padded to each batch's longest text (a multiple of 8, at most seq_length), so every length is a
new shape to prepare. The protos are written in their wire format here, so exporting needs only
TensorFlow, not tensorflow-serving-api (whose PredictionLog reads them back in the tests).
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
from tensorflow.core.example import example_pb2
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import saved_model_pb2

from keras_bert import fileio

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
BATCH_SIZES = (1, 8)
# Packed lengths warmed up (those up to the export's seq_length, and seq_length itself).
LENGTHS = (8, 16, 32, 64, 128, 256, 512)


def write_warmup_requests(saved_model_dir: str, preprocessor) -> int:
    """Writes the warm-up file of the SavedModel in ``saved_model_dir``; returns its records.

    Args:
        saved_model_dir: a saved SavedModel (its saved_model.pb is read for the signatures).
        preprocessor: the export's BertPreprocessor: texts are made of one whole word of its
            vocabulary (so n words are n tokens), up to its seq_length.
    """
    vocabulary, seq_length = list(preprocessor.vocabulary), preprocessor.seq_length
    with fileio.open_file(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        saved_model = saved_model_pb2.SavedModel.FromString(f.read())
    signatures = saved_model.meta_graphs[0].signature_def
    word = _one_token_word(vocabulary, preprocessor.lower_case)
    filler_id = vocabulary.index(word)
    lengths = sorted({n for n in LENGTHS if n < seq_length} | {seq_length})
    has_pair = any("text_pair" in signature.inputs for signature in signatures.values())
    records = [record for key in sorted(signatures) if signatures[key].inputs
               for record in _signature_records(key, signatures[key], word, filler_id, lengths,
                                                has_pair)]
    path = os.path.join(saved_model_dir, WARMUP_FILE)
    fileio.makedirs(os.path.dirname(path))
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    return len(records)


def _one_token_word(vocabulary: list[str], lower_case: bool) -> str:
    """A plain word of the vocabulary, which tokenizes to itself."""
    for token in vocabulary:
        if token.isascii() and token.isalpha() and len(token) >= 3 and (
                token.islower() or not lower_case):
            return token
    raise ValueError("the vocabulary has no plain ASCII word to build warm-up requests from")


def _signature_records(key: str, signature, word: str, filler_id: int, lengths: list[int],
                       has_pair: bool) -> list[bytes]:
    """Serialized PredictionLogs for one signature. Field numbers of tensorflow_serving/apis:
    PredictionLog: classify_log = 2, regress_log = 3, predict_log = 6; each log: request = 1;
    PredictRequest: model_spec = 1, inputs = 2 (a map: entries of key = 1, value = 2);
    ClassificationRequest, RegressionRequest: model_spec = 1, input = 2; Input: example_list
    = 1; ExampleList: examples = 1."""
    records = []
    for length in lengths:
        for batch in BATCH_SIZES:
            api = _example_api(signature)
            if api is not None:
                text, pair = _texts(word, length, has_pair)
                features = {"text": text, **({"text_pair": pair} if has_pair else {})}
                examples = [_example(features) for _ in range(batch)]
                request = _message(1, _model_spec(key)) + _message(2, _message(1, b"".join(
                    _message(1, example) for example in examples)))
                records.append(_message(2 if api == "classify" else 3, _message(1, request)))
            else:
                inputs = {name: _input(name, info, batch, length, word, filler_id, has_pair)
                          for name, info in signature.inputs.items()}
                request = _message(1, _model_spec(key)) + b"".join(
                    _message(2, _message(1, name.encode()) + _message(2, tensor))
                    for name, tensor in sorted(inputs.items()))
                records.append(_message(6, _message(1, request)))
    return records


def _example_api(signature) -> str | None:
    """"classify" or "regress" for a signature of TF Serving's Classify or Regress API (one
    string input "inputs" of serialized tf.Examples; classes/scores, or one output "outputs"),
    else None. TF 2 SavedModels name every method tensorflow/serving/predict, so the method
    name does not tell."""
    inputs = signature.inputs
    if set(inputs) != {"inputs"} or inputs["inputs"].dtype != types_pb2.DT_STRING:
        return None
    outputs = set(signature.outputs)
    if outputs and outputs <= {"classes", "scores"}:
        return "classify"
    return "regress" if outputs == {"outputs"} else None


def _texts(word: str, length: int, has_pair: bool) -> tuple[str, str]:
    """A text (and pair) that packs to exactly ``length`` tokens with [CLS] and [SEP]s."""
    if has_pair:
        return " ".join([word] * max(length - 4, 1)), word
    return " ".join([word] * max(length - 2, 1)), ""


def _input(name: str, info, batch: int, length: int, word: str, filler_id: int,
           has_pair: bool) -> bytes:
    """A serialized TensorProto for one input: texts for strings, packed ids for integers
    (ones for a mask, zeros for type ids), zeros for other numbers."""
    dims = [d.size for d in info.tensor_shape.dim] if not info.tensor_shape.unknown_rank else [-1]
    shape = [batch] + [d if d >= 0 else length for d in dims[1:]]
    if info.dtype == types_pb2.DT_STRING:
        if shape[1:] and info.tensor_shape.dim[-1].size < 0:
            shape[-1] = 1  # a string input with a free axis (none of ours): one text per row
        text, pair = _texts(word, length, has_pair)
        value = np.full(shape, pair if name == "text_pair" else text, dtype=object)
    elif info.dtype in (types_pb2.DT_INT32, types_pb2.DT_INT64):
        fill = 1 if "mask" in name else 0 if "type" in name else filler_id
        value = np.full(shape, fill, tf.dtypes.as_dtype(info.dtype).as_numpy_dtype)
    else:
        value = np.zeros(shape, tf.dtypes.as_dtype(info.dtype).as_numpy_dtype)
    return tf.make_tensor_proto(value).SerializeToString()


def _example(features: dict[str, str]) -> bytes:
    example = example_pb2.Example()
    for name, text in features.items():
        example.features.feature[name].bytes_list.value.append(text.encode())
    return example.SerializeToString()


def _model_spec(signature_name: str) -> bytes:
    """ModelSpec: signature_name = 3 (TF Serving ignores the name and version in warm-up)."""
    return _message(3, signature_name.encode())


def _message(field_number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (a message, string or bytes)."""
    return _varint(field_number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)

