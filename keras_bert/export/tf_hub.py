"""TF Hub's split of a BERT, as Google's published pairs: an encoder SavedModel that takes packed
ids and holds core TensorFlow ops only (a user of it needs no tensorflow-text), and a
preprocessing SavedModel that turns raw text into those ids (``tokenize``, ``bert_pack_inputs``
and a default call). ``hub.load(preprocess)`` + ``hub.load(encoder)`` then work as with
https://tfhub.dev/tensorflow/bert_en_uncased_preprocess and its encoders."""

from __future__ import annotations

import logging
import os
import tempfile

import tensorflow as tf

from keras_bert.export import ops, signatures
from keras_bert.export.saved_model import ExportModule
from keras_bert import fileio
from keras_bert.fileio import atomic_output_dir, join
from keras_bert.models.encoder import BertEncoder
from keras_bert.tokenization import vocab as vocab_lib

logger = logging.getLogger(__name__)

ENCODER_DIR, PREPROCESS_DIR = "encoder", "preprocess"


class PreprocessModule(tf.Module):
    """TF Hub's BERT preprocessing object.

    ``__call__(strings)``: string [batch] -> ``input_word_ids``, ``input_mask``,
    ``input_type_ids`` int32 [batch, seq_length]; ``tokenize(strings)``: int32 [batch, (tokens)];
    ``bert_pack_inputs(segments, seq_length)``: a list of one or two tokenized segments (ragged
    [batch, (tokens)] or [batch, (words), (tokens)]) packed as ``[CLS] a [SEP] (b [SEP])``,
    truncated as Google does; ``seq_length`` must be the exported one (a SavedModel keeps only
    traced values). Also ``vocab_file`` (an asset) and ``do_lower_case``.
    """

    def __init__(self, preprocessor, vocab_path: str):
        super().__init__(name="keras_bert_preprocess")
        self.vocab_file = tf.saved_model.Asset(vocab_path)
        self.do_lower_case = tf.Variable(bool(preprocessor.lower_case), trainable=False,
                                         name="do_lower_case")
        text = tf.TensorSpec([None], tf.string)
        self.__call__ = tf.function(preprocessor.__call__, input_signature=[text],
                                    autograph=False)
        self.tokenize = tf.function(preprocessor.tokenize, input_signature=[text],
                                    autograph=False)

        def bert_pack_inputs(segments, seq_length=preprocessor.seq_length):
            if seq_length != preprocessor.seq_length:
                raise ValueError(f"this preprocessing model packs to seq_length="
                                 f"{preprocessor.seq_length}, got {seq_length}")
            flat = [s.merge_dims(1, 2) if s.ragged_rank == 2 else s for s in segments]
            return preprocessor.pack(*flat)

        self.bert_pack_inputs = tf.function(bert_pack_inputs, autograph=False)
        for ragged_rank in (1, 2):
            spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank)
            for count in (1, 2):
                self.bert_pack_inputs.get_concrete_function([spec] * count)
                self.bert_pack_inputs.get_concrete_function([spec] * count,
                                                            preprocessor.seq_length)


def export_tf_hub(encoder: BertEncoder, preprocessor, export_dir: str) -> tuple[str, str]:
    """Writes ``<export_dir>/encoder`` and ``<export_dir>/preprocess`` and returns their paths.

    The encoder SavedModel: ``__call__(inputs, training=False)`` on TF Hub's int32 inputs ->
    ``sequence_output``, ``pooled_output``, ``default`` and ``encoder_outputs`` (a list);
    ``serving_default`` on the same inputs (``encoder_outputs`` stacked [batch, layers, seq,
    hidden]); ``variables``, ``trainable_variables``, ``vocab_file``, ``do_lower_case``. Core
    TensorFlow ops only. The preprocessing SavedModel: see ``PreprocessModule``.

    Raises:
        FileExistsError: ``export_dir`` exists (nothing is written then, and nothing is left
            behind if the export fails).
        TypeError: ``encoder`` is not a BertEncoder.
    """
    if not isinstance(encoder, BertEncoder):
        raise TypeError(f"export_tf_hub exports a BertEncoder, got {type(encoder).__name__}")
    if fileio.exists(export_dir):
        raise FileExistsError(f"{export_dir!r} exists; export the TF Hub pair to a new directory")
    encoder_dir, preprocess_dir = join(export_dir, ENCODER_DIR), join(export_dir, PREPROCESS_DIR)
    with tempfile.TemporaryDirectory(prefix="keras_bert_hub-") as scratch:
        vocab_path = os.path.join(scratch, vocab_lib.VOCAB_FILENAME)
        vocab_lib.save_vocab(list(preprocessor.vocabulary), vocab_path)

        @tf.function(autograph=False, input_signature=[signatures.ids_input_signature()])
        def serving_default(inputs):
            outputs = signatures.encoder_outputs(encoder, preprocessor, inputs, None)
            return {**outputs, "default": outputs["pooled_output"]}

        module = ExportModule(encoder, {"serving_default": serving_default}, vocab_path,
                              preprocessor.lower_case)
        # Both SavedModels appear together or not at all.
        with atomic_output_dir(export_dir) as out:
            encoder_out = os.path.join(out, ENCODER_DIR)
            tf.saved_model.save(module, encoder_out,
                                signatures={"serving_default": serving_default})
            text_ops = sorted(op for op in ops.saved_model_op_types(encoder_out)
                              if not ops.is_core_op(op))
            if text_ops:
                raise ValueError(f"the encoder SavedModel would need non-core ops {text_ops}")
            preprocess_out = os.path.join(out, PREPROCESS_DIR)
            tf.saved_model.save(PreprocessModule(preprocessor, vocab_path), preprocess_out)
            ops.check_ops(preprocess_out)
    logger.info("exported a TF Hub encoder to %s and its preprocessing to %s", encoder_dir,
                preprocess_dir)
    return encoder_dir, preprocess_dir

