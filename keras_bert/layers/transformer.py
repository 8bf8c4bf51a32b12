"""The BERT transformer block: post-LayerNorm multi-head self-attention and a GELU feed-forward."""

import keras
from keras import ops

from keras_bert import keras_internals
from keras_bert.layers import openvino_form
from keras_bert.layers.activations import get_activation, get_training_activation
from keras_bert.layers.dropout import BertDropout
from keras_bert.layers.int8 import apply_dense, apply_dense_together
from keras_bert.layers.layer_normalization import BertLayerNormalization
from keras_bert.layers.shapes import MASK_BIAS, SEQUENCE, check_rank

# Added to attention scores at padded key positions, as google-research/bert does.
MASK_ADDER = -10000.0


def attention_mask_bias(input_mask):
    """int [batch, seq] (1 = token, 0 = padding) -> float32 [batch, 1, 1, seq] additive bias."""
    mask = ops.cast(input_mask, "float32")
    return (1.0 - mask)[:, None, None, :] * MASK_ADDER


def _rows(sequence, hidden_size):
    """[B, S, H] -> [B*S, H]: Dense layers on rows run as 2D MatMul + bias (+ GELU), which TF's
    oneDNN graph rewrite fuses into one op; on [B, S, H] Keras emits a tensordot that it cannot
    fuse. Within ``openvino_form()``, unchanged: OpenVINO takes any rank, and the reshapes
    would keep NNCF's quantization out of the LayerNorm's kernel."""
    if openvino_form.active():
        return sequence
    return ops.reshape(sequence, (-1, hidden_size))


@keras.saving.register_keras_serializable(package="keras_bert")
class BertSelfAttention(keras.layers.Layer):
    """Multi-head scaled dot-product self-attention with a padding mask; softmax in float32.

    The query, key and value projections are three [hidden, hidden] Dense kernels, the layout of
    Google's and Hugging Face's checkpoints, each applied to [batch*seq, hidden] as a 2D matmul
    plus bias that TF's oneDNN rewrite fuses into one op. (One concatenated [hidden, 3*hidden]
    matmul measured the same on BERT-base: benchmarks/README.md.)

    Call args:
        hidden_states: float [batch, seq, hidden].
        mask_bias: float32 [batch, 1, 1, seq] from ``attention_mask_bias``.

    Returns:
        float [batch, seq, hidden], before the output projection.
    """

    def __init__(self, hidden_size, num_attention_heads, *, initializer_range=0.02,
                 attention_probs_dropout_prob=0.1, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size={hidden_size} is not divisible by "
                             f"num_attention_heads={num_attention_heads}")
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.head_size = hidden_size // num_attention_heads
        self.initializer_range = initializer_range
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.query = keras.layers.Dense(hidden_size, kernel_initializer=initializer,
                                        dtype=self.dtype_policy, name="query")
        self.key = keras.layers.Dense(hidden_size, kernel_initializer=initializer,
                                      dtype=self.dtype_policy, name="key")
        self.value = keras.layers.Dense(hidden_size, kernel_initializer=initializer,
                                        dtype=self.dtype_policy, name="value")
        self.dropout_layer = BertDropout(attention_probs_dropout_prob, dtype=self.dtype_policy,
                                         name="dropout")
        # Static per-channel input scale of Q, K and V (a float32 variable [hidden]) once
        # calibrated (add_static_input_scale); None: ranges found per row on every call.
        self.qkv_input_scale = None
        # Q, K and V's int8 weights side by side (int8.fused_int8_weights) in int8 exports.
        self.fused_qkv = None

    def build(self, input_shape=None):
        for dense in (self.query, self.key, self.value):
            dense.build((None, None, self.hidden_size))
        self.built = True

    def add_static_input_scale(self) -> None:
        """Gives Q, K and V one static per-channel input scale (``qkv_input_scale``, float32
        [hidden], non-trainable, ones until ``models.int8_calibration.calibrate`` sets it),
        saved with the layer's weights."""
        if self.qkv_input_scale is None:
            with keras_internals.adding_state(self):
                self.qkv_input_scale = _input_scale(self, "qkv_input_scale", self.hidden_size)

    def _split_heads(self, x, batch, seq):
        # [batch, seq, hidden] -> [batch, heads, seq, head_size]
        x = ops.reshape(x, (batch, seq, self.num_attention_heads, self.head_size))
        return ops.transpose(x, (0, 2, 1, 3))

    def call(self, hidden_states, mask_bias, training=None):
        check_rank("BertSelfAttention", "hidden_states", hidden_states, SEQUENCE)
        check_rank("BertSelfAttention", "mask_bias", mask_bias, MASK_BIAS)
        batch, seq = ops.shape(hidden_states)[0], ops.shape(hidden_states)[1]
        flat = _rows(hidden_states, self.hidden_size)                          # [B*S, H]
        # After quantize("int8"), apply_dense runs the int8 projections on oneDNN's int8 matmul.
        # After quantize("int8"), the three run as one int8 matmul (apply_dense_together).
        query, key, value = (self._split_heads(projected, batch, seq)         # [B, N, S, D]
                             for projected in apply_dense_together(
                                 (self.query, self.key, self.value), flat, training,
                                 self.qkv_input_scale, self.fused_qkv))

        dtype = self.compute_dtype
        query = query * ops.cast(1.0 / (self.head_size ** 0.5), dtype)
        scores = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))          # [B, N, S, S]
        scores = ops.cast(scores, "float32") + ops.cast(mask_bias, "float32")
        probs = ops.cast(ops.softmax(scores, axis=-1), dtype)
        probs = self.dropout_layer(probs, training=training)
        context = ops.matmul(probs, value)                                     # [B, N, S, D]
        context = ops.transpose(context, (0, 2, 1, 3))
        return ops.reshape(context, (batch, seq, self.hidden_size))

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "initializer_range": self.initializer_range,
            "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
        })
        return config


