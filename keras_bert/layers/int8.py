"""The int8 path of quantized models: Keras' int8 Dense maths on oneDNN's int8 matmul.

``model.quantize("int8")`` (Keras' convention) leaves each quantized Dense with an int8 kernel
[in, units] of 7-bit values (``INT8_WEIGHT_RANGE``: exact on CPUs with and without VNNI) and one
scale per output column, and Keras then computes every call with int8
products that TensorFlow runs at half the float32 speed. The transformer block calls its Dense
layers through ``apply_dense``, which, for such a layer at inference, computes the same numbers on
oneDNN's ``_QuantizedMatMul`` (``tf_internals.int8_matmul``, in x86-64 TensorFlow builds;
faster than float32 there, most on CPUs with VNNI: benchmarks/quantize_predict.py):
- each input row x [in] is quantized with its own scale r = max |x| / 127 on every call;
- the int8 matmul sums int8 products exactly in int32 and scales each column by its weight
  scale in the kernel's epilogue; then y = acc * r + bias, in float32.
The same graph is what an int8 export saves (``export/int8.py``), and a ``.keras`` file of a
quantized model holds Keras' own int8 weights, so it loads with ``keras.saving.load_model`` and
runs this path again.

Static input ranges (a model calibrated on sample texts by ``quantize("int8",
calibration_texts=...)`` or a calibrated int8 export: ``models/int8_calibration.py``): query,
key and value, the attention output and the intermediate layer get a per-channel input scale c
[in] = 127 / (the channel's largest |x| on the calibration texts), and each one's float kernel
is multiplied row-wise by 1 / c before quantizing, so that ``(x * c) @ (W / c) == x @ W``. Its
inputs are then quantized as round(x * c), clipped to [-127, 127], with no per-row range to
find, and no row scale stands between the matmul and its bias: oneDNN adds the bias (and applies
GELU) in the int8 matmul's epilogue. Each text still depends on nothing but itself, and the
per-row work saved makes it faster than per-row ranges (benchmarks/README.md, "Static input
ranges").
"""

from __future__ import annotations

import contextlib
import math

import keras
import numpy as np
import tensorflow as tf

from keras_bert import tf_internals
from keras_bert.layers import activations
from keras_bert import keras_internals

INT8_MAX = 127.0
# The quantized Dense layers' weights span 7 bits, not 8: on CPUs without VNNI (AVX2, and
# AVX-512 before Cascade Lake) oneDNN's int8 matmul adds each pair of (input + 128) x weight
# products in saturating int16 (vpmaddubsw), so 8-bit weights overflow (2 * 255 * 127 > 2^15)
# and give wrong sums, silently; with |weight| <= 63 every pair fits (2 * 255 * 63 < 2^15), so a
# model or export quantized on any x86-64 machine computes exact sums on every other one. This
# is oneDNN's advice for int8 without VNNI; inputs keep their 8 bits.
INT8_WEIGHT_RANGE = (-63, 63)


def int8_dense_config() -> keras.quantizers.Int8QuantizationConfig:
    """Keras' int8 config of the Dense layers ``quantize("int8")`` runs on oneDNN's int8 matmul:
    per-column weights within ``INT8_WEIGHT_RANGE`` (kernel_scale = 63 / max |W[:, j]|), Keras'
    default per-row input quantizer."""
    return keras.quantizers.Int8QuantizationConfig(
        weight_quantizer=keras.quantizers.AbsMaxQuantizer(axis=0, value_range=INT8_WEIGHT_RANGE))


def quantize_rows(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """float32 [m, k] -> (qint8 [m, k], float32 [m, 1] scales), x ~= qint8 * scales per row.

    One symmetric scale per row, max |row| / 127, computed on every call (an all-zero row
    quantizes to zeros).
    """
    ranges = tf.maximum(tf.reduce_max(tf.abs(x), axis=1, keepdims=True), 1e-30)
    quantized = tf.cast(tf.round(x * (INT8_MAX / ranges)), tf.int8)  # |values| <= 127
    return tf.bitcast(quantized, tf.qint8), ranges / INT8_MAX


def int8_matmul_rows(inputs: tf.Tensor, kernel, kernel_scale, bias=None) -> tf.Tensor:
    """float32 [..., units] ~= inputs @ W + bias, with W ~= kernel / kernel_scale per column.

    Args:
        inputs: float [..., in].
        kernel: int8 [in, units] (a variable or a tensor).
        kernel_scale: float32 [units], 63 / max |W[:, j]| (Keras' ``kernel_scale``; any bound
            works: the kernel's values times 1 / kernel_scale are W).
        bias: float32 [units] or None.
    """
    inputs = tf.cast(inputs, tf.float32)
    flat = tf.reshape(inputs, [-1, tf.shape(inputs)[-1]])                     # [m, in]
    quantized, row_scales = quantize_rows(flat)
    kernel = tf.bitcast(tf.convert_to_tensor(kernel), tf.qint8)
    kernel_range = INT8_MAX / tf.convert_to_tensor(kernel_scale)              # max |W[:, j]|
    if tf.executing_eagerly():
        outputs = _int8_matmul_function(quantized, kernel, kernel_range)
    else:
        outputs = tf_internals.int8_matmul(quantized, kernel, kernel_range)
    outputs = outputs * row_scales                                             # [m, units]
    if bias is not None:
        outputs = tf.nn.bias_add(outputs, tf.cast(bias, tf.float32))
    return tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [kernel.shape[1]]], 0))


