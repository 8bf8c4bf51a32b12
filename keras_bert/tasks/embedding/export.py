"""The embedder's export: the sentence embedding (and, from packed ids, token features)."""

from __future__ import annotations

import tensorflow as tf

from keras_bert.export.signatures import RawText, TaskExport, register
from keras_bert.tasks.embedding.model import BertEmbedder


def embedder_outputs(model: BertEmbedder, preprocessor, inputs: dict,
                     raw: RawText | None) -> dict:
    """embedding float32 [batch, hidden]; serve_ids also gives token_features [batch, seq,
    hidden * len(feature_layers)] (left out of raw text, where it would dwarf the rest)."""
    outputs = model(inputs, training=False)
    result = {"embedding": tf.cast(outputs["embedding"], tf.float32)}
    if raw is None:
        result["token_features"] = tf.cast(outputs["token_features"], tf.float32)
    return result


register(BertEmbedder, TaskExport(outputs=embedder_outputs))