@keras.saving.register_keras_serializable(package="keras_bert")
class TransformerBlock(keras.layers.Layer):
    """One post-LN BERT layer: x = LN(x + Attn(x)); x = LN(x + FFN(x)).

    Args:
        hidden_size: width H.
        num_attention_heads: heads A; must divide H.
        intermediate_size: feed-forward width.
        hidden_act: activation name (see keras_bert.config.ACTIVATIONS).
        hidden_dropout_prob: dropout on the attention output and feed-forward output.
        attention_probs_dropout_prob: dropout on attention probabilities.
        initializer_range: stddev of the truncated-normal initializer.
        layer_norm_eps: LayerNorm epsilon.
        static_int8_ranges: build the static int8 input scales that calibration sets
            (``use_static_int8_ranges``), so that a calibrated block's saved weights load.

    Call args:
        hidden_states: float [batch, seq, hidden].
        mask_bias: float32 [batch, 1, 1, seq] from ``attention_mask_bias``.

    Returns:
        float [batch, seq, hidden].
    """

    def __init__(self, hidden_size, num_attention_heads, intermediate_size, *, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 initializer_range=0.02, layer_norm_eps=1e-12, static_int8_ranges=False,
                 **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps

        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        policy = self.dtype_policy
        self.attention = BertSelfAttention(
            hidden_size, num_attention_heads, initializer_range=initializer_range,
            attention_probs_dropout_prob=attention_probs_dropout_prob, dtype=policy,
            name="attention")
        self.attention_output = keras.layers.Dense(hidden_size, kernel_initializer=initializer,
                                                   dtype=policy, name="attention_output")
        self.attention_dropout_layer = BertDropout(hidden_dropout_prob, dtype=policy)
        self.attention_layer_norm = BertLayerNormalization(
            epsilon=layer_norm_eps, dtype=policy, name="attention_layer_norm")
        # The activation is applied in call(): training uses get_training_activation's form.
        self.intermediate = keras.layers.Dense(intermediate_size, kernel_initializer=initializer,
                                               dtype=policy, name="intermediate")
        self.activation = get_activation(hidden_act)
        self.training_activation = get_training_activation(hidden_act)
        self.output_dense = keras.layers.Dense(hidden_size, kernel_initializer=initializer,
                                               dtype=policy, name="output")
        self.output_dropout_layer = BertDropout(hidden_dropout_prob, dtype=policy)
        self.output_layer_norm = BertLayerNormalization(
            epsilon=layer_norm_eps, dtype=policy, name="output_layer_norm")
        # Static per-channel input scales of the intermediate and attention-output layers (and
        # the attention's of Q, K and V) once calibrated (use_static_int8_ranges); None: ranges
        # found per row on every call.
        self.static_int8_ranges = static_int8_ranges
        self.intermediate_input_scale = None
        self.attention_output_input_scale = None

    def build(self, input_shape=None):
        shape = (None, None, self.hidden_size)
        self.attention.build(shape)
        self.attention_output.build(shape)
        self.attention_layer_norm.build(shape)
        self.intermediate.build(shape)
        self.output_dense.build((None, None, self.intermediate_size))
        self.output_layer_norm.build(shape)
        if self.static_int8_ranges:
            self.use_static_int8_ranges()
        self.built = True

    def use_static_int8_ranges(self) -> None:
        """Gives query-key-value, the attention output and the intermediate layer static
        per-channel input scales (float32 [hidden] variables, ones until
        ``models.int8_calibration.calibrate`` sets them; the Dense kernels then hold W / c), so
        that the int8 path quantizes their inputs with them (``layers.int8.apply_dense``). They
        are weights like any other: a ``.keras`` file keeps them (``static_int8_ranges`` in the
        config builds them again)."""
        self.attention.add_static_input_scale()
        if self.intermediate_input_scale is None:
            with keras_internals.adding_state(self):
                self.attention_output_input_scale = _input_scale(
                    self, "attention_output_input_scale", self.hidden_size)
                self.intermediate_input_scale = _input_scale(self, "intermediate_input_scale",
                                                             self.hidden_size)
        self.static_int8_ranges = True

    def call(self, hidden_states, mask_bias, training=None):
        check_rank("TransformerBlock", "hidden_states", hidden_states, SEQUENCE)
        check_rank("TransformerBlock", "mask_bias", mask_bias, MASK_BIAS)
        batch, seq = ops.shape(hidden_states)[0], ops.shape(hidden_states)[1]
        flat = _rows(hidden_states, self.hidden_size)                          # [B*S, H]
        attention = self.attention(hidden_states, mask_bias, training=training)
        # After quantize("int8"), apply_dense runs the int8 layers on oneDNN's int8 matmul.
        attention = apply_dense(self.attention_output,
                                _rows(attention, self.hidden_size), training,
                                self.attention_output_input_scale)
        attention = self.attention_dropout_layer(attention, training=training)
        flat = self.attention_layer_norm(flat + attention, training=training)
        activation = self.training_activation if training else self.activation
        intermediate = apply_dense(self.intermediate, flat, training,         # [B*S, I]
                                   self.intermediate_input_scale, activation)
        feed_forward = apply_dense(self.output_dense, intermediate, training)
        feed_forward = self.output_dropout_layer(feed_forward, training=training)
        flat = self.output_layer_norm(flat + feed_forward, training=training)
        if openvino_form.active():
            return flat
        return ops.reshape(flat, (batch, seq, self.hidden_size))

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "intermediate_size": self.intermediate_size,
            "hidden_act": self.hidden_act,
            "hidden_dropout_prob": self.hidden_dropout_prob,
            "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
            "initializer_range": self.initializer_range,
            "layer_norm_eps": self.layer_norm_eps,
            "static_int8_ranges": self.static_int8_ranges,
        })
        return config


def _input_scale(layer: keras.layers.Layer, name: str, size: int):
    """A static int8 input scale of ``layer``: float32 [size], ones, not trained."""
    return layer.add_weight(shape=(size,), initializer="ones", trainable=False, name=name,
                            dtype="float32")