def int8_matmul_static(scaled_inputs: tf.Tensor, kernel, kernel_scale, bias=None,
                       activation: str | None = None) -> tf.Tensor:
    """float32 [..., units] ~= activation(inputs @ W + bias) for inputs already multiplied by
    their static per-channel scale (``scaled_inputs = x * c``, so each channel spans [-127, 127]
    and the kernel holds W / c).

    Args:
        scaled_inputs: float [..., in].
        kernel: int8 [in, units] (a variable or a tensor).
        kernel_scale: float32 [units], Keras' per-column ``kernel_scale``.
        bias: float32 [units] or None.
        activation: None or a key of ``tf_internals.INT8_FUSED_ACTIVATIONS``, applied in the
            matmul's epilogue.
    """
    scaled_inputs = tf.cast(scaled_inputs, tf.float32)
    flat = tf.reshape(scaled_inputs, [-1, tf.shape(scaled_inputs)[-1]])       # [m, in]
    quantized = tf.cast(tf.clip_by_value(tf.round(flat), -INT8_MAX, INT8_MAX), tf.int8)
    quantized = tf.bitcast(quantized, tf.qint8)
    kernel = tf.bitcast(tf.convert_to_tensor(kernel), tf.qint8)
    kernel_range = INT8_MAX / tf.convert_to_tensor(kernel_scale)
    bias = (tf.zeros([kernel.shape[1]], tf.float32) if bias is None
            else tf.cast(bias, tf.float32))
    if tf.executing_eagerly():
        outputs = _int8_matmul_fused_function(quantized, kernel, kernel_range, bias, activation)
    else:
        outputs = tf_internals.int8_matmul(quantized, kernel, kernel_range, bias=bias,
                                           activation=activation)
    return tf.reshape(outputs, tf.concat([tf.shape(scaled_inputs)[:-1], [kernel.shape[1]]], 0))


# For eager calls (a model called outside tf.function): the op exists only in graphs. All
# eager calls share this one node, so it must not keep the first kernel it sees.
_int8_matmul_function = tf.function(
    lambda inputs, kernel, kernel_range: tf_internals.int8_matmul(
        inputs, kernel, kernel_range, constant_kernel=False),
    autograph=False, reduce_retracing=True)
_int8_matmul_fused_function = tf.function(
    lambda inputs, kernel, kernel_range, bias, activation: tf_internals.int8_matmul(
        inputs, kernel, kernel_range, constant_kernel=False, bias=bias, activation=activation),
    autograph=False, reduce_retracing=True)

# Our activations that the int8 matmul can apply itself, by the name tf_internals knows.
_FUSABLE_ACTIVATIONS = {activations.gelu_tanh: "gelu_tanh",
                        activations.gelu_exact: "gelu_exact"}

# While calibrating (``recording_input_ranges``): id(Dense) -> the largest |input| per channel
# seen in eager calls.
_recorded_ranges: dict | None = None


@contextlib.contextmanager
def recording_input_ranges():
    """Within it, eager calls of the model record, for every Dense that ``apply_dense`` or
    ``apply_dense_together`` runs, the largest |input| of each input channel. Yields the dict
    id(dense) -> numpy float32 [in]."""
    global _recorded_ranges
    previous, _recorded_ranges = _recorded_ranges, {}
    try:
        yield _recorded_ranges
    finally:
        _recorded_ranges = previous


def _record(denses, inputs) -> None:
    if _recorded_ranges is None or not tf.executing_eagerly():
        return
    flat = tf.reshape(tf.cast(inputs, tf.float32), [-1, tf.shape(inputs)[-1]])
    ranges = tf.reduce_max(tf.abs(flat), axis=0).numpy()
    for dense in denses:
        seen = _recorded_ranges.get(id(dense))
        _recorded_ranges[id(dense)] = ranges if seen is None else np.maximum(seen, ranges)


