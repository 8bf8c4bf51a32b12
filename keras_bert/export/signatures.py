"""Serving signatures: what each exportable model type returns, and the signature functions built
from it: ``serve_ids`` (packed int32 ids in), ``serving_default`` (raw text in, through the
preprocessor), and any task-specific extras (TF Serving's ``classify``/``regress``).

With ``serving_default="transformers"``, ``serving_default`` (and ``int64_serving``) are instead
what transformers 4.x's TF classes (``TFBertForSequenceClassification``...) exported:
``input_ids``, ``attention_mask`` and ``token_type_ids`` (int32; int64) in, their outputs
(``logits``...) out, so that a client written for such an export works unchanged; raw text is
then ``serve_text``.

A model type registers a TaskExport; adding a task to the export is adding one of these.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable

import tensorflow as tf

from keras_bert.config import DEFAULT_MAX_WINDOWS, SERVING_DEFAULTS
from keras_bert.models.encoder import BertEncoder
from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.models.task_predict import in_length_chunks
from keras_bert.tokenization.preprocessor import trim_to_longest

logger = logging.getLogger(__name__)

IDS_SIGNATURE = "serve_ids"
TEXT_SIGNATURE = "serving_default"
# The raw-text signature's name when serving_default is transformers' (``SERVING_DEFAULTS``).
TEXT_BESIDE_SIGNATURE = "serve_text"
# transformers' TF classes' inputs, and ours they are.
TRANSFORMERS_INPUTS = {"input_ids": "input_word_ids", "attention_mask": "input_mask",
                       "token_type_ids": "input_type_ids"}


@dataclasses.dataclass(frozen=True)
class RawText:
    """The raw-text inputs of a serving_default call: string [batch] each (``choices``, for
    multiple choice: string [batch, num_choices]); ``features``: a classifier's other inputs,
    {name: [batch]}, passed to the model beside the packed ids."""
    text: tf.Tensor
    text_pair: tf.Tensor | None = None
    choices: tf.Tensor | None = None
    features: dict | None = None


# (model, preprocessor, packed ids {name: int32 [batch, seq]}, raw text or None)
#   -> {output name: tensor [batch, ...]}
OutputsFn = Callable[..., dict]
# (model, preprocessor, text_pair, dynamic_padding, max_windows=) -> {signature name:
# tf.function with an input_signature}
ExtraSignaturesFn = Callable[..., dict]
# (packed ids {name: [rows, seq]}, outputs_fn: packed ids -> {name: [rows, ...]}) -> the
# outputs, [rows, ...] each: how a signature runs the model on rows (``run_rows``)
RunRowsFn = Callable[..., dict]
# (model, preprocessor, raw, run_rows, max_windows) -> {output name: [batch, ...]}, one row per
# text from the rows of its windows; None where the model reads these texts as one window each
WindowOutputsFn = Callable[..., "dict | None"]
# (model, preprocessor) -> (window_stride, outputs: (packed ids {name: int32 [windows, seq]},
# text_index int32 [windows]) -> {output name: [texts, ...]}), or None: one window per text
OpenVinoWindowsFn = Callable[..., "tuple[int | None, Callable[..., dict]] | None"]
# (model, preprocessor) -> (query_length, doc_stride, outputs: (packed ids, text_index,
# window_starts, window_ends, question_lengths, context_lengths, piece_starts, piece_limits)
# -> (outputs but answer_text, answer byte start, limit)): a question answerer's IR
OpenVinoAnswersFn = Callable[..., "tuple[int, int, Callable[..., tuple]]"]
# (model, preprocessor) -> (stride, outputs: (packed ids, text_index, window_starts,
# window_ends, first_word, end_word, word_first, piece_ids, text_begins, text_ends) ->
# {output name: [texts, ...]}): a tagger's IR
OpenVinoWordWindowsFn = Callable[..., "tuple[int, Callable[..., dict]]"]
# (model) -> {input name: tf.TensorSpec}, for packed ids that are not [batch, seq]
IdsSpecFn = Callable[..., dict]
# (model, preprocessor, dynamic_padding) -> the serving_default tf.function, for raw text that
# is not text/pair
TextSignatureFn = Callable[..., object]
# (model) -> {input name: tf.TensorSpec [batch]}, the model's inputs besides the text
FeatureSpecFn = Callable[..., dict]
# (model) -> (packed ids {our name: int32} -> {transformers' output name: tensor}), built
# outside any tf.function
TransformersOutputsFn = Callable[..., Callable[[dict], dict]]


@dataclasses.dataclass(frozen=True)
class TaskExport:
    """How one model type exports.

    Args:
        outputs: builds the named outputs, each [batch, ...], from the packed ids (the
            preprocessor is there for its vocabulary); ``raw`` is the RawText for
            serving_default and None for serve_ids. The OpenVINO IR converts them too
            (``export.openvino``): strings gathered from tables, never selected with
            ``tf.where``, which OpenVINO's CPU plugin does not run.
        text_pair: whether serving_default takes ``text_pair`` unless the caller says.
        extra_signatures: more signatures (e.g. TF Serving's classify), or None.
        ids_spec: the serve_ids inputs when they are not int32 [batch, seq] (None).
        text_signature: builds serving_default when its inputs are not text (and text_pair).
        feature_spec: the model's inputs besides the text (a classifier's features), which
            serving_default and serve_ids take too, by name; None: none.
        transformers_outputs: the outputs transformers' TF class of this head returns, named
            as it names them (``logits``...), for ``serving_default="transformers"``; None: no
            TF class of transformers has this head.
        openvino_windows: for a model that reads a text longer than seq_length as windows,
            what its OpenVINO IR needs to read them as well: ``(window_stride, outputs)``,
            the model's stride (None: its default; the IR's tokenizer cuts the windows as
            ``classification.windows.pack_windows`` does) and ``outputs(ids,
            text_index)``, serving_default's outputs, one row per text, from the packed
            windows of a batch and each one's text, int32 [windows]; None (or returning None):
            the IR reads a text's first window.
        openvino_answers: for a question answerer: what its OpenVINO IR needs to answer
            as serving_default does (``export.openvino_answers``): ``(query_length,
            doc_stride, outputs)``, the question's packed pieces at most, the windows' stride
            and ``outputs``, from a request's packed windows, where they lie and where each
            context piece lies in the request's bytes, serving_default's outputs but
            answer_text and the bytes of each answer.
        openvino_word_windows: for a tagger: what its OpenVINO IR needs to read a long text
            as serving_default does (``export.openvino_tagger``): ``(stride, outputs)``, the
            windows' stride and ``outputs``, from a request's packed windows of whole words,
            where they lie and the request's pieces and words, serving_default's outputs.
        openvino_choices: for a model whose raw text is a text and its choices (multiple
            choice): (model) -> the number of choices; its OpenVINO IR packs each (text,
            choice) pair and adds ``choice_text``, the chosen choice.
        window_outputs: serving_default's outputs for a model that reads a text longer than
            seq_length as windows: the texts split and packed, every window of the batch run
            through ``run_rows``, and the outputs combined into one row per text; None (or
            its returning None): every text is one window, cut at seq_length.
    """
    outputs: OutputsFn
    text_pair: bool = False
    extra_signatures: ExtraSignaturesFn | None = None
    ids_spec: IdsSpecFn | None = None
    text_signature: TextSignatureFn | None = None
    feature_spec: FeatureSpecFn | None = None
    transformers_outputs: TransformersOutputsFn | None = None
    window_outputs: WindowOutputsFn | None = None
    openvino_windows: OpenVinoWindowsFn | None = None
    openvino_answers: OpenVinoAnswersFn | None = None
    openvino_word_windows: OpenVinoWordWindowsFn | None = None
    openvino_choices: Callable[..., int] | None = None


_REGISTRY: list[tuple[type, TaskExport]] = []


def register(model_type: type, task: TaskExport) -> None:
    """Makes ``model_type`` (and its subclasses) exportable as ``task`` says."""
    _REGISTRY.insert(0, (model_type, task))


def task_export(model) -> TaskExport:
    """The TaskExport of ``model``'s type; ValueError for a type nobody registered."""
    for model_type, task in _REGISTRY:
        if isinstance(model, model_type):
            return task
    names = ", ".join(t.__name__ for t, _ in _REGISTRY)
    raise ValueError(f"cannot export a {type(model).__name__}; exportable models are: {names}")


