"""The one table of variable names: our Keras weights <-> Google TF1 names <-> Hugging Face keys,
for the encoder, the pretraining heads and each task head.

Google's names come from google-research/bert (modeling.py, run_pretraining.py, and the heads of
run_classifier.py and run_squad.py); Hugging Face's from transformers' BertModel and its
BertFor* task classes. HF stores nn.Linear weights as [out, in], so dense kernels are transposed
on the way through; embedding tables and Google's cls/seq_relationship/output_weights
([2, hidden]) are not. Google's fine-tuned heads (``output_weights`` [num_labels, hidden],
``cls/squad/output_weights`` [2, hidden]) are stored [out, in] too, so a Keras Dense kernel
([in, out]) is transposed for both formats.

Task heads by the ``Head.task`` that names them (``checkpoints.stored_head``): the classifier of
BertForSequenceClassification, BertForTokenClassification and BertForMultipleChoice is
``classifier.*`` (run_classifier.py: ``output_weights``/``output_bias``; Google has no tagging or
multiple-choice script, so those two have no Google names), the span head of
BertForQuestionAnswering is ``qa_outputs.*`` (run_squad.py: ``cls/squad/...``).
"""

from __future__ import annotations

import dataclasses
import re

import keras

# Checkpoint entries that are not model weights and are skipped on load.
_IGNORED_GOOGLE = re.compile(
    r"(^|/)(global_step|good_steps|bad_steps|loss_scale|current_loss_scale)$|/adam_[mv]$|"
    r"^_CHECKPOINTABLE_OBJECT_GRAPH$|/(LAMB|lamb)_[mv]$")
_IGNORED_HF = re.compile(r"(^|\.)position_ids$|^cls\.predictions\.decoder\.(weight|bias)$")


@dataclasses.dataclass(frozen=True)
class WeightName:
    """One model weight: its Google TF1 name, its HF key, and whether HF stores it transposed."""

    google: str | None  # None: Google's format has no name for it
    hf: str
    variable: keras.Variable
    hf_transposed: bool = False
    google_transposed: bool = False


def _dense(google: str, hf: str, dense: keras.layers.Dense) -> list[WeightName]:
    return [WeightName(f"{google}/kernel", f"{hf}.weight", dense.kernel, hf_transposed=True),
            WeightName(f"{google}/bias", f"{hf}.bias", dense.bias)]


# StoredHead.task -> (Google's kernel and bias names or None, HF's key prefix).
TASK_HEAD_NAMES = {
    "classification": (("output_weights", "output_bias"), "classifier"),
    "token_classification": (None, "classifier"),
    "multiple_choice": (None, "classifier"),
    "question_answering": (("cls/squad/output_weights", "cls/squad/output_bias"), "qa_outputs"),
}
# Heads that never read the pooler: transformers saves these models without it
# (add_pooling_layer=False), and a checkpoint of one has no pooler for us to load.
POOLERLESS_TASKS = ("token_classification", "question_answering", "masked_lm")


def task_head_weight_names(task: str, dense: keras.layers.Dense) -> list[WeightName]:
    """The kernel and bias of a task head's Dense layer (kernel [hidden, n]) under each
    format's name (see TASK_HEAD_NAMES)."""
    google, hf = TASK_HEAD_NAMES[task]
    kernel, bias = google or (None, None)
    return [WeightName(kernel, f"{hf}.weight", dense.kernel, hf_transposed=True,
                       google_transposed=True),
            WeightName(bias, f"{hf}.bias", dense.bias)]


def _layer_norm(google: str, hf: str, norm: keras.layers.LayerNormalization) -> list[WeightName]:
    return [WeightName(f"{google}/gamma", f"{hf}.weight", norm.gamma),
            WeightName(f"{google}/beta", f"{hf}.bias", norm.beta)]


def encoder_of(model):
    """The BertEncoder of a keras-bert model: the model itself (a BertEncoder, which holds its
    ``bert_config``), or the ``encoder`` of a task model or pretrainer; None for a model
    without one. Duck-typed, so that this package imports no model."""
    encoder = model if hasattr(model, "bert_config") else getattr(model, "encoder", None)
    return encoder if hasattr(encoder, "bert_config") else None


