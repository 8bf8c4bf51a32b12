"""OpenVINO IR export: ``<export_base>/<model_name>/<version>/model.xml`` + ``model.bin``, OpenVINO
Model Server's repository layout, a model that takes raw text as our SavedModel's
``serving_default`` does (the same input and output names), float32 or int8 (NNCF's
post-training quantization from calibration texts).

The model is the packed-id part of the SavedModel's raw-text signature (the task's serving
outputs from ``input_word_ids``, ``input_mask``, ``input_type_ids``), converted by
``openvino.convert_model`` from a ``tf.function``, with the tokenizer joined in front
(``openvino_tokenizer.tokenizer_model``: built from our vocabulary and casing, no transformers)
by ``openvino_tokenizers.connect_models``. A classifier that reads long texts as windows
reads them so here too (and pairs, as windows of their second text): the tokenizer cuts
each text into the windows ``predict`` reads (``openvino_tokenizer._windows``) and the model
combines each text's windows (``TaskExport.openvino_windows``), one row per text; a text of
more than ``max_windows`` windows fails the request, as in the SavedModel (OpenVINO has no
assertion op: ``openvino_tokenizer.refuse_beyond``). A question answerer reads each context
as windows after its question, and answers with the context's own bytes
(``openvino_answers``), and a tagger a long text as its windows of whole words, each word
tagged from the window where it has the most context (``openvino_tagger``). The model is
traced in the forms OpenVINO fuses (``layers.openvino_form``: LayerNorm as one MVN, no
reshapes to rows).
It runs a request as one batch padded to its longest text, where the SavedModel runs sorted
chunks of 8 rows: the outputs are the same within float error, except at padded positions
of sequence outputs, which no client should read (``input_mask`` says where the text is).

Exported: every task model (the encoder, the classifier with text only, no features, the
tagger, the question answerer, multiple choice, with ``text`` and ``choices`` in, each pair
packed on its own and ``choice_text`` gathered from the request, and the embedder); a task's
string outputs are written with the string ops OpenVINO's CPU plugin runs (a gather from a
table, no ``Select`` among strings).
OpenVINO, openvino-tokenizers and NNCF are the ``openvino`` extra; this module imports them
when it runs, so keras_bert imports without them.
"""

from __future__ import annotations

import ast
import logging
import os
import tempfile

import numpy as np
import tensorflow as tf

from keras_bert import fileio
from keras_bert.errors import SaveError, one_line_reason
from keras_bert.export import signatures
from keras_bert.export.openvino_answers import (ANSWER_BYTES, WINDOW_INPUTS, answers_tokenizer,
                                                with_answer_text)
from keras_bert.export.openvino_extra import IR_FILE, WEIGHTS_FILE
from keras_bert.export.openvino_tagger import WORD_WINDOW_INPUTS, word_windows_tokenizer
from keras_bert.export.openvino_tokenizer import TEXT_INDEX, tokenizer_model
from keras_bert.fileio import atomic_output_dir, is_remote, join
from keras_bert.layers import openvino_form
from keras_bert.layers.int8 import is_int8
from keras_bert.models.int8_calibration import kept_calibration_texts
from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.tokenization.preprocessor import trim_to_longest

logger = logging.getLogger(__name__)

def check_exportable(model, task: signatures.TaskExport, mixed_precision, dynamic_padding,
                     serving_default: str) -> None:
    """Refuses, in one line, what the OpenVINO export does not write."""
    name = type(model).__name__
    if task.feature_spec is not None and task.feature_spec(model):
        raise ValueError(f"this {name} reads features beside the text; an OpenVINO export "
                         f"takes text only: export it as a SavedModel")
    if is_int8(model):
        raise ValueError(f"this {name} is quantized with Keras' int8; export its float32 model "
                         f"with quantize='int8' (OpenVINO's int8 comes from NNCF)")
    if mixed_precision is not None or not dynamic_padding or serving_default != "text":
        raise ValueError("mixed_precision, dynamic_padding=False and serving_default="
                         "'transformers' are SavedModel options; an OpenVINO export is float32 "
                         "or int8 on raw text")


