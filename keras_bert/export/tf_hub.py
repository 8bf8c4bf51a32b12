"""TF Hub's split of a BERT, as Google's published pairs: an encoder SavedModel that takes packed
ids and holds core TensorFlow ops only (a user of it needs no tensorflow-text), and a
preprocessing SavedModel that turns raw text into those ids. ``hub.load`` and ``hub.KerasLayer``
then work on them as on https://tfhub.dev/tensorflow/bert_en_uncased_preprocess and its
encoders, without keras_bert: the API of tensorflow.org/hub/common_saved_model_apis/text
(Transformer encoders), including the optional parts Google's exporter
(official/nlp/tools/export_tfhub_lib.py) writes: ``encoder.mlm``,
``tokenize.get_special_tokens_dict`` and ``tokenize_with_offsets``.

An encoder quantized with ``quantize("int8")`` (or exported with ``quantize="int8"``) gives an
int8 TF Hub encoder: its calls without training run on oneDNN's int8 matmul, as the Keras model
and ``export_model``'s int8 exports do (``export/int8.py``), and ``training=True`` runs Keras'
int8 call, so ``hub.KerasLayer(trainable=True)`` fine-tunes what the Keras model would: the
float32 weights (biases, LayerNorm, position and segment tables, pooler), not the int8 ones.
"""

from __future__ import annotations

import logging
import os
import tempfile

import tensorflow as tf

from keras_bert import fileio
from keras_bert.export import int8, ops, signatures
from keras_bert.export.saved_model import ExportModule, resolve_preprocessor
from keras_bert.fileio import atomic_output_dir, join
from keras_bert.layers.int8 import is_int8
from keras_bert.models.encoder import BertEncoder
from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.tokenization import vocab as vocab_lib
from keras_bert.tokenization.packer_layer import pack_segments

logger = logging.getLogger(__name__)

ENCODER_DIR, PREPROCESS_DIR = "encoder", "preprocess"
# TF Hub's names for the special tokens' ids (Model Garden's get_special_tokens_dict).
SPECIAL_TOKEN_NAMES = {"start_of_sequence_id": vocab_lib.CLS, "end_of_segment_id": vocab_lib.SEP,
                       "padding_id": vocab_lib.PAD, "mask_id": vocab_lib.MASK}


def special_tokens_dict(vocabulary: list[str]) -> dict[str, int]:
    """``vocab_size`` and the ids of [CLS], [SEP], [PAD] and [MASK] under TF Hub's names; a
    token the vocabulary lacks is left out, as Google's preprocessing models do."""
    ids = {token: index for index, token in enumerate(vocabulary)}
    found = {name: ids[token] for name, token in SPECIAL_TOKEN_NAMES.items() if token in ids}
    return {"vocab_size": len(vocabulary), **found}


class TokenizeModule(tf.Module):
    """``preprocessor.tokenize``: string [batch] -> int32 [batch, (words), (tokens)], the shape
    Google's BERT preprocessing models give; ``get_special_tokens_dict()`` -> {name: int32
    scalar}: ``vocab_size``, ``start_of_sequence_id``, ``end_of_segment_id``, ``padding_id``,
    ``mask_id``.

    With ``with_offsets``, ``preprocessor.tokenize_with_offsets``: the tokens and each one's
    ``start_offsets`` and ``limit_offsets``, int64 [batch, (words), (tokens)], its byte span in
    the input (see ``BertTokenizerLayer.tokenize_with_offsets``).
    """

    def __init__(self, tokenizer, with_offsets: bool = False):
        super().__init__(name="tokenize_with_offsets" if with_offsets else "tokenize")
        special_ids = special_tokens_dict(tokenizer.vocabulary)

        def tokenize(texts):
            return tokenizer.group_words(tokenizer.tokenize(texts))

        def tokenize_with_offsets(texts):
            ids, starts, limits = tokenizer.tokenize_with_offsets(texts)
            words = tokenizer.group_words(ids)
            return (words, words.with_flat_values(starts.flat_values),
                    words.with_flat_values(limits.flat_values))

        def get_special_tokens_dict():
            return {name: tf.constant(value, tf.int32) for name, value in special_ids.items()}

        self.__call__ = tf.function(tokenize_with_offsets if with_offsets else tokenize,
                                    input_signature=[tf.TensorSpec([None], tf.string)],
                                    autograph=False)
        self.get_special_tokens_dict = tf.function(get_special_tokens_dict, input_signature=[],
                                                   autograph=False)