def ids_input_signature() -> dict[str, tf.TensorSpec]:
    """The packed inputs, TF Hub's names: int32 [batch, seq] each."""
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES}


def check_same_shapes(ids: dict[str, tf.Tensor]) -> None:
    """Fails the call (InvalidArgumentError, a client's error in TF Serving) unless the packed
    inputs ``ids`` all have one shape: a shorter input_mask would broadcast and answer wrongly."""
    first, *others = sorted(ids)
    for name in others:
        tf.debugging.assert_equal(
            tf.shape(ids[name]), tf.shape(ids[first]),
            message=f"serve_ids: {name} and {first} must have the same shape")


def text_input_signature(text_pair: bool) -> list[tf.TensorSpec]:
    """``text`` (and ``text_pair``): string [batch]."""
    specs = [tf.TensorSpec([None], tf.string, name="text")]
    if text_pair:
        specs.append(tf.TensorSpec([None], tf.string, name="text_pair"))
    return specs


def pack(preprocessor, raw: RawText, dynamic_padding: bool = True) -> dict[str, tf.Tensor]:
    """The preprocessor's packed ids for raw text (pairs when ``raw.text_pair`` is set): int32
    [batch, length] each, padded to the batch's longest row rounded up to a multiple of 8 (at
    most seq_length), or with ``dynamic_padding=False`` to seq_length (static shapes); plus
    ``raw.features`` as they are, [batch] each."""
    packed = preprocessor(raw.text if raw.text_pair is None else [raw.text, raw.text_pair])
    packed = trim_to_longest(packed) if dynamic_padding else packed
    return {**packed, **(raw.features or {})}


