"""int8 exports: the encoder's dense layers as oneDNN int8 matmuls, its word embeddings as int8.

An int8 export is the float32 model with, in every transformer block, the query, key, value,
attention-output, intermediate and output Dense layers replaced by ``Int8Dense`` and the word
embedding table by ``Int8Embedding``; everything else (position and segment embeddings,
attention scores, softmax, LayerNorm, GELU, the pooler and the task heads) stays float32.

The numbers (per row of activations, per column of weights, as Keras' own int8 Dense):
- a kernel W [in, units] is stored as int8 round(W / s) with one scale s = max|W[:, j]| / 127
  per output column;
- each call quantizes each input row x [in] with its own scale r = max|x| / 127;
- the int8 matmul sums int8 products exactly in int32, and y = acc * r * s + bias, in float32.
Word embeddings are stored as int8 with one scale per row (token) and are dequantized after
the lookup. The matmul is oneDNN's ``_QuantizedMatMul`` (``tf_internals.int8_matmul``), which
TensorFlow's x86-64 CPU builds register; ``check_int8_kernel`` says whether this one runs it.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from keras_bert.export import tf_internals
from keras_bert.models.encoder import BertEncoder

_INT8_MAX = 127.0


def quantize_columns(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 [rows, columns], float32 [columns] scales) with matrix ~= int8 * scales.

    One symmetric scale per column, max |column| / 127; an all-zero column gets scale 1.
    """
    matrix = np.asarray(matrix, np.float32)
    ranges = np.abs(matrix).max(axis=0)
    scales = np.where(ranges > 0, ranges / _INT8_MAX, 1.0).astype(np.float32)
    quantized = np.clip(np.rint(matrix / scales), -_INT8_MAX, _INT8_MAX).astype(np.int8)
    return quantized, scales


def quantize_rows(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """float32 [m, k] -> (qint8 [m, k], float32 [m, 1] scales), x ~= qint8 * scales per row.

    One symmetric scale per row, max |row| / 127, computed on every call (an all-zero row
    quantizes to zeros).
    """
    ranges = tf.maximum(tf.reduce_max(tf.abs(x), axis=1, keepdims=True), 1e-30)
    quantized = tf.cast(tf.round(x * (_INT8_MAX / ranges)), tf.int8)  # |values| <= 127
    return tf.bitcast(quantized, tf.qint8), ranges / _INT8_MAX


class Int8Dense(keras.layers.Layer):
    """A Dense layer (no activation) whose kernel is int8 with a scale per output column.

    Built from a float Dense by ``from_dense``; the int8 export puts it in that layer's place.

    Args:
        units: output width.
        use_bias: whether a float32 bias [units] is added.

    Call args:
        inputs: float32 [..., in].

    Returns:
        float32 [..., units]: the float Dense's output to within int8 rounding.
    """

    def __init__(self, units: int, use_bias: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.use_bias = use_bias

    def build(self, input_shape):
        in_features = input_shape[-1]
        self.kernel = self.add_weight(name="kernel", shape=(in_features, self.units),
                                      initializer="zeros", dtype="int8", trainable=False)
        # The column ranges, max |W[:, j]| = 127 * scale: what the int8 matmul takes.
        self.kernel_range = self.add_weight(name="kernel_range", shape=(self.units,),
                                            initializer="ones", trainable=False)
        self.bias = (self.add_weight(name="bias", shape=(self.units,), initializer="zeros",
                                     trainable=False) if self.use_bias else None)
        self.built = True

    @classmethod
    def from_dense(cls, dense: keras.layers.Dense) -> "Int8Dense":
        """The int8 form of a built float ``dense`` (which must have no activation)."""
        if dense.activation not in (None, keras.activations.linear):
            raise ValueError(f"Int8Dense has no activation; {dense.name!r} has "
                             f"{dense.activation.__name__}")
        layer = cls(dense.units, use_bias=dense.use_bias, name=dense.name)
        kernel = keras.ops.convert_to_numpy(dense.kernel)
        layer.build((None, kernel.shape[0]))
        quantized, scales = quantize_columns(kernel)
        layer.kernel.assign(quantized)
        layer.kernel_range.assign(scales * _INT8_MAX)
        if dense.use_bias:
            layer.bias.assign(keras.ops.convert_to_numpy(dense.bias).astype(np.float32))
        return layer

    def call(self, inputs):
        inputs = tf.cast(inputs, tf.float32)
        flat = tf.reshape(inputs, [-1, tf.shape(inputs)[-1]])                 # [m, in]
        quantized, row_scales = quantize_rows(flat)
        kernel = tf.bitcast(tf.convert_to_tensor(self.kernel), tf.qint8)
        kernel_range = tf.convert_to_tensor(self.kernel_range)
        if tf.executing_eagerly():
            outputs = _int8_matmul_function(quantized, kernel, kernel_range)
        else:
            outputs = tf_internals.int8_matmul(quantized, kernel, kernel_range)
        outputs = outputs * row_scales                                         # [m, units]
        if self.bias is not None:
            outputs = tf.nn.bias_add(outputs, self.bias)
        return tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [self.units]], 0))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units, "use_bias": self.use_bias})
        return config