def _packed_function(model, preprocessor, task: signatures.TaskExport):
    """The task's raw-text outputs from packed ids: a tf.function of {input name: int32
    [batch, length]} ([batch, num_choices, length] for multiple choice, whose chosen text the
    IR adds: ``_with_choice_text``)."""
    # What a raw-text call passes the outputs (their shape depends on it); the text itself is
    # the tokenizer's.
    raw = None if task.openvino_choices else signatures.RawText(tf.constant([""]))
    spec = (task.ids_spec(model) if task.ids_spec is not None
            else signatures.ids_input_signature())

    @tf.function(autograph=False, input_signature=[spec])
    def outputs(ids):
        return task.outputs(model, preprocessor, ids, raw)

    return outputs


def _with_choice_text(ov_model):
    """``ov_model`` (raw text in: ``text``, ``choices``) with ``choice_text``, the chosen
    choice of each row (string [batch]), as the SavedModel's multiple-choice serving_default
    gives it: OpenVINO gathers strings."""
    from openvino import opset15 as opset

    choices = next(p for p in ov_model.get_parameters() if p.get_friendly_name() == "choices")
    choice_ids = next(result.input_value(0) for result in ov_model.get_results()
                      if result.output(0).get_any_name() == "choice_ids")
    chosen = opset.gather(choices, choice_ids, np.int32(1), 1)
    result = opset.result(chosen)
    result.output(0).set_names({"choice_text"})
    ov_model.add_results([result])
    return ov_model


def _window_function(outputs_fn):
    """``outputs_fn(ids, text_index)`` (a task's ``openvino_windows``) as a tf.function of
    {input name: int32 [windows, length]} and ``text_index`` int32 [windows]."""
    @tf.function(autograph=False, input_signature=[
        signatures.ids_input_signature(), tf.TensorSpec([None], tf.int32, name=TEXT_INDEX)])
    def outputs(ids, text_index):
        return outputs_fn(ids, text_index)

    return outputs


def _repair_string_constants(ov_model) -> None:
    """Writes back the string constants that ``convert_model`` stores as Python's repr of
    their bytes ("b'label'": OpenVINO 2026.4's TensorFlow front end), decoded."""
    import openvino as ov

    for node in ov_model.get_ops():
        if node.get_type_name() != "Constant" or node.get_output_element_type(0) != ov.Type.string:
            continue
        values = node.get_value_strings()
        if not values or not all(v.startswith(("b'", 'b"')) for v in values):
            continue
        decoded = [ast.literal_eval(v).decode("utf-8") for v in values]
        shape = list(node.get_output_shape(0))
        fixed = ov.op.Constant(ov.Tensor(np.array(decoded, dtype=np.str_).reshape(shape)))
        fixed.output(0).set_names(node.output(0).get_names())
        node.output(0).replace(fixed.output(0))


def _calibration_rows(preprocessor, texts, text_pair: bool, windows: bool,
                      choices: int | None = None):
    """NNCF's calibration inputs: one packed row per text, at its own length (with
    ``windows``, its first window, the text's only one; with ``choices``, the row as each of
    an example's choices)."""
    rows = []
    for text in texts:
        pieces = [tf.constant([text]), tf.constant([""])] if text_pair else tf.constant([text])
        packed = trim_to_longest(preprocessor(pieces))
        row = {f"{name}:0": packed[name].numpy() for name in INPUT_NAMES}
        if choices is not None:  # [1, length] -> [1, choices, length]
            row = {name: np.repeat(value[:, None], choices, axis=1)
                   for name, value in row.items()}
        if windows:
            row[f"{TEXT_INDEX}:0"] = np.zeros([1], np.int32)
        rows.append(row)
    return rows


def reads_windows(model, preprocessor):
    """The task's ``openvino_windows`` for ``model`` when its IR reads long texts (and pairs)
    as windows, else None (each text's first window)."""
    task = signatures.task_export(model)
    if task.openvino_windows is None:
        return None
    return task.openvino_windows(model, preprocessor)


