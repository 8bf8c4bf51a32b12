"""Static int8 input ranges from sample texts: ``quantize("int8", calibration_texts=...)``.

A quantized layer on the int8 path (``layers/int8.py``) quantizes each input row with its own
range, found on every call. Calibration finds the ranges once instead, on a few hundred texts
like the ones to be served: the int8 layers whose inputs keep a steady range per channel
(query, key and value and the intermediate layer, fed by a LayerNorm; the attention output, fed
by averages of value vectors) get static per-channel input scales, their inputs need no per-row
range, and oneDNN adds their bias (and the intermediate layer's GELU) inside the int8 matmul.
The output layer, fed by GELU outputs whose largest values come from single tokens, keeps
per-row ranges: static ranges there too moved a MiniLM classifier's labels below the agreement
with float32 that per-row ranges keep (benchmarks/README.md, calibration).

``BertEncoder.quantize`` and the task models' ``quantize`` calibrate in place before they
quantize; calibrated int8 exports (``export_model(quantize="int8", calibration_texts=...)``,
``keras-bert export --quantize int8 --calibration_file``) calibrate a copy. The scales are
weights of the transformer blocks (``TransformerBlock.use_static_int8_ranges``), so a
calibrated model saves and loads as a ``.keras`` file like any quantized one.
"""

from __future__ import annotations

import logging

import keras
import numpy as np

from keras_bert import keras_internals
from keras_bert.checkpoints.names import encoder_of
from keras_bert.layers import int8 as int8_layers

logger = logging.getLogger(__name__)


# Texts that calibration runs through the encoder at once (rows of one packed length).
CALIBRATION_BATCH = 32
# Calibration needs a sample of the texts the model will serve; fewer than this is refused.
MIN_CALIBRATION_TEXTS = 8
# The keywords keras.Model.quantize takes besides mode, config and filters (Keras 3).
QUANTIZE_KEYWORDS = frozenset({"type_check"})


def calibrate_before_quantize(model, preprocessor, texts, mode, config, filters,
                              quantize_kwargs: dict) -> None:
    """What ``quantize(mode, config, filters, calibration_texts=texts, **quantize_kwargs)`` of
    ``model`` (a BertEncoder or a task model) does before quantizing: checks that calibration
    applies, then ``calibrate``. Raises ValueError (calibration without int8, or with
    ``filters``: it covers the layers ``int8_layers()`` names), TypeError for texts that are
    not strings or a keyword ``keras.Model.quantize`` does not take, and
    ``Int8KernelMissing``, before anything changes."""
    unknown = sorted(set(quantize_kwargs) - QUANTIZE_KEYWORDS)
    if unknown:
        raise TypeError(f"{type(model).__name__}.quantize got unexpected keyword arguments "
                        f"{unknown}; nothing was calibrated")
    if (mode or getattr(config, "mode", None)) != "int8":
        raise ValueError(f"calibration_texts are for quantize(\"int8\"), not {mode!r}")
    if filters is not None:
        raise ValueError("calibration_texts calibrate the layers int8_layers() names; pass "
                         "no filters with them")
    texts = check_calibration_texts(texts)
    int8_layers.check_int8_kernel()
    calibrate(model, preprocessor, texts)


def check_float32(model, why: str) -> None:
    """Raises ValueError (``why``, then what ``model`` computes in) unless ``model`` (a
    BertEncoder or task model) and its encoder compute in float32: a task model on a
    bfloat16 encoder keeps its own float32 policy."""
    for part in (model, encoder_of(model)):
        policy = getattr(part, "dtype_policy", None)
        if policy is not None and policy.compute_dtype != "float32":
            raise ValueError(f"{why}; this {type(model).__name__} computes in {policy.name}")


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
    Its block then holds c = 127 / r as the layer's input scale and its kernel rows scaled by
    1 / c, so that it computes the same function in float32 (``(x * c) @ (W / c)``);
    ``quantize("int8")`` afterwards quantizes the scaled kernel per column, and inputs beyond a
    channel's range are clipped to it.

    Raises:
        ValueError: ``model`` is int8 already, calibrated already, or not float32; no
            ``preprocessor``; fewer than ``MIN_CALIBRATION_TEXTS`` texts.
        TypeError: ``texts`` is one string, or holds something else than strings.
    """
    texts = check_calibration_texts(texts)
    name = type(model).__name__
    modes = {layer.quantization_mode for layer in keras_internals.sublayers(model)
             if getattr(layer, "quantization_mode", None) is not None}
    if modes:
        raise ValueError(f"{name} is quantized already ({', '.join(sorted(modes))}); "
                         "calibration starts from the float32 model: calibrate before "
                         "quantize('int8')")
    encoder = encoder_of(model)
    if encoder.static_int8_ranges:
        raise ValueError(f"{name} is calibrated already (its kernels hold W / c); calibrate "
                         "the float32 model once")
    check_float32(model, "int8 starts from a float32 model")
    if preprocessor is None:
        raise ValueError(f"calibration_texts need the preprocessor that tokenizes them; this "
                         f"{name} has none")
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
        block.use_static_int8_ranges()
        attention.qkv_input_scale.assign(_rescale(
            (attention.query, attention.key, attention.value), ranges[id(attention.query)]))
        block.intermediate_input_scale.assign(_rescale((block.intermediate,),
                                                       ranges[id(block.intermediate)]))
        block.attention_output_input_scale.assign(_rescale(
            (block.attention_output,), ranges[id(block.attention_output)]))
    # Functions traced before read the kernels as they were, without the input scales: Keras
    # rebuilds them on the next call (as it does after quantize).
    for traced in {id(model): model, id(encoder): encoder}.values():
        traced.train_function = traced.test_function = traced.predict_function = None
    logger.info("calibrated static int8 input ranges of %d transformer layers on %d texts",
                len(encoder.transformer_layers), len(texts))


def kept_calibration_texts(model) -> list[str] | None:
    """The sample of its training texts ``model`` keeps (``BertTask.calibration_texts``) when
    there are enough to calibrate on (``MIN_CALIBRATION_TEXTS``); None otherwise, and int8
    then finds each row's range per call."""
    texts = getattr(model, "calibration_texts", None)
    return list(texts) if texts and len(texts) >= MIN_CALIBRATION_TEXTS else None


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
