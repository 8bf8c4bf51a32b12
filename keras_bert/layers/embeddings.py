"""BERT input embeddings: token + segment + learned position embeddings, LayerNorm, dropout."""

import keras
from keras import ops

from keras_bert.layers.dropout import BertDropout
from keras_bert.layers.layer_normalization import BertLayerNormalization
from keras_bert.layers.shapes import TOKEN_IDS, check_rank


@keras.saving.register_keras_serializable(package="keras_bert")
class BertEmbeddings(keras.layers.Layer):
    """Sums word, segment and position embeddings, then applies LayerNorm and dropout.

    Args:
        vocab_size: rows of the word embedding table.
        hidden_size: embedding width H.
        max_position_embeddings: rows of the position table; the longest sequence accepted.
        type_vocab_size: rows of the segment (token type) table.
        initializer_range: stddev of the truncated-normal initializer.
        hidden_dropout_prob: dropout rate after LayerNorm.
        layer_norm_eps: LayerNorm epsilon.

    Call args:
        input_word_ids: int [batch, seq].
        input_type_ids: int [batch, seq].

    Returns:
        float [batch, seq, hidden_size].
    """

    def __init__(self, vocab_size, hidden_size, *, max_position_embeddings=512,
                 type_vocab_size=2, initializer_range=0.02, hidden_dropout_prob=0.1,
                 layer_norm_eps=1e-12, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.hidden_dropout_prob = hidden_dropout_prob
        self.layer_norm_eps = layer_norm_eps

        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.word_embeddings = keras.layers.Embedding(
            vocab_size, hidden_size, embeddings_initializer=initializer,
            dtype=self.dtype_policy, name="word_embeddings")
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size, hidden_size, embeddings_initializer=initializer,
            dtype=self.dtype_policy, name="token_type_embeddings")
        self.layer_norm = BertLayerNormalization(
            epsilon=layer_norm_eps, dtype=self.dtype_policy, name="layer_norm")
        self.dropout_layer = BertDropout(hidden_dropout_prob, dtype=self.dtype_policy,
                                         name="dropout")

    def build(self, input_shape=None):
        self.word_embeddings.build()
        self.token_type_embeddings.build()
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range))
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, training=None):
        check_rank("BertEmbeddings", "input_word_ids", input_word_ids, TOKEN_IDS)
        check_rank("BertEmbeddings", "input_type_ids", input_type_ids, TOKEN_IDS)
        seq_length = ops.shape(input_word_ids)[1]
        if isinstance(seq_length, int) and seq_length > self.max_position_embeddings:
            raise ValueError(
                f"input sequences have {seq_length} tokens but max_position_embeddings is "
                f"{self.max_position_embeddings}; truncate inputs to at most that length")
        positions = ops.cast(self.position_embeddings[:seq_length], self.compute_dtype)
        embeddings = (self.word_embeddings(input_word_ids)
                      + self.token_type_embeddings(input_type_ids)
                      + positions[None, :, :])
        embeddings = self.layer_norm(embeddings, training=training)
        return self.dropout_layer(embeddings, training=training)

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "initializer_range": self.initializer_range,
            "hidden_dropout_prob": self.hidden_dropout_prob,
            "layer_norm_eps": self.layer_norm_eps,
        })
        return config