def openvino_model(model, preprocessor, text_pair: bool | None = None,
                   quantize: str | None = None, calibration_texts=None,
                   max_windows: int | None = None):
    """The OpenVINO model of ``model``'s raw-text serving_default (see the module docstring).

    Args:
        model: an exportable model (``signatures.task_export``) that takes text.
        preprocessor: its BertPreprocessor (vocabulary, casing, seq_length).
        text_pair: whether it takes ``text_pair`` (None: the task's default).
        quantize: "int8": NNCF's post-training quantization (``ModelType.TRANSFORMER``) from
            ``calibration_texts``; None: float32.
        calibration_texts: sample texts (a few hundred, like the ones to be served), for int8;
            None: the sample of its training texts the model keeps (``calibration_texts``).
        max_windows: for a model whose IR reads long texts as windows, the most windows one
            text may be (``export_model``'s; None: the default, 0: no limit): a request with
            a longer text fails, naming the limit. Elsewhere None or 0.

    Returns:
        an ``openvino.Model``: ``text`` (and ``text_pair``) string [batch] -> the outputs of
        the SavedModel's serving_default, by name.
    """
    task = signatures.task_export(model)
    text_pair = task.text_pair if text_pair is None else text_pair
    if quantize not in (None, "int8"):
        raise ValueError(f"quantize must be None or 'int8', got {quantize!r}")
    if quantize and not calibration_texts:
        calibration_texts = kept_calibration_texts(model)  # its training texts'
    if quantize and not calibration_texts:
        raise ValueError("an int8 OpenVINO export needs calibration_texts (NNCF measures "
                         "activation ranges on them): a few hundred texts like those served")
    if task.openvino_answers is not None:
        limit = signatures.resolve_max_windows(model, max_windows)
        query_length, doc_stride, outputs_fn = task.openvino_answers(model, preprocessor)

        def answers(ids, **windows):
            outputs, start, end = outputs_fn(ids, **windows)
            return {**outputs, **dict(zip(ANSWER_BYTES, (start, end)))}

        joined = with_answer_text(_read_model(
            answers_tokenizer(list(preprocessor.vocabulary), preprocessor.lower_case,
                              preprocessor.seq_length, query_length, doc_stride, limit),
            answers, WINDOW_INPUTS, quantize, calibration_texts, limit))
    elif task.openvino_word_windows is not None and not text_pair:
        limit = signatures.resolve_max_windows(model, max_windows)
        stride, outputs_fn = task.openvino_word_windows(model, preprocessor)
        joined = _read_model(
            word_windows_tokenizer(list(preprocessor.vocabulary), preprocessor.lower_case,
                                   preprocessor.seq_length, stride, limit),
            outputs_fn, WORD_WINDOW_INPUTS, quantize, calibration_texts, limit)
    else:
        joined = _text_model(model, preprocessor, task, text_pair, quantize, calibration_texts,
                             max_windows)
    joined.set_rt_info(type(model).__name__, ["keras_bert", "model"])
    joined.set_rt_info("int8" if quantize else "float32", ["keras_bert", "precision"])
    return joined


def _converted(function, quantize: str | None, calibration):
    """``function`` as an OpenVINO model, in the forms OpenVINO fuses; with ``quantize``,
    int8 by NNCF from ``calibration()``'s list of its inputs ({input name: value})."""
    import openvino as ov

    with openvino_form.openvino_form():  # the graph patterns OpenVINO fuses
        packed = ov.convert_model(function)
    _repair_string_constants(packed)
    if quantize:
        import nncf

        calibration = calibration()
        packed = nncf.quantize(packed, nncf.Dataset(calibration),
                               model_type=nncf.ModelType.TRANSFORMER,
                               subset_size=len(calibration))
    return packed