def apply_dense(dense: keras.layers.Dense, inputs, training=None, input_scale=None,
                activation=None):
    """``activation(dense(inputs))``; for a Dense that Keras quantized to int8, at inference
    (``training`` not True), the same numbers through ``int8_matmul_rows``.

    Keras' own int8 call runs when training (it has the gradient), and for an int8 Dense this
    path does not compute as Keras does (LoRA, a custom activation quantizer).

    Args:
        dense: a built ``keras.layers.Dense``.
        inputs: float [..., in].
        input_scale: None, or a static per-channel scale c [in] (a calibrated layer, whose
            kernel holds W / c): the layer computes ``dense(inputs * c)``, at inference on
            ``int8_matmul_static`` with the bias and a GELU ``activation`` in its epilogue.
        activation: applied after the layer (None: none besides the Dense's own).

    Returns:
        [..., units] in ``dense``'s compute dtype.
    """
    _record((dense,), inputs)
    weights = None if training else keras_internals.int8_dense_weights(dense)
    if input_scale is not None:
        inputs = inputs * tf.cast(input_scale, inputs.dtype)
    if weights is None:
        outputs = dense(inputs)
    elif input_scale is not None and dense.activation in (None, keras.activations.linear):
        fused = _FUSABLE_ACTIVATIONS.get(activation)
        outputs = int8_matmul_static(inputs, *weights, dense.bias, fused)
        if fused is not None:
            activation = None
    else:
        outputs = int8_matmul_rows(inputs, *weights, dense.bias)
        if dense.activation is not None:
            outputs = dense.activation(outputs)
    if activation is not None:
        outputs = activation(outputs)
    return tf.cast(outputs, dense.compute_dtype)


def fused_int8_weights(denses) -> tuple | None:
    """(kernel, kernel_scale, bias) of int8 Dense layers side by side, as tf.Variables: int8
    [in, sum of units], float32 [sum of units] and float32 [sum of units]; None unless every
    layer is an int8 Dense without activation (as ``apply_dense_together`` runs them).

    ``apply_dense_together(..., fused=)`` reads these instead of concatenating the layers'
    weights in the graph on every call. An export that holds them saves only them when no
    traced function reads the layers' own weights (TF Serving signatures of task models).
    """
    weights = [keras_internals.int8_dense_weights(dense) for dense in denses]
    if any(w is None for w in weights) or any(
            d.activation not in (None, keras.activations.linear) for d in denses):
        return None
    numpy = keras.ops.convert_to_numpy
    kernel = np.concatenate([numpy(k) for k, _ in weights], axis=1)
    scale = np.concatenate([numpy(s) for _, s in weights])
    bias = np.concatenate([numpy(d.bias) if d.bias is not None else np.zeros([d.units])
                           for d in denses]).astype(np.float32)
    return (tf.Variable(kernel, trainable=False, name="fused_kernel"),
            tf.Variable(scale, trainable=False, name="fused_kernel_scale"),
            tf.Variable(bias, trainable=False, name="fused_bias"))


def apply_dense_together(denses, inputs, training=None, input_scale=None,
                         fused=None) -> list:
    """``[dense(inputs) for dense in denses]``; where all of them are int8 Dense layers (as
    ``apply_dense`` runs them) with one input, as one int8 matmul on their kernels side by side.

    The inputs are quantized once, and one [in, sum of units] matmul keeps both threads busy where
    three [in, units] ones would each run on one: TensorFlow runs a oneDNN matmul on one thread
    when ``bytes * (m*n + k*(m+n))`` is below the L2 cache size, and an int8 value is one byte
    (BERT-base's 768x768 query, key and value at under ~300 rows, i.e. every short chunk). Each
    output column is computed exactly as ``apply_dense`` computes it (the same row scale, its
    own column's kernel scale), so the results are the same numbers. The concatenated kernel is
    built in the graph on every call (small beside the matmul it feeds); the op keeps its reordered copy of the first one (``is_weight_const``).

    Args:
        denses: built ``keras.layers.Dense`` layers without activations.
        inputs: float [..., in].
        input_scale: None, or the static per-channel scale c [in] that all of them were
            calibrated with (see ``apply_dense``).
        fused: None, or ``fused_int8_weights(denses)``, read at inference instead of
            concatenating the layers' weights.
    """
    _record(denses, inputs)
    weights = [None if training else keras_internals.int8_dense_weights(dense)
               for dense in denses]
    if any(w is None for w in weights) or any(d.activation not in (None, keras.activations.linear)
                                              for d in denses):
        return [apply_dense(dense, inputs, training, input_scale) for dense in denses]
    if fused is not None:
        kernel, kernel_scale, bias = fused
    else:
        kernel = tf.concat([tf.convert_to_tensor(kernel) for kernel, _ in weights], axis=1)
        kernel_scale = tf.concat([tf.convert_to_tensor(scale) for _, scale in weights], axis=0)
        biases = [dense.bias if dense.bias is not None else tf.zeros([dense.units])
                  for dense in denses]
        bias = tf.concat([tf.cast(b, tf.float32) for b in biases], axis=0)
    if input_scale is not None:
        scaled = tf.cast(inputs, tf.float32) * tf.cast(input_scale, tf.float32)
        outputs = int8_matmul_static(scaled, kernel, kernel_scale, bias)
    else:
        outputs = int8_matmul_rows(inputs, kernel, kernel_scale, bias)
    splits = tf.split(outputs, [dense.units for dense in denses], axis=-1)
    return [tf.cast(out, dense.compute_dtype) for out, dense in zip(splits, denses)]