class PackInputsModule(tf.Module):
    """``preprocessor.bert_pack_inputs(segments, seq_length=...)``: a list of one or two
    tokenized segments, each int32 ragged [batch, (tokens)] or [batch, (words), (tokens)],
    packed as ``[CLS] a [SEP] (b [SEP])`` and truncated as Google does -> ``input_word_ids``,
    ``input_mask``, ``input_type_ids`` int32 [batch, seq_length]. ``seq_length`` is any length
    of at least 2 (3 for a pair), a Python int or an int32 scalar tensor; by default the
    exported one."""

    def __init__(self, packer):
        super().__init__(name="bert_pack_inputs")
        ids = dict(cls_id=packer.cls_id, sep_id=packer.sep_id, pad_id=packer.pad_id)

        def bert_pack_inputs(segments, seq_length=packer.seq_length):
            if not 1 <= len(segments) <= 2:
                raise ValueError(f"bert_pack_inputs packs one or two segments, got "
                                 f"{len(segments)}")
            flat = [s.merge_dims(1, 2) if s.ragged_rank == 2 else s for s in segments]
            return pack_segments(flat[0], flat[1] if len(flat) == 2 else None, seq_length, **ids)

        self.__call__ = tf.function(bert_pack_inputs, autograph=False)
        for ragged_rank in (1, 2):
            spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank)
            for count in (1, 2):
                self.__call__.get_concrete_function([spec] * count, tf.TensorSpec([], tf.int32))


class PreprocessModule(tf.Module):
    """TF Hub's BERT preprocessing object.

    ``__call__(strings)``: string [batch] -> ``input_word_ids``, ``input_mask``,
    ``input_type_ids`` int32 [batch, seq_length] (the exported length);
    ``tokenize`` and ``tokenize_with_offsets`` (see ``TokenizeModule``); ``bert_pack_inputs``
    (see ``PackInputsModule``).
    Also ``vocab_file`` (an asset) and ``do_lower_case``.
    """

    def __init__(self, preprocessor, vocab_path: str):
        super().__init__(name="keras_bert_preprocess")
        self.vocab_file = tf.saved_model.Asset(vocab_path)
        self.do_lower_case = tf.Variable(bool(preprocessor.lower_case), trainable=False,
                                         name="do_lower_case")
        self.__call__ = tf.function(preprocessor.__call__,
                                    input_signature=[tf.TensorSpec([None], tf.string)],
                                    autograph=False)
        self.tokenize = TokenizeModule(preprocessor.tokenizer)
        self.tokenize_with_offsets = TokenizeModule(preprocessor.tokenizer, with_offsets=True)
        self.bert_pack_inputs = PackInputsModule(preprocessor.packer)


class MaskedLMModule(tf.Module):
    """``encoder.mlm``: ``__call__(inputs, training=False)`` on the encoder's three int32
    [batch, seq] inputs plus ``masked_lm_positions`` (int32 [batch, num_predictions]) ->
    the encoder's outputs plus ``mlm_logits`` (float32 [batch, num_predictions, vocab_size]),
    with ``variables`` (the encoder's and the masked-LM head's), ``trainable_variables`` and
    ``regularization_losses``."""

    # Plain attributes instead of tf.Module's properties: TF Hub reads them off the SavedModel.
    variables = None
    trainable_variables = None
    regularization_losses = None

    def __init__(self, pretrainer: BertPretrainer):
        super().__init__(name="mlm")

        def mlm(inputs, training=False):
            outputs = dict(pretrainer.encoder({name: inputs[name] for name in INPUT_NAMES},
                                              training=training))
            outputs["default"] = outputs["pooled_output"]
            outputs["mlm_logits"] = pretrainer.masked_lm(outputs["sequence_output"],
                                                         inputs["masked_lm_positions"])
            return outputs

        spec = {**signatures.ids_input_signature(),
                "masked_lm_positions": tf.TensorSpec([None, None], tf.int32,
                                                     name="masked_lm_positions")}
        self.__call__ = tf.function(mlm, autograph=False)
        concrete = [self.__call__.get_concrete_function(spec, training=training)
                    for training in (False, True)]
        self.variables = _unique(v for function in concrete for v in function.variables)
        self.trainable_variables = _unique(v for function in concrete
                                           for v in function.trainable_variables)
        self.regularization_losses = []


class EncoderModule(ExportModule):
    """TF Hub's encoder object: ``ExportModule``'s (``__call__``, ``serving_default``,
    ``variables``, ``trainable_variables``, ``vocab_file``, ``do_lower_case``) plus
    ``regularization_losses`` (empty: BERT regularizes through the optimizer's weight decay,
    not through loss terms) and, for a BertPretrainer, ``mlm`` (see ``MaskedLMModule``)."""

    regularization_losses = None

    def __init__(self, model: BertEncoder | BertPretrainer, functions: dict, vocab_path: str,
                 lower_case: bool):
        encoder = model.encoder if isinstance(model, BertPretrainer) else model
        super().__init__(encoder, functions, vocab_path, lower_case)
        self.regularization_losses = []
        if isinstance(model, BertPretrainer):
            self.mlm = MaskedLMModule(model)