def encoder_weight_names(encoder) -> list[WeightName]:
    """Every weight of a BertEncoder with its Google and HF (un-prefixed) names."""
    emb = encoder.embeddings
    names = [
        WeightName("bert/embeddings/word_embeddings", "embeddings.word_embeddings.weight",
                   emb.word_embeddings.embeddings),
        WeightName("bert/embeddings/token_type_embeddings",
                   "embeddings.token_type_embeddings.weight", emb.token_type_embeddings.embeddings),
        WeightName("bert/embeddings/position_embeddings", "embeddings.position_embeddings.weight",
                   emb.position_embeddings),
        *_layer_norm("bert/embeddings/LayerNorm", "embeddings.LayerNorm", emb.layer_norm),
    ]
    for i, block in enumerate(encoder.transformer_layers):
        g, h = f"bert/encoder/layer_{i}", f"encoder.layer.{i}"
        names += [
            *_dense(f"{g}/attention/self/query", f"{h}.attention.self.query", block.attention.query),
            *_dense(f"{g}/attention/self/key", f"{h}.attention.self.key", block.attention.key),
            *_dense(f"{g}/attention/self/value", f"{h}.attention.self.value", block.attention.value),
            *_dense(f"{g}/attention/output/dense", f"{h}.attention.output.dense",
                    block.attention_output),
            *_layer_norm(f"{g}/attention/output/LayerNorm", f"{h}.attention.output.LayerNorm",
                         block.attention_layer_norm),
            *_dense(f"{g}/intermediate/dense", f"{h}.intermediate.dense", block.intermediate),
            *_dense(f"{g}/output/dense", f"{h}.output.dense", block.output_dense),
            *_layer_norm(f"{g}/output/LayerNorm", f"{h}.output.LayerNorm",
                         block.output_layer_norm),
        ]
    names += _dense("bert/pooler/dense", "pooler.dense", encoder.pooler)
    return names


def masked_lm_weight_names(pretrainer) -> list[WeightName]:
    """The masked-LM head weights of a BertPretrainer (HF keys as in BertForPreTraining and
    BertForMaskedLM; the output weights are the word embeddings, tied)."""
    mlm = pretrainer.masked_lm
    return [
        *_dense("cls/predictions/transform/dense", "cls.predictions.transform.dense", mlm.dense),
        *_layer_norm("cls/predictions/transform/LayerNorm", "cls.predictions.transform.LayerNorm",
                     mlm.layer_norm),
        WeightName("cls/predictions/output_bias", "cls.predictions.bias", mlm.output_bias),
    ]


def next_sentence_weight_names(pretrainer) -> list[WeightName]:
    """The next-sentence head weights of a BertPretrainer (HF keys as in BertForPreTraining)."""
    nsp = pretrainer.next_sentence
    return [WeightName("cls/seq_relationship/output_weights", "cls.seq_relationship.weight",
                       nsp.output_weights),
            WeightName("cls/seq_relationship/output_bias", "cls.seq_relationship.bias",
                       nsp.output_bias)]


def pretraining_head_weight_names(pretrainer) -> list[WeightName]:
    """The MLM and NSP head weights of a BertPretrainer (HF keys as in BertForPreTraining)."""
    return masked_lm_weight_names(pretrainer) + next_sentence_weight_names(pretrainer)


def is_pooler(weight: WeightName) -> bool:
    return weight.google.startswith("bert/pooler/")


def is_ignored_google_name(name: str) -> bool:
    """Optimizer slots, step counters and loss-scale state: tolerated, never loaded."""
    return bool(_IGNORED_GOOGLE.search(name))


def is_ignored_hf_key(key: str) -> bool:
    """Buffers (position_ids) and the tied decoder copies: tolerated, never loaded."""
    return bool(_IGNORED_HF.search(key))


def normalize_hf_key(key: str) -> str:
    """Strips the ``bert.`` prefix and maps old LayerNorm gamma/beta names to weight/bias."""
    if key.startswith("bert."):
        key = key[len("bert."):]
    if "LayerNorm." in key:
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
            "LayerNorm.beta", "LayerNorm.bias")
    return key