def logits_model(model):
    """``model`` up to its output activation (the layer named "probabilities" of a task model
    that ends in one): a model of the same weights that returns logits; ``model`` itself when
    it has none."""
    import keras

    names = [layer.name for layer in model.layers]
    if "probabilities" not in names:
        return model
    return keras.Model(model.inputs, model.get_layer("probabilities").input)


def transformers_signatures(model) -> dict:
    """serving_default and int64_serving as transformers 4.x's TF classes exported them:
    ``input_ids``, ``attention_mask``, ``token_type_ids``, int32 (int64_serving: int64)
    [batch, seq] each ([batch, choices, seq] for multiple choice, any number of choices), in;
    the class's outputs, float32, out."""
    task = task_export(model)
    if task.transformers_outputs is None:
        raise ValueError(f"no TF class of transformers exports what a {type(model).__name__} "
                         f"does; serving_default='transformers' takes an encoder, a "
                         f"classifier, a tagger, a span or a multiple-choice model")
    outputs = task.transformers_outputs(model)
    ours = task.ids_spec(model) if task.ids_spec is not None else ids_input_signature()

    def signature(dtype: tf.DType):
        specs = {theirs: tf.TensorSpec([None] * ours[name].shape.rank, dtype, name=theirs)
                 for theirs, name in TRANSFORMERS_INPUTS.items()}

        @tf.function(autograph=False, input_signature=[specs])
        def serve(inputs):
            ids = {name: tf.cast(inputs[theirs], tf.int32)
                   for theirs, name in TRANSFORMERS_INPUTS.items()}
            check_same_shapes(ids)
            return {name: tf.cast(value, tf.float32) for name, value in outputs(ids).items()}

        return serve

    return {TEXT_SIGNATURE: signature(tf.int32), "int64_serving": signature(tf.int64)}