def is_int8(model: keras.layers.Layer) -> bool:
    """Whether ``model.quantize("int8")`` has run: some layer inside it is int8."""
    return any(layer.quantization_mode == "int8" for layer in keras_internals.sublayers(model))


class Int8KernelMissing(RuntimeError):
    """This TensorFlow cannot run oneDNN's int8 matmul, so it cannot run int8 exports."""


def check_int8_kernel() -> None:
    """Raises Int8KernelMissing unless this TensorFlow runs ``_QuantizedMatMul`` correctly.

    Runs one small int8 matmul and compares it with the exact integer product, so it catches
    a build without the kernel (one built without oneDNN) as well as one whose kernel
    computes something else.
    """
    rng = np.random.default_rng(0)
    a = rng.integers(-127, 128, (3, 64)).astype(np.int8)
    a[:, 0] = 127  # every row's scale is 1: its values are quantized as they are
    a[0, :] = -127  # the extremes, where a CPU without VNNI would saturate with 8-bit weights
    low, high = INT8_WEIGHT_RANGE
    b = rng.integers(low, high + 1, (64, 5)).astype(np.int8)
    b[:, 0] = high
    try:
        got = int8_matmul_rows(a.astype(np.float32), b,
                                           np.ones([5], np.float32)).numpy()
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError,
            tf.errors.UnimplementedError, ValueError, TypeError) as e:
        raise Int8KernelMissing(
            f"this TensorFlow ({tf.__version__}) cannot run oneDNN's int8 matmul "
            f"({tf_internals.INT8_MATMUL_OP}), which quantize(\"int8\") and int8 exports use: "
            f"{type(e).__name__}: {str(e).splitlines()[0]}. Use an x86-64 Linux TensorFlow "
            "CPU build (the PyPI wheel has it), or keep the model float32.") from e
    expected = a.astype(np.int32) @ b.astype(np.int32)
    if not np.array_equal(got, expected.astype(np.float32)):
        raise Int8KernelMissing(
            f"this TensorFlow's {tf_internals.INT8_MATMUL_OP} gave wrong results on a test "
            f"matmul (largest error {np.abs(got - expected).max()}); int8 exports are "
            "unsafe with it. Export without int8.")
    # Calibrated exports fuse a bias and GELU into the op: the same product, scaled to ~[-3, 3].
    column_scale = np.full([5], np.abs(expected).max() / 3, np.float32)
    bias = np.linspace(-1, 1, 5).astype(np.float32)
    pre = expected / column_scale + bias
    for activation, reference in (
            ("gelu_tanh", 0.5 * pre * (1 + np.tanh(0.7978845608 * (pre + 0.044715 * pre ** 3)))),
            ("gelu_exact", 0.5 * pre * (1 + np.vectorize(math.erf)(pre / np.sqrt(2))))):
        try:
            got = int8_matmul_static(a.astype(np.float32), b, column_scale, bias,
                                                 activation).numpy()
        except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError,
                tf.errors.UnimplementedError) as e:
            raise Int8KernelMissing(
                f"this TensorFlow's {tf_internals.INT8_MATMUL_OP} cannot apply {activation} in "
                f"its epilogue ({str(e).splitlines()[0]}), which calibrated int8 exports use") \
                from e
        if not np.allclose(got, reference, rtol=1e-3, atol=1e-3):
            raise Int8KernelMissing(
                f"this TensorFlow's {tf_internals.INT8_MATMUL_OP} gave wrong results with "
                f"{activation} fused (largest error {np.abs(got - reference).max():.3g}); "
                "int8 exports are unsafe with it. Export without int8.")
