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
export --quantize int8 --calibration_file``): ``calibrate`` runs the float32 encoder on a few
hundred sample texts and gives the int8 layers whose inputs keep a steady range per channel
(query, key and value and the intermediate layer, fed by a LayerNorm; the attention output, fed
by averages of value vectors) static per-channel input ranges (``keras_bert.layers.int8``):
their inputs need no per-row range, and oneDNN adds their bias (and the intermediate layer's
GELU) inside the int8 matmul. The output layer, fed by GELU outputs whose largest values come
from single tokens, keeps per-row ranges: static ranges there too moved a MiniLM classifier's
labels (98.7% label agreement with float32, against 99.4% with per-row ranges and 99.5%
calibrated as here; issue 21's bound is 99%). Task-model int8 exports also store query, key and
value's int8 weights side by side (``fuse_qkv``).
"""

from __future__ import annotations

import logging
import os

import keras
import numpy as np

from keras_bert import fileio
from keras_bert.layers import int8 as int8_layers

logger = logging.getLogger(__name__)


# Texts that calibration runs through the encoder at once (rows of one packed length).
CALIBRATION_BATCH = 32
# Calibration needs a sample of the texts the model will serve; fewer than this is refused.
MIN_CALIBRATION_TEXTS = 8


def export_variant(model, quantize: str | None, calibration_texts=None, preprocessor=None):
    """The one decision of an export's int8-ness: ``(the model to export, whether it is int8)``.

    ``quantize="int8"`` exports a quantized copy (``quantized_copy``: ``quantize("int8")`` on a
    copy, calibrated on ``calibration_texts`` when given); a model the caller quantized is int8
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
                         "calibration_texts")
    if already:
        int8_layers.check_int8_kernel()
        return model, True
    if quantize is None:
        return model, False
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
    if getattr(model, "dtype_policy", None) is not None and model.dtype_policy.name != "float32":
        raise ValueError(f"int8 exports start from a float32 model; this one computes in "
                         f"{model.dtype_policy.name}")
    copy = type(model).from_config(model.get_config())
    copy.set_weights(model.get_weights())
    if calibration_texts is not None:
        if preprocessor is None:
            raise ValueError("calibration_texts need the preprocessor that tokenizes them")
        calibrate(copy, preprocessor, calibration_texts)
    copy.quantize("int8")
    return copy


def fuse_qkv(model) -> None:
    """Gives every attention layer of an int8 ``model`` its query, key and value weights side
    by side (``layers.int8.fused_int8_weights``), in place, so that inference reads them as
    they are instead of concatenating them on every call (4% of an int8 BERT-base's op time on
    short texts). For exports whose signatures read no other copy of them: a TF Serving export
    of a task model. An encoder's export also traces TF Hub's training-mode call, which runs
    Keras' own int8 layers on the separate weights: both copies would be saved."""
    encoder = model if hasattr(model, "transformer_layers") else model.encoder
    for block in encoder.transformer_layers:
        attention = block.attention
        attention.fused_qkv = int8_layers.fused_int8_weights(
            (attention.query, attention.key, attention.value))


def read_calibration_file(path) -> list[str]:
    """The texts of a calibration file (UTF-8, local or gs://): one per line, blank lines
    skipped. Raises FileNotFoundError, or ``DataError`` naming the line that is not UTF-8."""
    return [line.strip() for line in fileio.read_text_lines(os.fspath(path)) if line.strip()]


def calibrate(model, preprocessor, texts) -> None:
    """Gives query, key and value, the attention output and the intermediate Dense layers of
    every transformer block of ``model`` static per-channel input ranges from ``texts``, in
    place.

    Their inputs keep a steady range per channel (a LayerNorm's gamma and beta set it; the
    attention context averages value vectors), so a channel's largest value over a few hundred
    texts bounds it well; the GELU outputs that feed the output layer do not (their largest
    values come from single tokens), and it keeps per-row ranges.

    ``model`` (a float32 BertEncoder or task model, not yet quantized) runs on the texts, each
    packed to its own length (no padding rows: a padding row's activations would widen the
    ranges), and each of those layers records the largest |input| r_j of every input channel j.
    It then holds c = 127 / r as its input scale and its kernel rows scaled by 1 / c, so that
    it computes the same function in float32 (``(x * c) @ (W / c)``); ``quantize("int8")``
    afterwards quantizes the scaled kernel per column, and inputs beyond a channel's range are
    clipped to it.
    """
    texts = check_calibration_texts(texts)
    if int8_layers.is_int8(model):
        raise ValueError("calibrate a float32 model, before quantize('int8')")
    encoder = model if hasattr(model, "transformer_layers") else model.encoder
    packed = preprocessor([str(t) for t in texts])
    ids = packed["input_word_ids"].numpy()
    types = packed["input_type_ids"].numpy()
    lengths = packed["input_mask"].numpy().sum(axis=1)
    by_length = {}
    for row, length in enumerate(lengths):
        by_length.setdefault(int(length), []).append(row)
    with int8_layers.recording_input_ranges() as ranges:
        for length, rows in sorted(by_length.items()):
            for start in range(0, len(rows), CALIBRATION_BATCH):
                chosen = rows[start:start + CALIBRATION_BATCH]
                encoder({"input_word_ids": ids[chosen, :length],
                         "input_mask": np.ones((len(chosen), length), np.int32),
                         "input_type_ids": types[chosen, :length]}, training=False)
    for block in encoder.transformer_layers:
        attention = block.attention
        qkv = (attention.query, attention.key, attention.value)
        attention.qkv_input_scale = _rescale(qkv, ranges[id(attention.query)])
        block.intermediate_input_scale = _rescale((block.intermediate,),
                                                  ranges[id(block.intermediate)])
        block.attention_output_input_scale = _rescale((block.attention_output,),
                                                      ranges[id(block.attention_output)])
    logger.info("calibrated static int8 input ranges of %d transformer layers on %d texts",
                len(encoder.transformer_layers), len(texts))


def check_calibration_texts(texts, source: str | None = None) -> list[str]:
    """``texts`` as a list, or a clear error: they must be strings, at least
    ``MIN_CALIBRATION_TEXTS`` of them. ``source`` (a file name) is named in the error."""
    where = f" in {source!r}" if source else ""
    if isinstance(texts, (str, bytes)):
        raise TypeError("calibration texts must be a list of strings, not one string")
    texts = list(texts)
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise TypeError(f"calibration text {bad[0]}{where} is a {type(texts[bad[0]]).__name__}, "
                        "not a string")
    if len(texts) < MIN_CALIBRATION_TEXTS:
        raise ValueError(f"calibration needs at least {MIN_CALIBRATION_TEXTS} texts (a few "
                         f"hundred like the ones to be served); got {len(texts)}{where}")
    return texts


def _rescale(denses, channel_ranges: np.ndarray) -> np.ndarray:
    """Multiplies each Dense's kernel rows by r / 127 and returns c = 127 / r (float32 [in])."""
    # A channel that was 0 on every text keeps a small range: its inputs stay ~0 anyway.
    channel_ranges = np.maximum(channel_ranges.astype(np.float32), 1e-6)
    for dense in denses:
        kernel = keras.ops.convert_to_numpy(dense.kernel)
        dense.kernel.assign(kernel * (channel_ranges / int8_layers.INT8_MAX)[:, None])
    return (int8_layers.INT8_MAX / channel_ranges).astype(np.float32)