# For eager calls (a model called outside tf.function): the op exists only in graphs. All
# eager calls share this one node, so it must not keep the first kernel it sees.
_int8_matmul_function = tf.function(
    lambda inputs, kernel, kernel_range: tf_internals.int8_matmul(
        inputs, kernel, kernel_range, constant_kernel=False),
    autograph=False, reduce_retracing=True)


class Int8Embedding(keras.layers.Layer):
    """An embedding table stored as int8 with a scale per row, dequantized after the lookup.

    Args:
        input_dim: rows (the vocabulary size).
        output_dim: width.

    Call args:
        inputs: int [...] row ids.

    Returns:
        float32 [..., output_dim].
    """

    def __init__(self, input_dim: int, output_dim: int, **kwargs):
        super().__init__(**kwargs)
        self.input_dim = input_dim
        self.output_dim = output_dim

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(name="embeddings",
                                          shape=(self.input_dim, self.output_dim),
                                          initializer="zeros", dtype="int8", trainable=False)
        self.embeddings_scale = self.add_weight(name="embeddings_scale",
                                                shape=(self.input_dim,),
                                                initializer="ones", trainable=False)
        self.built = True

    @classmethod
    def from_embedding(cls, embedding: keras.layers.Embedding) -> "Int8Embedding":
        """The int8 form of a built float ``embedding``."""
        layer = cls(embedding.input_dim, embedding.output_dim, name=embedding.name)
        layer.build()
        table = keras.ops.convert_to_numpy(embedding.embeddings)
        quantized, scales = quantize_columns(table.T)  # a column of the transpose is a row
        layer.embeddings.assign(quantized.T)
        layer.embeddings_scale.assign(scales)
        return layer

    def call(self, inputs):
        rows = tf.cast(tf.gather(self.embeddings, inputs), tf.float32)       # [..., width]
        return rows * tf.gather(self.embeddings_scale, inputs)[..., None]

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.output_dim,)

    def get_config(self):
        config = super().get_config()
        config.update({"input_dim": self.input_dim, "output_dim": self.output_dim})
        return config


def int8_copy(model):
    """A copy of ``model`` (a BertEncoder or a task model) for an int8 export: the same
    weights, with its encoder's dense layers ``Int8Dense`` and its word embeddings
    ``Int8Embedding``; ``model`` itself is unchanged.

    The copy is for tracing only: its int8 layers are set in place of the float ones without
    Keras' tracking (a built Keras layer takes no new sublayers), so ``copy.weights`` still
    lists the float ones. An export saves the variables its traced functions read, which are
    the int8 ones.
    """
    if getattr(model, "dtype_policy", None) is not None and model.dtype_policy.name != "float32":
        raise ValueError(f"int8 exports start from a float32 model; this one computes in "
                         f"{model.dtype_policy.name}")
    copy = type(model).from_config(model.get_config())
    copy.set_weights(model.get_weights())
    encoder = copy if isinstance(copy, BertEncoder) else copy.encoder
    embeddings = encoder.embeddings
    _replace(embeddings, "word_embeddings",
             Int8Embedding.from_embedding(embeddings.word_embeddings))
    for block in encoder.transformer_layers:
        for parent, name in ((block.attention, "query"), (block.attention, "key"),
                             (block.attention, "value"), (block, "attention_output"),
                             (block, "intermediate"), (block, "output_dense")):
            _replace(parent, name, Int8Dense.from_dense(getattr(parent, name)))
    return copy


def _replace(layer: keras.layers.Layer, name: str, sublayer: keras.layers.Layer) -> None:
    # Plain attribute assignment, past Keras' state lock (see int8_copy).
    object.__setattr__(layer, name, sublayer)


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
    b = rng.integers(-127, 128, (64, 5)).astype(np.int8)
    b_range = np.full([5], _INT8_MAX, np.float32)  # scale 1: plain integers
    try:
        got = _int8_matmul_function(tf.bitcast(tf.constant(a), tf.qint8),
                                    tf.bitcast(tf.constant(b), tf.qint8),
                                    tf.constant(b_range)).numpy()
    except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError,
            tf.errors.UnimplementedError, ValueError, TypeError) as e:
        raise Int8KernelMissing(
            f"this TensorFlow ({tf.__version__}) cannot run oneDNN's int8 matmul "
            f"({tf_internals.INT8_MATMUL_OP}), which int8 exports use: "
            f"{type(e).__name__}: {str(e).splitlines()[0]}. Export with an x86-64 Linux "
            "TensorFlow CPU build (the PyPI wheel has it), or export without int8.") from e
    expected = a.astype(np.int32) @ b.astype(np.int32)
    if not np.array_equal(got, expected.astype(np.float32)):
        raise Int8KernelMissing(
            f"this TensorFlow's {tf_internals.INT8_MATMUL_OP} gave wrong results on a test "
            f"matmul (largest error {np.abs(got - expected).max()}); int8 exports are "
            "unsafe with it. Export without int8.")
