"""BertEmbedder: fixed sentence and token features from a BERT encoder: a sentence vector ([CLS],
mean pooling, or the mean of the second-to-last layer, optionally L2-normalized) and, for the
paper's feature-based approach, each token's top layers concatenated."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
from keras import ops

from keras_bert.checkpoints.stored_head import StoredHead
from keras_bert.layers.pooling import SentencePooling
from keras_bert.models.encoder import BertEncoder
from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.export.saved_model import ExportsRawText
from keras_bert.models.task import RECIPE, BertTask
from keras_bert.recipe.inputs import as_string_array, is_text_arrays
from keras_bert.models.task_predict import packed_arrays, predict_by_length

POOLINGS = ("cls", "mean", "second_to_last_mean")
# The paper's best feature-based NER concatenated the top four layers.
TOP_FEATURE_LAYERS = (-1, -2, -3, -4)


class _EmbeddingView:
    """A plain holder, so that Keras does not track it as part of the model: the functional
    view of a BertEmbedder that computes its embedding output alone (built on first use)."""

    def __init__(self):
        self.model = None


@keras.saving.register_keras_serializable(package="keras_bert")
class BertEmbedder(ExportsRawText, BertTask):
    """Sentence embeddings and per-token features from a (usually frozen) BERT encoder.

    Args:
        encoder: a BertEncoder.
        preprocessor: a BertPreprocessor for raw text, or None (packed ids only).
        pooling: ``"cls"`` (the last layer's [CLS] vector), ``"mean"`` (mean of the last layer
            over real tokens, as sentence-transformers pools) or ``"second_to_last_mean"`` (the
            same over layer L-1, often better without fine-tuning).
        normalize: L2-normalize the sentence embedding.
        feature_layers: the layers whose token vectors are concatenated into
            ``token_features`` (negative indexes count from the top; None: the top four,
            -1, -2, -3, -4, as the paper's best feature-based NER, or all of a smaller encoder).

    Inputs: packed ids, or raw text / (text, text_pair) pairs in ``predict`` and ``embed``.

    Outputs (a dict):
        embedding: float32 [batch, hidden].
        token_features: float32 [batch, seq, hidden * len(feature_layers)], layers in
            ``feature_layers`` order.

    ``from_pretrained(path, seq_length=128, **kwargs)`` builds one on a checkpoint's encoder
    (see ``BertTask.from_pretrained``).

    Example:
    >>> import numpy as np
    >>> encoder = BertEncoder(vocab_size=50, hidden_size=16, num_hidden_layers=4,
    ...                       num_attention_heads=2, intermediate_size=32)
    >>> embedder = BertEmbedder(encoder, pooling="mean", normalize=True)
    >>> ids = np.array([[2, 7, 8, 3, 0]], dtype="int32")
    >>> out = embedder.predict({"input_word_ids": ids, "input_mask": np.int32(ids > 0),
    ...                         "input_type_ids": np.zeros_like(ids)}, verbose=0)
    >>> out["embedding"].shape, out["token_features"].shape
    ((1, 16), (1, 5, 64))
    >>> round(float(np.linalg.norm(out["embedding"])), 4)
    1.0
    """

    def __init__(self, encoder: BertEncoder, preprocessor=None, pooling: str = "mean",
                 normalize: bool = False, feature_layers: Sequence[int] | None = None,
                 **kwargs):
        num_layers = encoder.bert_config.num_hidden_layers
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; expected one of {', '.join(POOLINGS)}")
        if pooling == "second_to_last_mean" and num_layers < 2:
            raise ValueError("second_to_last_mean needs an encoder with at least 2 layers")
        if feature_layers is None:
            feature_layers = TOP_FEATURE_LAYERS[:num_layers]
        bad = [i for i in feature_layers if not -num_layers <= i < num_layers]
        if bad or not feature_layers:
            raise ValueError(f"feature_layers {list(feature_layers)} must be non-empty layer "
                             f"indexes in [{-num_layers}, {num_layers - 1}] for this "
                             f"{num_layers}-layer encoder")
        # === Layers ===
        pool = SentencePooling("cls" if pooling == "cls" else "mean", normalize, name="pooling")
        concatenate = keras.layers.Lambda(
            lambda tensors: ops.concatenate([ops.cast(t, "float32") for t in tensors], axis=-1),
            name="token_features")
        # === Functional model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUT_NAMES}
        layers = encoder(inputs)["encoder_outputs"]
        source = layers[-2] if pooling == "second_to_last_mean" else layers[-1]
        outputs = {"embedding": pool(source, inputs["input_mask"]),
                   "token_features": concatenate([layers[i] for i in feature_layers])}
        super().__init__(inputs=inputs, outputs=outputs, encoder=encoder,
                         preprocessor=preprocessor, **kwargs)
        # === Config ===
        self.pooling = pooling
        self.normalize = normalize
        self.feature_layers = [int(i) for i in feature_layers]
        self._embedding_view = _EmbeddingView()

    def default_loss(self):
        raise ValueError("BertEmbedder computes fixed features and is not trained with fit; "
                         "fine-tune a task model (e.g. BertClassifier) on the same encoder")

    checkpoint_tasks = ("embedding",)
    uses_pooler = False
    overridable_head_arguments = ("pooling", "normalize")

    def checkpoint_head(self) -> StoredHead:
        """The sentence-transformers pooling (and Normalize) of this embedding."""
        unportable = None
        if self.pooling not in ("cls", "mean"):
            unportable = (f"a BertEmbedder with {self.pooling} pooling has no "
                          f"sentence-transformers equivalent (cls or mean)")
        return StoredHead("embedding", "a BertEmbedder", pooling=self.pooling,
                          normalize=self.normalize, unportable=unportable)

    @classmethod
    def head_arguments_of(cls, head: StoredHead) -> dict[str, Any]:
        """A sentence-transformers folder fixes the pooling and the normalisation."""
        return {"pooling": head.pooling, "normalize": head.normalize}

    def to_arrays(self, x, y=None):
        """Texts as arrays, one row per text (see ``BertTask.to_arrays``).

        Args:
            x: a text, a list of texts or of (text, text_pair) pairs; or packed ids.
            y: passed through (the embedder is not trained).

        Returns:
            ``(x, y)``: a str array [rows] (a tuple of two for pairs), or the packed ids.
        """
        if isinstance(x, dict) or is_text_arrays(x):
            return x, y
        x = [x] if isinstance(x, str) else list(x)
        if x and isinstance(x[0], (tuple, list)):
            return (as_string_array([p[0] for p in x], "text"),
                    as_string_array([p[1] for p in x], "text_pair")), y
        return as_string_array(x, "text"), y

    def pack_batch(self, x):
        return super().pack_batch(list(x) if isinstance(x, tuple) else x)

    def embed(self, x, batch_size: int | None = None) -> np.ndarray:
        """Sentence embeddings of raw texts (or packed ids): float32 [num_texts, hidden].

        Computes the embedding alone (``predict`` also gives ``token_features``, every token's
        top layers side by side: for 4,000 texts of 256 tokens, 6 GB that ``embed`` never
        holds)."""
        if self._embedding_view.model is None:
            view = keras.Model(self.input, {"embedding": self.output["embedding"]})
            view.sequence_padding = {}
            self._embedding_view.model = view
        return predict_by_length(self._embedding_view.model, packed_arrays(self, x),
                                 batch_size or RECIPE.batch_size, verbose=0)["embedding"]

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "pooling": self.pooling, "normalize": self.normalize,
                "feature_layers": self.feature_layers}