def run_rows_of(dynamic_padding: bool, fill: dict | None = None) -> RunRowsFn:
    """How a raw-text signature runs the model on packed rows: sorted by length in chunks,
    each padded to its longest row (``in_length_chunks``), or with ``dynamic_padding=False``
    all at once at seq_length."""
    def run_rows(packed: dict, outputs_fn) -> dict:
        if not dynamic_padding:
            return outputs_fn(packed)
        return in_length_chunks(outputs_fn, trim_to_longest(packed), fill=fill)
    return run_rows


def resolve_max_windows(model, max_windows: int | None) -> int | None:
    """The most windows one text of ``model``'s raw-text signatures may be read as, None for no
    limit: ``max_windows`` for a model that reads long texts as windows (None: the default,
    ``config.DEFAULT_MAX_WINDOWS``; 0: no limit), None for one that reads every text as one
    window. ValueError for a value that is not a whole number >= 0, or a limit for a model
    that does not window."""
    if max_windows is not None and (isinstance(max_windows, bool)
                                    or not isinstance(max_windows, int) or max_windows < 0):
        raise ValueError(f"max_windows must be a whole number of windows, at least 1, or 0 for "
                         f"no limit, got {max_windows!r}")
    if task_export(model).window_outputs is None or getattr(
            model, "window_combination", None) == "first":
        if max_windows:
            raise ValueError(f"max_windows limits the windows of a long text, and this "
                             f"{type(model).__name__} reads every text as one window")
        return None
    if max_windows is None:
        return DEFAULT_MAX_WINDOWS
    return max_windows or None


def build_signatures(model, preprocessor, text_pair: bool | None = None,
                     dynamic_padding: bool = True, serving_default: str = "text",
                     max_windows: int | None = None) -> dict:
    """{signature name: tf.function} for ``model``: serve_ids, serving_default and extras.

    Args:
        model: a registered model (BertEncoder or a task model).
        preprocessor: a BertPreprocessor; its seq_length is the longest packed raw text.
        text_pair: whether serving_default takes text pairs (None: the task's default).
        dynamic_padding: raw text is padded to each batch's longest row (True) or always to
            seq_length (False: static shapes, e.g. for XLA).
        serving_default: "text" (raw text in) or "transformers" (transformers' TF classes'
            ids in and outputs out; the raw-text signature is then ``serve_text``).
        max_windows: the most windows a text may be read as (a model that windows long
            texts: a classifier, a tagger, a question answerer's contexts); a request with a
            longer text fails with INVALID_ARGUMENT naming the limit. None: the default,
            ``config.DEFAULT_MAX_WINDOWS``; 0: no limit (``resolve_max_windows``).
    """
    if serving_default not in SERVING_DEFAULTS:
        raise ValueError(f"serving_default must be one of {', '.join(SERVING_DEFAULTS)}, got "
                         f"{serving_default!r}")
    default_style = serving_default  # the name is the raw-text function's below
    task = task_export(model)
    max_windows = resolve_max_windows(model, max_windows)
    if max_windows is not None:
        logger.info("%s reads a text as at most %d windows (max_windows); a longer one is "
                    "refused", type(model).__name__, max_windows)
    text_pair = task.text_pair if text_pair is None else text_pair
    features = task.feature_spec(model) if task.feature_spec is not None else {}

    ids_spec = task.ids_spec(model) if task.ids_spec is not None else ids_input_signature()
    ids_spec = {**ids_spec, **features}

    @tf.function(autograph=False, input_signature=[ids_spec])
    def serve_ids(inputs):
        check_same_shapes({name: inputs[name] for name in INPUT_NAMES})
        return task.outputs(model, preprocessor, inputs, None)

    run_rows = run_rows_of(dynamic_padding, getattr(model, "sequence_padding", None))

    def text_outputs(raw: RawText) -> dict:
        if task.window_outputs is not None:
            outputs = task.window_outputs(model, preprocessor, raw, run_rows, max_windows)
            if outputs is not None:
                return outputs
        packed = pack(preprocessor, raw, dynamic_padding)
        if not dynamic_padding:
            return task.outputs(model, preprocessor, packed, raw)
        return in_length_chunks(lambda ids: task.outputs(model, preprocessor, ids, raw), packed,
                                fill=getattr(model, "sequence_padding", None))

    if task.text_signature is not None:
        serving_default = task.text_signature(model, preprocessor, dynamic_padding)
    elif features:
        specs = {spec.name: spec for spec in text_input_signature(text_pair)}

        @tf.function(autograph=False, input_signature=[{**specs, **features}])
        def serving_default(inputs):
            raw = RawText(inputs["text"], inputs.get("text_pair"),
                          features={name: inputs[name] for name in features})
            return text_outputs(raw)
    elif text_pair:
        @tf.function(autograph=False, input_signature=text_input_signature(True))
        def serving_default(text, text_pair):
            raw = RawText(text, text_pair)
            return text_outputs(raw)
    else:
        @tf.function(autograph=False, input_signature=text_input_signature(False))
        def serving_default(text):
            raw = RawText(text)
            return text_outputs(raw)

    signatures = {TEXT_SIGNATURE: serving_default, IDS_SIGNATURE: serve_ids}
    if default_style == "transformers":  # serving_default is transformers'; text beside it
        if features:
            raise ValueError(f"serving_default='transformers' takes ids alone, and this "
                             f"{type(model).__name__} also reads the features "
                             f"{', '.join(features)}")
        signatures = {**transformers_signatures(model), TEXT_BESIDE_SIGNATURE: serving_default,
                      IDS_SIGNATURE: serve_ids}
    if task.extra_signatures is not None:
        signatures.update(task.extra_signatures(model, preprocessor, text_pair, dynamic_padding,
                                                max_windows=max_windows))
    return signatures