def _text_model(model, preprocessor, task: signatures.TaskExport, text_pair: bool,
                quantize: str | None, calibration_texts, max_windows: int | None):
    """``openvino_model`` of a model whose tokenizer is ``tokenizer_model`` (not a question
    answerer's, nor a tagger's windows of whole words)."""
    from openvino_tokenizers import connect_models

    limit = signatures.resolve_max_windows(model, max_windows)  # refused where no windows
    windows = reads_windows(model, preprocessor)
    if windows is None:
        limit = None
    function = (_packed_function(model, preprocessor, task) if windows is None
                else _window_function(windows[1]))
    choices = task.openvino_choices(model) if task.openvino_choices else None
    packed = _converted(function, quantize, lambda: _calibration_rows(
        preprocessor, calibration_texts, text_pair, windows is not None, choices))
    tokenizer = tokenizer_model(list(preprocessor.vocabulary), preprocessor.lower_case,
                                preprocessor.seq_length, text_pair and choices is None,
                                windows=windows is not None,
                                window_stride=None if windows is None else windows[0],
                                max_windows=limit, num_choices=choices)
    inputs = INPUT_NAMES + ((TEXT_INDEX,) if windows is not None else ())
    joined = connect_models(tokenizer, packed, {name: f"{name}:0" for name in inputs})
    if choices is not None:
        joined = _with_choice_text(joined)
    if limit is not None:  # keras-bert serve names it when a request exceeds it
        joined.set_rt_info(limit, ["keras_bert", "max_windows"])
    return joined


def _read_model(tokenizer, outputs_fn, extra_inputs: tuple[str, ...], quantize: str | None,
                calibration_texts, max_windows: int | None):
    """The IR of a model whose tokenizer (an ``openvino.Model`` of raw text) gives, besides
    the packed rows, ``extra_inputs`` (int32 [n] each) to ``outputs_fn(ids, **extra)``, which
    is converted; int8 calibrates on the tokenizer's outputs for each calibration text (as
    every raw-text input of it: a question answerer's context and, cut, its question)."""
    import openvino as ov
    from openvino_tokenizers import connect_models

    extra_specs = {name: tf.TensorSpec([None], tf.int32, name=name) for name in extra_inputs}

    @tf.function(autograph=False,
                 input_signature=[signatures.ids_input_signature(), extra_specs])
    def function(ids, extra):
        return outputs_fn(ids, **extra)

    def calibration():
        rows = ov.Core().compile_model(tokenizer, "CPU")
        names = [port.get_any_name() for port in tokenizer.inputs]
        return [{f"{port.get_any_name()}:0": value for port, value in rows(
            {name: np.array([text.encode("utf-8")], np.bytes_) for name in names}).items()}
            for text in calibration_texts]

    packed = _converted(function, quantize, calibration)
    inputs = INPUT_NAMES + extra_inputs
    joined = connect_models(tokenizer, packed, {name: f"{name}:0" for name in inputs})
    if max_windows is not None:  # keras-bert serve names it when a request exceeds it
        joined.set_rt_info(max_windows, ["keras_bert", "max_windows"])
    return joined


def write_openvino(model, directory: str, *, preprocessor, text_pair: bool | None = None,
                   quantize: str | None = None, calibration_texts=None,
                   max_windows: int | None = None, overwrite: bool = False) -> str:
    """Writes ``openvino_model(...)`` as ``directory``/model.xml + model.bin (the directory
    appears only when complete; remote directories get model.xml last) and returns it."""
    import openvino as ov

    ov_model = openvino_model(model, preprocessor, text_pair, quantize, calibration_texts,
                              max_windows)
    try:
        if not is_remote(directory):
            with atomic_output_dir(directory, overwrite=overwrite) as out:
                ov.save_model(ov_model, os.path.join(out, IR_FILE), compress_to_fp16=False)
        else:
            with tempfile.TemporaryDirectory(prefix="keras_bert_openvino-") as scratch:
                ov.save_model(ov_model, os.path.join(scratch, IR_FILE), compress_to_fp16=False)
                fileio.makedirs(directory)
                for name in (WEIGHTS_FILE, IR_FILE):  # model.xml last: it marks a version
                    fileio.copy(os.path.join(scratch, name), join(directory, name),
                                overwrite=overwrite)
    except (OSError, RuntimeError) as error:
        raise SaveError(f"writing the OpenVINO model {directory!r} failed: "
                        f"{one_line_reason(error)}") from error
    logger.info("exported %s as OpenVINO IR (%s) to %s", type(model).__name__,
                "int8" if quantize else "float32", directory)
    return directory
