"""BertPretrainer: the encoder plus the masked-LM and next-sentence heads, as BERT is pretrained."""

from __future__ import annotations

import logging
from typing import Any

import keras

from keras_bert.checkpoints.stored_head import StoredHead
from keras_bert.checkpoints.names import (encoder_weight_names, is_pooler, masked_lm_weight_names,
                                          next_sentence_weight_names)
from keras_bert.checkpoints.reading import Checkpoint
from keras_bert.layers import MaskedLMHead, NextSentenceHead
from keras_bert.layers.shapes import TOKEN_IDS, check_input_ranks
from keras_bert.models.encoder import BertEncoder, SavesWhole
from keras_bert.models.loading import CheckpointLoading
from keras_bert.tokenization.packing import INPUT_NAMES

logger = logging.getLogger(__name__)


@keras.saving.register_keras_serializable(package="keras_bert")
class BertPretrainer(CheckpointLoading, SavesWhole, keras.Model):
    """The encoder with google-research/bert's pretraining heads (cls/predictions, cls/seq_relationship).

    Args:
        encoder: a BertEncoder; the MLM output weights are tied to its word embeddings.

    Inputs (a dict): the encoder's three int32 [batch, seq] inputs plus
        masked_lm_positions: int32 [batch, max_predictions_per_seq], positions to predict.

    Outputs (a dict):
        mlm_logits: float32 [batch, max_predictions_per_seq, vocab_size].
        nsp_logits: float32 [batch, 2]; class 0 = actual next segment, 1 = random.

    Example:
    >>> import numpy as np
    >>> encoder = BertEncoder(vocab_size=50, hidden_size=16, num_hidden_layers=1,
    ...                       num_attention_heads=2, intermediate_size=32)
    >>> pretrainer = BertPretrainer(encoder)
    >>> ids = np.array([[2, 7, 4, 3]], dtype="int32")
    >>> out = pretrainer({"input_word_ids": ids, "input_mask": np.ones_like(ids),
    ...                   "input_type_ids": np.zeros_like(ids),
    ...                   "masked_lm_positions": np.array([[2]], dtype="int32")})
    >>> tuple(out["mlm_logits"].shape), tuple(out["nsp_logits"].shape)
    ((1, 1, 50), (1, 2))
    """

    def __init__(self, encoder: BertEncoder, **kwargs):
        config = encoder.bert_config
        dtype = encoder.dtype_policy
        # === Layers ===
        masked_lm = MaskedLMHead(encoder.word_embeddings, config.hidden_act,
                                 config.initializer_range, config.layer_norm_eps, dtype=dtype,
                                 name="masked_lm")
        next_sentence = NextSentenceHead(config.hidden_size, config.initializer_range,
                                         dtype=dtype, name="next_sentence")
        # === Functional model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUT_NAMES}
        inputs["masked_lm_positions"] = keras.Input(shape=(None,), dtype="int32",
                                                    name="masked_lm_positions")
        encoded = encoder({name: inputs[name] for name in INPUT_NAMES})
        outputs = {
            "mlm_logits": masked_lm(encoded["sequence_output"], inputs["masked_lm_positions"]),
            "nsp_logits": next_sentence(encoded["pooled_output"]),
        }
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        # === Config ===
        self.encoder = encoder
        self.masked_lm = masked_lm
        self.next_sentence = next_sentence
        self.dtype_policy = dtype

    def __call__(self, inputs, *args, **kwargs):
        # Before Keras' own input handling, whose error names neither the input nor its axes.
        check_input_ranks("BertPretrainer", inputs, {
            **dict.fromkeys(INPUT_NAMES, TOKEN_IDS),
            "masked_lm_positions": ("batch", "max_predictions_per_seq")})
        return super().__call__(inputs, *args, **kwargs)

    # ------------------------------------------------------------ from_pretrained's steps
    @classmethod
    def _from_saved(cls, saved, path: str, asked: dict[str, Any]):
        if isinstance(saved, BertPretrainer):
            return saved
        logger.warning("%s holds a %s without pretraining heads; they keep their fresh "
                       "initialisation", path, type(saved).__name__)
        return None

    @classmethod
    def _new_encoder(cls, config, asked: dict[str, Any]) -> BertEncoder:
        return BertEncoder.from_bert_config(config, **asked)

    @classmethod
    def _around(cls, encoder: BertEncoder, checkpoint: Checkpoint, asked: dict[str, Any]
                ) -> "BertPretrainer":
        return cls(encoder)

    def _weights_in(self, checkpoint: Checkpoint):
        """The encoder's weights and the pretraining heads the checkpoint holds; a warning
        names the heads it lacks."""
        path = checkpoint.path
        weights = encoder_weight_names(self.encoder)
        task = checkpoint.head.task if checkpoint.head is not None else None
        if task in ("pretraining", "masked_lm"):
            weights += masked_lm_weight_names(self)
        if task == "pretraining":
            weights += next_sentence_weight_names(self)
        if task == "masked_lm":
            logger.warning("%s has no next-sentence head (it holds %s); the BertPretrainer's "
                           "keeps its fresh initialisation", path, checkpoint.head.describe())
        elif task != "pretraining":
            found = "" if checkpoint.head is None else f" (it holds {checkpoint.head.describe()})"
            logger.warning("%s has no pretraining heads%s; the BertPretrainer's masked-LM and "
                           "next-sentence heads keep their fresh initialisation", path, found)
        return weights, is_pooler

    def checkpoint_head(self) -> StoredHead:
        """The masked-LM and next-sentence heads (``save_checkpoint`` writes BertForPreTraining
        and Google's ``cls/...``)."""
        return StoredHead("pretraining", "a BertPretrainer")

    def quantize(self, mode=None, **kwargs) -> None:
        """Refused: the masked-LM head's output weights are the encoder's word-embedding table
        (tied), which int8 would store as integers. Quantize ``self.encoder`` (or a task model
        built on it) for inference instead."""
        raise ValueError(
            f"BertPretrainer.quantize({mode!r}): the masked-LM head shares the word-embedding "
            f"table with the encoder, so the pretrainer cannot be quantized; quantize "
            f"pretrainer.encoder (or a task model on it) for inference instead")

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "trainable": self.trainable,
                "encoder": keras.saving.serialize_keras_object(self.encoder)}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "BertPretrainer":
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