def parse_text_examples(serialized: tf.Tensor, text_pair: bool,
                        other_features: dict[str, tf.io.FixedLenFeature] | None = None
                        ) -> RawText:
    """RawText from serialized tf.Examples with bytes features "text" (and "text_pair"), and
    ``other_features`` (a classifier's, by name) as its ``features``."""
    features = {"text": tf.io.FixedLenFeature([], tf.string), **(other_features or {})}
    if text_pair:
        features["text_pair"] = tf.io.FixedLenFeature([], tf.string)
    parsed = tf.io.parse_example(serialized, features)
    return RawText(parsed["text"], parsed.get("text_pair"),
                   features={name: parsed[name] for name in other_features or {}} or None)


# ------------------------------------------------------------------------------ the encoder
def encoder_outputs(model: BertEncoder, preprocessor, inputs: dict,
                    raw: RawText | None) -> dict:
    """TF Hub's outputs, float32. serve_ids: sequence_output [batch, seq, hidden], pooled_output
    [batch, hidden] and encoder_outputs [batch, layers, seq, hidden] (the per-layer list stacked
    batch-first, so batching and the row format work). serving_default leaves out the layers
    (L times the size) and adds input_mask [batch, seq], telling which positions are text (seq
    is the batch's longest text, see ``pack``)."""
    outputs = model(inputs, training=False)
    result = {"sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
              "pooled_output": tf.cast(outputs["pooled_output"], tf.float32)}
    if raw is None:
        result["encoder_outputs"] = tf.cast(tf.stack(outputs["encoder_outputs"], axis=1),
                                            tf.float32)
    else:
        result["input_mask"] = inputs["input_mask"]
    return result


def encoder_transformers_outputs(model: BertEncoder):
    """TFBertModel's: last_hidden_state [batch, seq, hidden], pooler_output [batch, hidden]."""
    def outputs(ids: dict) -> dict:
        result = model(ids, training=False)
        return {"last_hidden_state": result["sequence_output"],
                "pooler_output": result["pooled_output"]}
    return outputs


register(BertEncoder, TaskExport(outputs=encoder_outputs,
                                 transformers_outputs=encoder_transformers_outputs))
