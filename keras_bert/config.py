"""BertConfig: the model hyperparameters, read from and written to Google's bert_config.json and
Hugging Face's config.json, plus the named presets (BERT-base/large and Google's 24 small BERTs);
FinetuneSettings, BERT's fine-tuning recipe with the paper's defaults; and distillation's
(DistillationSettings, and ``kept_layers``: the teacher's layers a smaller student starts from).

Activation names follow Google's bert_config.json: ``"gelu"`` is the tanh approximation that
google-research/bert's modeling.py computes. The exact erf form is ``"gelu_exact"``. Hugging Face
spells these ``"gelu_new"`` (tanh) and ``"gelu"`` (erf); the HF readers and writers translate.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from typing import Any

from keras_bert import fileio

# Activations the encoder knows, in Google's naming ("gelu" = tanh approximation).
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear", "silu")

# Hugging Face activation name -> ours. HF's "gelu" is the exact erf form.
_HF_TO_OURS = {
    "gelu": "gelu_exact",
    "gelu_python": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
    "silu": "silu",
    "swish": "silu",
}
_OURS_TO_HF = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu", "tanh": "tanh",
               "linear": "linear", "silu": "silu"}

# The fields of Google's bert_config.json, in Google's order.
GOOGLE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
)

DEFAULT_LAYER_NORM_EPS = 1e-12
# A BertClassifier's text vector: BERT's pooler on [CLS], the raw [CLS] vector, the masked mean
# (pure Python here, so that `keras-bert finetune --help` lists them without TensorFlow).
CLASSIFIER_POOLINGS = ("pooled", "cls", "mean")
# What an export's serving_default takes: raw text, or the ids of transformers' TF classes.
SERVING_DEFAULTS = ("text", "transformers")
# How many of its training texts a task model keeps (``BertTask.calibration_texts``: fit,
# ``keras-bert finetune``, ``distill``) for int8 calibration without asking for texts; the
# few hundred that calibration needs (``models.int8_calibration``).
CALIBRATION_SAMPLE_TEXTS = 300
# What an export writes: a TF Serving SavedModel, or OpenVINO IR (the ``openvino`` extra).
EXPORT_FORMATS = ("saved_model", "openvino")
# How a BertClassifier combines the windows of a text longer than its seq_length: "mean" (the
# mean of the windows' logits, the default) or "first" (the first window alone: the text cut at
# seq_length, as BERT always read it, at the cost of one window).
WINDOW_COMBINATIONS = ("mean", "first")
# The most windows one text may be read as in a raw-text export that windows long texts
# (``export_model``'s and ``keras-bert export``'s ``max_windows`` unless given; 0 lifts the
# limit): a request with a longer text fails with INVALID_ARGUMENT naming it. 512 windows at
# seq_length 128 (stride 63) are some 32,000 WordPieces, 25,000 words of English, which
# all-MiniLM-L6-v2 reads in about 16 CPU-seconds; unlimited, one text of 10^6 words would hold
# a server for some 10 CPU-minutes, BERT-base for over an hour (benchmarks/README.md, "Long
# texts").
DEFAULT_MAX_WINDOWS = 512


def default_window_stride(window_length: int) -> int:
    """The WordPieces from one window's start to the next when the caller gives no stride:
    half the window, so that every piece but those of the first and last half-windows is read
    in two windows, one of which sees at least a quarter of the window on each side of it (the
    context SQuAD's doc_stride of 128 in 384 gives), for about twice the cost of cutting.

    >>> default_window_stride(126)
    63
    """
    return max(window_length // 2, 1)


def check_window_stride(stride: int | None, window_length: int | None,
                        what: str = "window_stride") -> None:
    """ValueError naming ``what`` unless ``stride`` is None (the default) or 1 to
    ``window_length - 1`` WordPieces (``window_length`` None: not known yet, only >= 1)."""
    if stride is None:
        return
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"{what} must be a whole number of WordPieces, at least 1, got "
                         f"{stride!r}")
    if window_length is not None and stride >= window_length:
        raise ValueError(f"{what}={stride} is not less than the window of {window_length} "
                         f"WordPieces (seq_length minus [CLS] and [SEP]): windows would not "
                         f"overlap, or would skip text; use 1 to {window_length - 1}")


@dataclasses.dataclass
class BertConfig:
    """The hyperparameters of a BERT encoder, as in Google's bert_config.json.

    Args:
        vocab_size: number of WordPiece tokens.
        hidden_size: width H of every layer.
        num_hidden_layers: number L of transformer blocks.
        num_attention_heads: number A of attention heads; must divide hidden_size.
        intermediate_size: width of the feed-forward layer (4H in the paper).
        hidden_act: feed-forward activation, one of ACTIVATIONS. ``"gelu"`` is Google's tanh
            approximation, ``"gelu_exact"`` the erf form.
        hidden_dropout_prob: dropout after embeddings, attention output and feed-forward.
        attention_probs_dropout_prob: dropout on the attention probabilities.
        max_position_embeddings: longest sequence the position table covers.
        type_vocab_size: number of segment ids (2 for sentence pairs).
        initializer_range: stddev of the truncated-normal initializer.
        layer_norm_eps: LayerNorm epsilon (1e-12 in BERT).

    Example:
    >>> config = BertConfig.preset("L-2_H-128_A-2")
    >>> (config.num_hidden_layers, config.hidden_size, config.num_attention_heads)
    (2, 128, 2)
    >>> config.intermediate_size
    512
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = DEFAULT_LAYER_NORM_EPS

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ validation
    def validate(self, source: str = "BertConfig") -> None:
        """Raises ValueError naming the field and the source when a value is unusable."""
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{source}: {name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"{source}: hidden_size={self.hidden_size} is not divisible by "
                f"num_attention_heads={self.num_attention_heads}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"{source}: {name} must be in [0, 1), got {value!r}")
        for name in ("initializer_range", "layer_norm_eps"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{source}: {name} must be a positive number, got {value!r}")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"{source}: unknown hidden_act {self.hidden_act!r}; expected one of "
                f"{', '.join(ACTIVATIONS)} (Google's 'gelu' is the tanh approximation, "
                f"'gelu_exact' the erf form)")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    # ------------------------------------------------------------------ dicts
    def to_dict(self) -> dict[str, Any]:
        """All fields, our naming; the inverse of ``BertConfig(**d)``."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "config") -> "BertConfig":
        """Builds a config from Google-style keys; unknown keys are ignored, as Google's are."""
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in values.items() if k in fields}
        config = cls.__new__(cls)
        for f in dataclasses.fields(cls):
            setattr(config, f.name, kwargs.get(f.name, f.default))
        config.validate(source)
        return config

    # ------------------------------------------------------------------ Google bert_config.json
    def to_google_dict(self) -> dict[str, Any]:
        """The bert_config.json dict. Non-default LayerNorm epsilon is kept as an extra field."""
        values = {name: getattr(self, name) for name in GOOGLE_FIELDS}
        if self.layer_norm_eps != DEFAULT_LAYER_NORM_EPS:
            values["layer_norm_eps"] = self.layer_norm_eps
        return values

    @classmethod
    def from_json_file(cls, path: fileio.PathLike) -> "BertConfig":
        """Reads Google's bert_config.json (local or gs://)."""
        return cls.from_dict(_read_json(path), source=os.fspath(path))

    def to_json_string(self) -> str:
        return json.dumps(self.to_google_dict(), indent=2, sort_keys=False) + "\n"

    def to_json_file(self, path: fileio.PathLike) -> None:
        """Writes Google's bert_config.json."""
        with fileio.open_file(path, "w") as f:
            f.write(self.to_json_string())

    # ------------------------------------------------------------------ Hugging Face config.json
    @classmethod
    def from_hf_dict(cls, values: dict[str, Any], source: str = "config.json") -> "BertConfig":
        """Translates a Hugging Face BertConfig dict (activation names, layer_norm_eps)."""
        model_type = values.get("model_type", "bert")
        if model_type != "bert":
            held = ", ".join(values.get("architectures") or []) or f"a {model_type} model"
            raise ValueError(f"{source}: model_type is {model_type!r} ({held}), not 'bert'; "
                             f"keras-bert reads BERT checkpoints only: give a folder whose "
                             f"config.json says model_type 'bert'")
        position_type = values.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise ValueError(f"{source}: position_embedding_type={position_type!r} is not BERT's "
                             "absolute positions; it cannot be loaded")
        hf_act = values.get("hidden_act", "gelu")
        if hf_act not in _HF_TO_OURS:
            raise ValueError(f"{source}: unknown hidden_act {hf_act!r}; expected one of "
                             f"{', '.join(sorted(_HF_TO_OURS))}")
        ours = {k: v for k, v in values.items() if k in GOOGLE_FIELDS}
        ours["hidden_act"] = _HF_TO_OURS[hf_act]
        ours["layer_norm_eps"] = values.get("layer_norm_eps", DEFAULT_LAYER_NORM_EPS)
        return cls.from_dict(ours, source=source)

    @classmethod
    def from_hf_json_file(cls, path: fileio.PathLike) -> "BertConfig":
        return cls.from_hf_dict(_read_json(path), source=os.fspath(path))

    def to_hf_dict(self, architectures: tuple[str, ...] = ("BertModel",)) -> dict[str, Any]:
        """A config.json that transformers.BertConfig reads."""
        values = {name: getattr(self, name) for name in GOOGLE_FIELDS}
        values["hidden_act"] = _OURS_TO_HF[self.hidden_act]
        values.update({
            "architectures": list(architectures),
            "model_type": "bert",
            "layer_norm_eps": self.layer_norm_eps,
            "pad_token_id": 0,
            "position_embedding_type": "absolute",
        })
        return values

    def to_hf_json_file(self, path: fileio.PathLike,
                        architectures: tuple[str, ...] = ("BertModel",)) -> None:
        with fileio.open_file(path, "w") as f:
            f.write(json.dumps(self.to_hf_dict(architectures), indent=2) + "\n")

    # ------------------------------------------------------------------ presets
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "BertConfig":
        """A named architecture: see ``BertConfig.presets()``."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}")
        values = dict(PRESETS[name])
        values.update(overrides)
        return cls(**values)

    @staticmethod
    def presets() -> tuple[str, ...]:
        return tuple(PRESETS)


def _read_json(path: fileio.PathLike) -> dict[str, Any]:
    path = os.fspath(path)
    if not fileio.exists(path):
        raise FileNotFoundError(f"config file {path!r} does not exist")
    with fileio.open_file(path, "r") as f:
        text = f.read()
    try:
        values = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"config file {path!r} is not valid JSON: {e}") from None
    if not isinstance(values, dict):
        raise ValueError(f"config file {path!r} must hold a JSON object, got {type(values).__name__}")
    return values


def _architecture(layers: int, hidden: int, vocab_size: int = 30522) -> dict[str, Any]:
    return {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": hidden // 64,
        "intermediate_size": 4 * hidden,
    }


# Cased and uncased differ only in the vocabulary (Google's cased vocab has 28996 entries).
PRESETS: dict[str, dict[str, Any]] = {
    "bert_base_uncased": _architecture(12, 768),
    "bert_base_cased": _architecture(12, 768, vocab_size=28996),
    "bert_large_uncased": _architecture(24, 1024),
    "bert_large_cased": _architecture(24, 1024, vocab_size=28996),
}
# Google's 24 small BERTs (Turc et al., 2019), uncased, under Google's names.
for _layers in (2, 4, 6, 8, 10, 12):
    for _hidden in (128, 256, 512, 768):
        PRESETS[f"L-{_layers}_H-{_hidden}_A-{_hidden // 64}"] = _architecture(_layers, _hidden)
del _layers, _hidden


@dataclasses.dataclass(kw_only=True)
class FinetuneSettings:
    """BERT's fine-tuning recipe: the paper's (section 4, appendix A.3), except the rate.

    Args:
        learning_rate: AdamW's peak rate. The paper searched 5e-5, 3e-5 and 2e-5 on dev for
            BERT-base and -large on GLUE's data; Google's small BERTs (Turc et al., 2019) add
            1e-4 and 3e-4. The default is 1e-4, the rate that made short runs on small data
            learn: MiniLM (hidden 384) on 2,000 rows for 1 epoch predicted the majority class
            for every review at 3e-5 and 5e-5, and learned at 1e-4 (benchmarks/README.md, "The
            default learning rate"). For BERT-large, pass one of the paper's rates: its
            fine-tuning is known to diverge at high rates.
        batch_size: examples per (global) batch (the paper: 16 or 32).
        epochs: passes over the training set (the paper: 2 to 4).
        warmup_fraction: share of the steps with a linear warmup, then linear decay to 0.
        weight_decay: AdamW's decoupled weight decay (not on LayerNorm and biases).
        bucket_lengths: the lengths batches of rows of similar length are padded to:
            ``"auto"`` (at most 8 multiples of 8 chosen from the training rows' lengths), a
            list of lengths, or None (every batch padded to seq_length).

    Example:
    >>> settings = FinetuneSettings(learning_rate=5e-5, bucket_lengths="64,16,32")
    >>> settings.learning_rate, settings.batch_size, settings.epochs, settings.bucket_lengths
    (5e-05, 32, 3, [16, 32, 64])
    """
    learning_rate: float = 1e-4
    batch_size: int = 32
    epochs: int = 3
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    bucket_lengths: Sequence[int] | str | None = "auto"

    def __post_init__(self):
        self.bucket_lengths = normalize_bucket_lengths(self.bucket_lengths)
        if self.batch_size < 1 or self.epochs < 1:
            raise ValueError(f"batch_size and epochs must be at least 1, got {self.batch_size} "
                             f"and {self.epochs}")
        if not 0 <= self.warmup_fraction <= 1:
            raise ValueError(f"warmup_fraction must be in [0, 1], got {self.warmup_fraction}")

    def settings(self) -> FinetuneSettings:
        """Only the recipe's fields (of a subclass such as ``FinetuneRun``, too)."""
        return FinetuneSettings(**{field.name: getattr(self, field.name)
                                   for field in dataclasses.fields(FinetuneSettings)})


@dataclasses.dataclass(kw_only=True)
class DistillationSettings:
    """The defaults of ``keras_bert.distill`` and ``keras-bert distill`` (task-specific
    distillation from a fine-tuned teacher, Hinton et al., 2015).

    Args:
        temperature: T, which softens the teacher's and the student's distributions in the KL
            term (scaled by T^2).
        label_weight: the labels' share of a labelled text's loss, ``(1 - w) * T^2 * KL + w *
            cross-entropy``; texts without labels learn the teacher's outputs alone.
        learning_rate: AdamW's peak rate: the top of BERT's fine-tuning range, since the student
            has fewer layers to move and often more texts. Epochs, batch size, warmup and
            weight decay are the fine-tuning recipe's (``FinetuneSettings``).
        augment: changed copies of each text that the teacher labels (words dropped, n-grams
            kept: ``distillation.augmentation.augmented_texts``); 0, since each copy costs a
            text's training: give it when there are no unlabelled texts.
        few_unlabeled_per_labeled: without copies, fewer unlabelled texts than this many per
            labelled one are few: the student sees little of the teacher beyond the labels, and
            ``distill`` (and `keras-bert distill`) warns and suggests ``suggested_augment``
            copies (their effect: benchmarks/README.md, augmented copies).
        suggested_augment: the copies that warning suggests.

    Example:
    >>> settings = DistillationSettings(temperature=4.0)
    >>> settings.temperature, settings.label_weight, settings.learning_rate, settings.augment
    (4.0, 0.5, 5e-05, 0)
    """
    temperature: float = 2.0
    label_weight: float = 0.5
    learning_rate: float = 5e-5
    augment: int = 0
    few_unlabeled_per_labeled: float = 1.0
    suggested_augment: int = 2

    def few_texts_warning(self, labelled: int, unlabeled: int, augment: int,
                          augment_option: str = "augment={}") -> str | None:
        """The warning for a run without copies whose unlabelled texts are few beside the
        labelled ones (``few_unlabeled_per_labeled``), or None; ``augment_option`` spells the
        suggestion (``"--augment {}"`` on the command line).

        >>> DistillationSettings().few_texts_warning(1000, 10, augment=0)[:44]
        '10 texts without labels beside 1000 labelled'
        """
        if augment or not labelled or unlabeled >= self.few_unlabeled_per_labeled * labelled:
            return None
        return (f"{unlabeled} texts without labels beside {labelled} labelled ones, and no "
                f"augmented copies: the student learns the teacher from few texts of its own; "
                f"{augment_option.format(self.suggested_augment)} adds changed copies the "
                f"teacher labels, which lift the student where unlabelled texts are few "
                f"(benchmarks/README.md, augmented copies)")


def kept_layers(teacher_layers: int, num_layers: int) -> list[int]:
    """The teacher's layers (0-based) a ``num_layers`` student starts from: spread evenly, the
    top one always kept (it feeds the head): 12 -> 4 keeps 2, 5, 8, 11; 6 -> 3 keeps 1, 3, 5;
    6 -> 2 keeps 2, 5. DistilBERT's initialisation takes one layer in two the same way."""
    if isinstance(num_layers, bool) or not isinstance(num_layers, int) or not (
            0 < num_layers < teacher_layers):
        raise ValueError(f"num_layers must be between 1 and {teacher_layers - 1} (the teacher "
                         f"has {teacher_layers} layers), got {num_layers!r}")
    return [round((index + 1) * teacher_layers / num_layers) - 1 for index in range(num_layers)]


def normalize_bucket_lengths(bucket_lengths) -> list[int] | str | None:
    """``bucket_lengths`` as the pipeline takes it: ``"auto"``, None (also from ``"none"``), or
    sorted positive lengths (from a list or a comma-separated string such as ``"16,32,64"``);
    ValueError naming the value otherwise."""
    if bucket_lengths is None or (isinstance(bucket_lengths, str)
                                  and bucket_lengths.strip().lower() == "none"):
        return None
    if isinstance(bucket_lengths, str):
        word = bucket_lengths.strip().lower()
        if word == "auto":
            return "auto"
        bucket_lengths = [part for part in word.split(",") if part.strip()]
    try:
        lengths = sorted(int(length) for length in bucket_lengths)
    except (TypeError, ValueError):
        lengths = []
    if not lengths or lengths[0] <= 0:
        raise ValueError(f"bucket_lengths must be 'auto', None or positive lengths, got "
                         f"{bucket_lengths!r}")
    return lengths
