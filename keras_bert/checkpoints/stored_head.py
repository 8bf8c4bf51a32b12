"""The task head a checkpoint holds, whatever its format: which task, its size, its label names
and what was read to tell, so that a task model takes it (``from_pretrained``) and a save
writes it under each format's names (``names.TASK_HEAD_NAMES``).

Hugging Face folders say it in config.json (``architectures``: BertForSequenceClassification
and its siblings; ``id2label``; ``problem_type``) and in modules.json for sentence-transformers
(the pooling and normalisation of the embedding); Google's fine-tuned checkpoints by their
variable names (run_classifier.py's ``output_weights``, run_squad.py's ``cls/squad/...``); both
by the pretraining heads' ``cls/predictions`` and ``cls/seq_relationship``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import keras

# What a head does (StoredHead.task).
TASKS = ("pretraining", "masked_lm", "classification", "token_classification",
         "question_answering", "multiple_choice", "embedding")
# Hugging Face's model classes and ours, by task (the class transformers' auto classes build).
HF_ARCHITECTURES = {
    "pretraining": "BertForPreTraining",
    "masked_lm": "BertForMaskedLM",
    "classification": "BertForSequenceClassification",
    "token_classification": "BertForTokenClassification",
    "question_answering": "BertForQuestionAnswering",
    "multiple_choice": "BertForMultipleChoice",
}
TASK_OF_HF_ARCHITECTURE = {name: task for task, name in HF_ARCHITECTURES.items()}
# HF's problem_type of a sequence classifier.
PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")
# sentence-transformers' pooling modes we run (BertEmbedder's pooling).
SENTENCE_POOLINGS = ("mean", "cls")


@dataclasses.dataclass
class StoredHead:
    """A task head: the task, its output size and names, and where it was found.

    Attributes:
        task: one of TASKS.
        source: what told us, for messages (e.g. "BertForSequenceClassification in
            config.json", "run_classifier.py's output_weights").
        num_labels: the outputs of a classifier or tagger (1: a regression score).
        label_names: the labels in output order (HF's ``id2label``), when the format says.
        problem_type: a sequence classifier's: single_label_classification,
            multi_label_classification or regression.
        pooling, normalize: a sentence-embedding head's pooling ("mean" or "cls") and whether
            the embedding is L2-normalised.
        layer: when saving, the Dense layer that holds the head's kernel [hidden, n] and bias.
        unportable: when saving, why Hugging Face's and Google's formats cannot hold this head
            (None: they can).
    """
    task: str
    source: str
    num_labels: int | None = None
    label_names: list[str] | None = None
    problem_type: str | None = None
    pooling: str | None = None
    normalize: bool = False
    layer: keras.layers.Dense | None = dataclasses.field(default=None, repr=False)
    unportable: str | None = None

    def describe(self) -> str:
        """One phrase: "a classification head (3 labels: neg, neu, pos) from ..."."""
        size = ""
        if self.num_labels is not None:
            names = f": {', '.join(self.label_names)}" if self.label_names else ""
            size = f" ({self.num_labels} label{'s' if self.num_labels != 1 else ''}{names})"
        if self.task == "embedding":
            size = f" ({self.pooling} pooling{', normalised' if self.normalize else ''})"
        task = self.task.replace('_', ' ')
        article = "an" if task[0] in "aeiou" else "a"
        return f"{article} {task} head{size} from {self.source}"


def label_names_from_id2label(id2label: Mapping[Any, Any], where: str) -> list[str]:
    """HF's ``id2label`` ({"0": "neg", ...}) as a list in id order; ValueError naming ``where``
    when the ids are not 0..n-1."""
    try:
        by_id = {int(key): str(value) for key, value in id2label.items()}
    except (TypeError, ValueError):
        raise ValueError(f"{where}: id2label has a key that is not an integer id: "
                         f"{sorted(id2label)}") from None
    if sorted(by_id) != list(range(len(by_id))):
        raise ValueError(f"{where}: id2label's ids are {sorted(by_id)}, not 0..{len(by_id) - 1}")
    return [by_id[i] for i in range(len(by_id))]


def is_placeholder_labels(names: Sequence[str]) -> bool:
    """Whether label names are transformers' defaults (LABEL_0, LABEL_1, ...), which name no
    label."""
    return all(name == f"LABEL_{i}" for i, name in enumerate(names))


def hf_head(hf_config: Mapping[str, Any], values: Mapping[str, np.ndarray], where: str
            ) -> StoredHead | None:
    """The head of a Hugging Face folder: from config.json's ``architectures`` when it names a
    BERT task class, else from the weights' keys; None for a bare encoder.

    Raises:
        ValueError: the weights disagree with config.json (``id2label``'s size and the
            classifier's rows), an unknown ``problem_type``, or an architecture that is not
            BERT's (each naming ``where`` and the field).
    """
    # transformers' TF classes save their PyTorch twin's name (TFBertModel: BertModel); take
    # their own names too.
    architectures = [a[2:] if isinstance(a, str) and a.startswith("TFBert") else a
                     for a in hf_config.get("architectures") or []]
    known = [a for a in architectures if a in TASK_OF_HF_ARCHITECTURE or a == "BertModel"]
    if architectures and not known:
        raise ValueError(f"{where}: architectures is {architectures}; keras-bert reads BertModel "
                         f"and {', '.join(HF_ARCHITECTURES.values())}")
    keys = {key[len("bert."):] if key.startswith("bert.") else key for key in values}
    if known and known[0] != "BertModel":
        task = TASK_OF_HF_ARCHITECTURE[known[0]]
        source = f"{known[0]} in {where}"
    elif "qa_outputs.weight" in keys:
        task, source = "question_answering", f"the qa_outputs weights in {where}"
    elif "classifier.weight" in keys:
        task, source = "classification", f"the classifier weights in {where}"
    elif "cls.predictions.bias" in keys or "cls.predictions.decoder.bias" in keys:
        task = "pretraining" if "cls.seq_relationship.weight" in keys else "masked_lm"
        source = f"the cls.* weights in {where}"
    else:
        return None
    head = StoredHead(task, source)
    if task in ("classification", "token_classification", "multiple_choice"):
        weight = values.get("classifier.weight")
        if weight is None:
            raise ValueError(f"{where}: architectures says {known[0]}, but the weights have no "
                             f"classifier.weight")
        rows = int(np.shape(weight)[0])
        head.num_labels = rows
        id2label = hf_config.get("id2label")
        if id2label and task != "multiple_choice":
            names = label_names_from_id2label(id2label, where)
            if len(names) != rows:
                raise ValueError(f"{where}: id2label names {len(names)} labels ({names}), but "
                                 f"classifier.weight has {rows} rows; the config does not fit "
                                 f"the weights")
            head.label_names = None if is_placeholder_labels(names) else names
        num_labels = hf_config.get("num_labels")
        if isinstance(num_labels, int) and num_labels != rows and task != "multiple_choice":
            raise ValueError(f"{where}: num_labels is {num_labels}, but classifier.weight has "
                             f"{rows} rows; the config does not fit the weights")
    if task == "classification":
        problem_type = hf_config.get("problem_type")
        if problem_type is None:  # what transformers infers: one output is a regression
            problem_type = "regression" if head.num_labels == 1 else "single_label_classification"
        if problem_type not in PROBLEM_TYPES:
            raise ValueError(f"{where}: unknown problem_type {problem_type!r}; transformers knows "
                             f"{', '.join(PROBLEM_TYPES)}")
        head.problem_type = problem_type
    return head


def sentence_transformers_head(modules: Sequence[Mapping[str, Any]],
                               pooling_config: Mapping[str, Any] | None, where: str
                               ) -> StoredHead | None:
    """The embedding head of a sentence-transformers folder: its Pooling module's mode and
    whether a Normalize module follows (None: no Pooling module).

    Raises:
        ValueError: a pooling mode BertEmbedder does not run (max, weighted mean, several at
            once), or a module after the pooling other than Normalize (a Dense projection).
    """
    types = [str(module.get("type", "")) for module in modules]
    pooling_at = [i for i, name in enumerate(types) if name.endswith("Pooling")]
    if not pooling_at:
        return None
    if pooling_config is None:
        raise ValueError(f"{where}: modules.json lists a Pooling module but its config.json is "
                         f"missing")
    if "pooling_mode" in pooling_config:  # sentence-transformers 6
        modes = [str(pooling_config["pooling_mode"])]
    else:
        modes = [name[len("pooling_mode_"):].removesuffix("_token").removesuffix("_tokens")
                 for name, value in pooling_config.items()
                 if name.startswith("pooling_mode_") and value]
    if len(modes) != 1 or modes[0] not in SENTENCE_POOLINGS:
        raise ValueError(f"{where}: pooling {modes or 'none'} is not one BertEmbedder runs "
                         f"({' or '.join(SENTENCE_POOLINGS)})")
    after = [name.rsplit(".", 1)[-1] for name in types[pooling_at[0] + 1:]]
    unsupported = [name for name in after if name != "Normalize"]
    if unsupported:
        raise ValueError(f"{where}: modules.json has {', '.join(unsupported)} after the "
                         f"pooling; BertEmbedder runs the encoder, pooling and Normalize only")
    return StoredHead("embedding", f"the sentence-transformers modules in {where}",
                      pooling=modes[0], normalize="Normalize" in after)


def google_head(values: Mapping[str, np.ndarray], where: str) -> StoredHead | None:
    """The head of a Google TF1 checkpoint, by its variables (run_classifier.py, run_squad.py,
    run_pretraining.py)."""
    if "output_weights" in values:
        rows = int(_shape(values, "output_weights")[0])
        return StoredHead("classification", f"run_classifier.py's output_weights in {where}",
                          num_labels=rows,
                          problem_type="regression" if rows == 1 else "single_label_classification")
    if "cls/squad/output_weights" in values:
        return StoredHead("question_answering",
                          f"run_squad.py's cls/squad/output_weights in {where}")
    if "cls/predictions/output_bias" in values:
        task = "pretraining" if "cls/seq_relationship/output_weights" in values else "masked_lm"
        return StoredHead(task, f"the cls/predictions weights in {where}")
    return None


def _shape(values: Mapping[str, np.ndarray], name: str) -> tuple[int, ...]:
    shape = getattr(values, "shape", None)
    return tuple(shape(name)) if callable(shape) else tuple(np.shape(values[name]))