def export_tf_hub(model, preprocessor, export_dir: str | os.PathLike, *,
                  vocab_file: str | None = None, lower_case: bool | None = None,
                  seq_length: int | None = None,
                  quantize: str | None = None) -> tuple[str, str]:
    """Writes ``<export_dir>/encoder`` and ``<export_dir>/preprocess`` and returns their paths.

    The encoder SavedModel: ``__call__(inputs, training=False)`` on TF Hub's int32 inputs ->
    ``sequence_output``, ``pooled_output``, ``default`` and ``encoder_outputs`` (a list), with
    dropout when ``training=True``; ``serving_default`` on the same inputs (``encoder_outputs``
    stacked [batch, layers, seq, hidden]); ``variables``, ``trainable_variables``,
    ``regularization_losses``, ``vocab_file``, ``do_lower_case``; for a BertPretrainer also
    ``mlm`` (see ``MaskedLMModule``). Core TensorFlow ops only. The preprocessing SavedModel:
    see ``PreprocessModule``.

    Args:
        model: a BertEncoder; a BertPretrainer (its encoder, with ``mlm``); or a task model
            (its encoder: TF Hub's API has no place for a task head).
        preprocessor: the BertPreprocessor, or None for the model's own or one built from
            ``vocab_file`` (casing from ``lower_case`` or the vocabulary's directory).
        export_dir: a directory that does not exist yet (local or ``gs://``).
        seq_length: the preprocessing model's default packed length (default: the
            preprocessor's, else 128).
        quantize: ``"int8"`` exports an int8 encoder (a quantized copy of a float32 one; see
            ``export.int8``), for CPUs whose TensorFlow runs oneDNN's int8 kernel (checked
            first). None (default): float32, unless ``model.quantize("int8")`` has run: such a
            model exports as an int8 encoder either way. Its SavedModel then holds one op
            outside ``tf.raw_ops``, oneDNN's ``_QuantizedMatMul``, which TensorFlow's x86-64
            CPU builds run.

    Raises:
        FileExistsError: ``export_dir`` exists (nothing is written then, and nothing is left
            behind if the export fails).
        TypeError: ``model`` is none of the above.
        ValueError: an int8 BertPretrainer (its masked-LM head reads the word-embedding table,
            which int8 stores as integers), or ``quantize`` is not ``"int8"`` or None.
        Int8KernelMissing: an int8 export on a TensorFlow without oneDNN's int8 kernel.
    """
    export_dir = os.fspath(export_dir)
    exported = model if isinstance(model, (BertEncoder, BertPretrainer)) else getattr(
        model, "encoder", None)
    if not isinstance(exported, (BertEncoder, BertPretrainer)):
        raise TypeError(f"export_tf_hub exports a BertEncoder, a BertPretrainer or a task "
                        f"model's encoder, got {type(model).__name__}")
    if (quantize or is_int8(model)) and isinstance(exported, BertPretrainer):
        raise ValueError(
            "an int8 BertPretrainer cannot be exported with encoder.mlm: its masked-LM head "
            "reads the word-embedding table, which int8 stores as integers. Export "
            "pretrainer.encoder for an int8 TF Hub encoder without mlm, or the float32 "
            "pretrainer for one with mlm.")
    if exported is not model:
        logger.info("exporting the encoder of %s; TF Hub's API has no task head",
                    type(model).__name__)
    preprocessor = resolve_preprocessor(model, preprocessor, vocab_file, lower_case, seq_length)
    model = exported
    if fileio.exists(export_dir):
        raise FileExistsError(f"{export_dir!r} exists; export the TF Hub pair to a new directory")
    model, quantized = int8.export_variant(model, quantize)
    encoder = model.encoder if isinstance(model, BertPretrainer) else model
    encoder_dir, preprocess_dir = join(export_dir, ENCODER_DIR), join(export_dir, PREPROCESS_DIR)
    with tempfile.TemporaryDirectory(prefix="keras_bert_hub-") as scratch:
        vocab_path = os.path.join(scratch, vocab_lib.VOCAB_FILENAME)
        vocab_lib.save_vocab(list(preprocessor.vocabulary), vocab_path)

        @tf.function(autograph=False, input_signature=[signatures.ids_input_signature()])
        def serving_default(inputs):
            outputs = signatures.encoder_outputs(encoder, preprocessor, inputs, None)
            return {**outputs, "default": outputs["pooled_output"]}

        module = EncoderModule(model, {"serving_default": serving_default}, vocab_path,
                               preprocessor.lower_case)
        # Both SavedModels appear together or not at all.
        with atomic_output_dir(export_dir) as out:
            encoder_out = os.path.join(out, ENCODER_DIR)
            tf.saved_model.save(module, encoder_out,
                                signatures={"serving_default": serving_default})
            # Core ops only (no tensorflow-text), and for int8 oneDNN's int8 matmul.
            allowed = ops.ONEDNN_INT8_OPS if quantized else frozenset()
            text_ops = sorted(op for op in ops.saved_model_op_types(encoder_out)
                              if not (ops.is_core_op(op) or op in allowed))
            if text_ops:
                raise ValueError(f"the encoder SavedModel would need non-core ops {text_ops}")
            preprocess_out = os.path.join(out, PREPROCESS_DIR)
            tf.saved_model.save(PreprocessModule(preprocessor, vocab_path), preprocess_out)
            ops.check_ops(preprocess_out)
    logger.info("exported a TF Hub encoder%s%s to %s and its preprocessing to %s",
                " (int8)" if quantized else "",
                " with mlm" if isinstance(model, BertPretrainer) else "", encoder_dir,
                preprocess_dir)
    return encoder_dir, preprocess_dir


def _unique(variables) -> list:
    return list({id(variable): variable for variable in variables}.values())
