"""Pretraining heads: the masked-LM head (tied to the word embeddings) and the next-sentence head.

Task heads for fine-tuning (classification, span, token tagging) live beside these.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_bert.layers.activations import get_activation
from keras_bert.layers.layer_normalization import BertLayerNormalization
from keras_bert.layers.shapes import POOLED, SEQUENCE, check_rank


def gather_positions(sequence, positions):
    """float [batch, seq, hidden], int [batch, num_positions] -> [batch, num_positions, hidden]."""
    return ops.take_along_axis(sequence, ops.cast(positions, "int32")[:, :, None], axis=1)


@keras.saving.register_keras_serializable(package="keras_bert")
class MaskedLMHead(keras.layers.Layer):
    """Predicts the vocabulary token at the given positions, as google-research/bert's MLM head.

    dense(H) + activation + LayerNorm, then logits = h @ word_embeddings^T + output_bias.
    The output weights are the encoder's word embeddings (tied), so the head owns only the
    transform and the [vocab_size] bias.

    Args:
        embedding_layer: the encoder's ``keras.layers.Embedding`` holding the [vocab, H] table.
        hidden_act: transform activation name (Google uses the config's hidden_act).
        initializer_range: stddev of the truncated-normal initializer.
        layer_norm_eps: LayerNorm epsilon.

    Call args:
        sequence_output: float [batch, seq, hidden].
        masked_positions: int [batch, num_predictions].

    Returns:
        float32 logits [batch, num_predictions, vocab_size].
    """

    def __init__(self, embedding_layer, hidden_act="gelu", initializer_range=0.02,
                 layer_norm_eps=1e-12, **kwargs):
        super().__init__(**kwargs)
        # Not tracked as a sublayer: the table belongs to (and is saved with) the encoder.
        object.__setattr__(self, "embedding_layer", embedding_layer)
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.vocab_size = embedding_layer.input_dim
        self.hidden_size = embedding_layer.output_dim
        self.dense = keras.layers.Dense(
            self.hidden_size, activation=get_activation(hidden_act),
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy, name="transform")
        self.layer_norm = BertLayerNormalization(
            epsilon=layer_norm_eps, dtype=self.dtype_policy, name="transform_layer_norm")

    def build(self, input_shape=None):
        self.dense.build((None, None, self.hidden_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros")
        self.built = True

    def call(self, sequence_output, masked_positions):
        check_rank("MaskedLMHead", "sequence_output", sequence_output, SEQUENCE)
        check_rank("MaskedLMHead", "masked_positions", masked_positions,
                   ("batch", "num_predictions"))
        batch, num_predictions = ops.shape(masked_positions)[0], ops.shape(masked_positions)[1]
        hidden = gather_positions(sequence_output, masked_positions)
        hidden = self.layer_norm(self.dense(hidden))
        hidden = ops.reshape(hidden, (-1, self.hidden_size))                  # [B*P, H]
        table = ops.cast(self.embedding_layer.embeddings, self.compute_dtype)  # [V, H]
        # A 2D MatMul with transpose_b: its gradient for the table comes out [V, H] (no
        # transpose of [H, V]), and in float32 oneDNN fuses the bias add into the MatMul.
        logits = tf.matmul(hidden, table, transpose_b=True)                   # [B*P, V]
        if logits.dtype == tf.float32:
            logits = tf.nn.bias_add(logits, self.output_bias)
        else:
            logits = ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")
        return ops.reshape(logits, (batch, num_predictions, self.vocab_size))

    def get_config(self):
        config = super().get_config()
        config.update({
            "embedding_layer": keras.layers.serialize(self.embedding_layer),
            "hidden_act": self.hidden_act,
            "initializer_range": self.initializer_range,
            "layer_norm_eps": self.layer_norm_eps,
        })
        return config

    @classmethod
    def from_config(cls, config):
        """A head with a new embedding table of the saved shape (built). Inside BertPretrainer
        the head is made from the encoder's own table instead, so the tie survives saving."""
        config = dict(config)
        embedding = keras.layers.deserialize(config.pop("embedding_layer"))
        if not embedding.built:
            embedding.build(None)
        return cls(embedding, **config)


@keras.saving.register_keras_serializable(package="keras_bert")
class NextSentenceHead(keras.layers.Layer):
    """Two-way classifier on the pooled output: is segment B the actual next segment?

    Its weight is stored [2, hidden] as in Google's cls/seq_relationship/output_weights.
    Label 0 = B is the actual next segment, 1 = B is random.

    Call args:
        pooled_output: float [batch, hidden].

    Returns:
        float32 logits [batch, 2].
    """

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(2, self.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias", shape=(2,), initializer="zeros")
        self.built = True

    def call(self, pooled_output):
        check_rank("NextSentenceHead", "pooled_output", pooled_output, POOLED)
        weights = ops.cast(self.output_weights, self.compute_dtype)
        logits = ops.matmul(pooled_output, ops.transpose(weights))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_size": self.hidden_size,
                       "initializer_range": self.initializer_range})
        return config
