"""int8 exports: a model quantized with Keras' ``quantize("int8")``, traced on oneDNN's int8 matmul.

An int8 export is the model after ``model.quantize("int8")``: ``BertEncoder.int8_layers()`` (in
every transformer block the query, key, value, attention-output, intermediate and output Dense
layers, and the word embeddings) hold Keras' int8 weights with a scale per output column (per
row for the embeddings), and the Dense layers run as ``keras_bert.layers.int8`` computes them:
each call quantizes each input row with its own scale, oneDNN's ``_QuantizedMatMul`` sums the
int8 products exactly in int32 and scales the columns, then the rows are scaled back.
Everything else (position and segment embeddings, attention scores, softmax, LayerNorm, GELU,
the pooler and the task heads) stays float32. ``export_model(quantize="int8")`` quantizes a
copy (``quantized_copy``); a model the caller quantized exports as int8 as it is
(``export_variant`` decides, for TF Serving and TF Hub exports alike). The matmul is
TensorFlow's x86-64 CPU builds'; ``layers.int8.check_int8_kernel`` says whether this one runs it.

Calibrated exports (``export_model(quantize="int8", calibration_texts=...)``, ``keras-bert
export --quantize int8 --calibration_file``) calibrate the copy on a few hundred sample texts
before quantizing it, as ``quantize("int8", calibration_texts=...)`` calibrates a model in place
(``models/int8_calibration.py``: static per-channel input ranges). Task-model int8 exports also
store query, key and value's int8 weights side by side (``qkv_side_by_side``).
"""

from __future__ import annotations

import contextlib
import logging
import os

from keras_bert import fileio
from keras_bert.layers import int8 as int8_layers
from keras_bert.checkpoints.names import encoder_of
from keras_bert.models.int8_calibration import (calibrate, check_calibration_texts, check_float32,
                                                kept_calibration_texts)

logger = logging.getLogger(__name__)


def export_variant(model, quantize: str | None, calibration_texts=None, preprocessor=None):
    """The one decision of an export's int8-ness: ``(the model to export, whether it is int8)``.

    ``quantize="int8"`` exports a quantized copy (``quantized_copy``: ``quantize("int8")`` on a
    copy, calibrated on ``calibration_texts``, or when none are given on the sample of its
    training texts a task model keeps, ``model.calibration_texts``; dynamic ranges for a model
    that has neither); a model the caller quantized is int8
    either way and exports as it is. Whenever the export is int8, this TensorFlow must run
    oneDNN's int8 matmul (``check_int8_kernel``, which ``quantize("int8")`` runs too).

    Raises:
        ValueError: ``quantize`` is not "int8" or None; calibration texts without int8, or for
            a model quantized already (calibration starts from float32).
        Int8KernelMissing: int8 on a TensorFlow without oneDNN's int8 kernel.
    """
    if quantize not in (None, "int8"):
        raise ValueError(f'quantize must be "int8" or None, got {quantize!r}')
    if calibration_texts is not None and quantize != "int8":
        raise ValueError("calibration_texts are for int8 exports: pass quantize=\"int8\"")
    already = int8_layers.is_int8(model)
    if calibration_texts is not None and already:
        raise ValueError(f"{type(model).__name__} is quantized already; calibration starts "
                         "from the float32 model: export that with quantize=\"int8\" and "
                         "calibration_texts, or quantize it with quantize(\"int8\", "
                         "calibration_texts=...)")
    if already:
        int8_layers.check_int8_kernel()
        return model, True
    if quantize is None:
        return model, False
    if calibration_texts is None and kept_calibration_texts(model):
        calibration_texts = kept_calibration_texts(model)
        logger.info("int8: calibrating on %d of the texts the %s was trained on",
                    len(calibration_texts), type(model).__name__)
    if calibration_texts is not None:
        calibration_texts = check_calibration_texts(calibration_texts)
    return quantized_copy(model, calibration_texts, preprocessor), True


def quantized_copy(model, calibration_texts=None, preprocessor=None):
    """A copy of ``model`` (a float32 BertEncoder or task model, same weights) after
    ``quantize("int8")``; ``model`` itself is unchanged.

    Args:
        calibration_texts: None (dynamic per-row input ranges everywhere), or sample texts
            (strings; a few hundred like the ones to be served) from which the int8 layers
            of every block but the output layer get static per-channel input ranges
            (``calibrate``).
        preprocessor: the BertPreprocessor that turns ``calibration_texts`` into ids.
    """
    check_float32(model, "int8 exports start from a float32 model")
    copy = type(model).from_config(model.get_config())
    copy.set_weights(model.get_weights())
    if calibration_texts is not None:
        calibrate(copy, preprocessor, calibration_texts)
    copy.quantize("int8")
    return copy


@contextlib.contextmanager
def qkv_side_by_side(model):
    """Within it, every attention layer of an int8 ``model`` holds its query, key and value
    weights side by side (``layers.int8.fused_int8_weights``), so that functions traced then
    read them as they are instead of concatenating them on every call (a visible share of an
    int8 BERT-base's op time on short texts); afterwards the layers read their own weights again
    (a copy kept beside Keras' would go stale if those changed). For exports whose signatures
    read no other copy of them: a TF Serving export of a task model. An encoder's export also
    traces TF Hub's training-mode call, which runs Keras' own int8 layers on the separate
    weights: both copies would be saved."""
    encoder = encoder_of(model)
    attentions = [block.attention for block in encoder.transformer_layers]
    fused = [int8_layers.fused_int8_weights((attention.query, attention.key, attention.value))
             for attention in attentions]  # all made before any layer holds one
    try:
        for attention, weights in zip(attentions, fused):
            attention.fused_qkv = weights
        yield
    finally:
        for attention in attentions:
            attention.fused_qkv = None


def read_calibration_file(path) -> list[str]:
    """The texts of a calibration file (UTF-8, local or gs://): one per line, blank lines
    skipped. Raises FileNotFoundError, or ``DataError`` naming the line that is not UTF-8."""
    return [line.strip() for line in fileio.read_text_lines(os.fspath(path)) if line.strip()]
