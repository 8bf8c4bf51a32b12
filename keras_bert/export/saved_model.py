"""SavedModel export for TF Serving: ``<export_base>/<model_name>/<version>/`` written atomically,
with raw-text and packed-id signatures, TF Hub's attributes, and only servable ops."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile

import tensorflow as tf

from keras_bert.export import int8, ops, signatures, warmup
from keras_bert import fileio, tf_internals
from keras_bert.config import EXPORT_FORMATS
from keras_bert.errors import SaveError, one_line_reason
from keras_bert.fileio import atomic_output_dir, check_writable_location, is_remote, join
from keras_bert.layers.int8 import is_int8
from keras_bert.models.encoder import BertEncoder
from keras_bert.tokenization import vocab as vocab_lib
from keras_bert.tokenization.preprocessor import BertPreprocessor
from keras_bert.tokenization.pretrained_vocab import read_pretrained_vocabulary

logger = logging.getLogger(__name__)


class ExportModule(tf.Module):
    """The exported object: the signature functions, the variables they read, and what TF Hub
    consumers read.

    It holds the tf.Variables that the traced functions capture, not the Keras model: a Keras 3
    variable wraps a tf.Variable, and a SavedModel that tracks the wrapper restores nothing in
    TensorFlow's graph-mode loader (``LoadSavedModel``, what TF Serving runs), so every request
    there would fail with "Could not find variable". Tracking only the captured variables also
    keeps optimizer state and anything else the signatures do not read out of the export.

    Attributes saved: ``vocab_file`` (an asset, vocab.txt), ``do_lower_case`` (bool variable),
    ``variables`` and ``trainable_variables`` (lists), the signature functions, and for an
    encoder ``__call__(inputs, training=False)`` -> {sequence_output, pooled_output, default
    (= pooled_output), encoder_outputs (a list)}.
    """

    # Plain attributes instead of tf.Module's properties: TF Hub reads them off the SavedModel.
    variables = None
    trainable_variables = None

    def __init__(self, model, functions: dict, vocab_path: str, lower_case: bool):
        super().__init__(name="keras_bert_export")
        self.vocab_file = tf.saved_model.Asset(vocab_path)
        self.do_lower_case = tf.Variable(bool(lower_case), trainable=False,
                                         name="do_lower_case")
        for name, function in functions.items():
            setattr(self, name, function)
        with tf_internals.tracing_as_saved():  # so that tf.saved_model.save traces nothing again
            concrete = [function.get_concrete_function() for function in functions.values()]
            if isinstance(model, BertEncoder):
                self.__call__ = hub_call(model)
                concrete += [self.__call__.get_concrete_function(
                    signatures.ids_input_signature(), training=training)
                    for training in (False, True)]
        self.variables = _unique(v for function in concrete for v in function.variables)
        self.trainable_variables = _unique(v for function in concrete
                                           for v in function.trainable_variables)


def hub_call(model: BertEncoder):
    """TF Hub's ``__call__(inputs, training=False)`` for an encoder (the caller traces both
    modes)."""
    def call(inputs, training=False):
        outputs = dict(model(inputs, training=training))
        outputs["default"] = outputs["pooled_output"]
        return outputs

    return tf.function(call, autograph=False)


def _unique(variables) -> list:
    seen = {}
    for variable in variables:
        seen.setdefault(id(variable), variable)
    return list(seen.values())


def next_version(model_dir: str) -> int:
    """One more than the highest numeric version under ``model_dir`` (1 when there is none)."""
    if not fileio.isdir(model_dir):
        return 1
    versions = [int(e.rstrip("/")) for e in fileio.listdir(model_dir)
                if e.rstrip("/").isdigit()]
    return max(versions, default=0) + 1


def check_export_target(export_base: str, model_name: str, version: int | None = None) -> None:
    """Fails before any work when ``<export_base>/<model_name>/<version>`` cannot be written: a
    path component is a file or unwritable, the version is not positive, or it exists already.

    Raises:
        NotADirectoryError, PermissionError, ValueError or FileExistsError, naming the path.
    """
    if not model_name or "/" in model_name or model_name in (".", ".."):
        raise ValueError(f"model_name must be one directory name, got {model_name!r}")
    model_dir = join(export_base, model_name)
    check_writable_location(model_dir)
    if version is None:
        return
    if int(version) < 1:
        raise ValueError(f"version must be a positive integer, got {version}")
    version_dir = join(model_dir, str(int(version)))
    if fileio.exists(version_dir):
        raise FileExistsError(f"{version_dir!r} exists; TF Serving versions are immutable, so "
                              "export as a new version (leave version unset for the next one)")


def resolve_preprocessor(model, preprocessor=None, vocab_file: str | None = None,
                         lower_case: bool | None = None, seq_length: int | None = None):
    """The BertPreprocessor of the export: the one given, the model's own, or one built from
    ``vocab_file``; ``seq_length`` (when given) overrides its packed length."""
    if preprocessor is None and getattr(model, "preprocessor", None) is not None:
        if vocab_file is not None:
            logger.warning("%s has its own preprocessor; vocab_file %s is not used",
                           type(model).__name__, vocab_file)
        preprocessor = model.preprocessor
    if preprocessor is None:
        if vocab_file is None:
            raise ValueError(
                f"exporting a {type(model).__name__} needs its vocabulary for the raw-text "
                "serving_default signature: pass vocab_file= (or preprocessor=BertPreprocessor"
                "(...))")
        tokens, found_lower_case = read_pretrained_vocabulary(vocab_file)
        return BertPreprocessor(vocabulary=tokens,
                                lower_case=found_lower_case if lower_case is None else lower_case,
                                seq_length=seq_length or 128)
    if seq_length is not None and seq_length != preprocessor.seq_length:
        preprocessor = BertPreprocessor(vocabulary=list(preprocessor.vocabulary),
                                        lower_case=preprocessor.lower_case, seq_length=seq_length)
    return preprocessor


MIXED_PRECISION = {"bf16": "mixed_bfloat16"}


def with_compute_dtype(model, mixed_precision: str):
    """A copy of ``model`` that computes under a mixed policy (``"bf16"``: float32 weights,
    bfloat16 matmuls; softmax, LayerNorm and the outputs stay float32), with the same weights."""
    if mixed_precision not in MIXED_PRECISION:
        raise ValueError(f"mixed_precision must be one of {sorted(MIXED_PRECISION)}, got "
                         f"{mixed_precision!r}")
    policy = MIXED_PRECISION[mixed_precision]
    config = model.get_config()
    if isinstance(model, BertEncoder):
        config["dtype"] = policy
    else:  # a task model: its head takes the encoder's policy
        config["encoder"] = {**config["encoder"],
                             "config": {**config["encoder"]["config"], "dtype": policy}}
    copy = type(model).from_config(config)
    copy.set_weights(model.get_weights())
    return copy


def export_model(model, export_base: str, model_name: str, version: int | None = None, *,
                 preprocessor=None, vocab_file: str | None = None,
                 lower_case: bool | None = None, seq_length: int | None = None,
                 text_pair: bool | None = None, mixed_precision: str | None = None,
                 dynamic_padding: bool = True, quantize: str | None = None,
                 calibration_texts=None, serving_default: str = "text",
                 format: str = "saved_model", max_windows: int | None = None) -> str:
    """Exports ``model`` as a TF Serving version directory and returns its path.

    Args:
        model: a BertEncoder or a task model (see ``signatures.task_export``).
        export_base: the directory of models (local or gs://).
        model_name: the model's directory under ``export_base``, the name it is served as.
        version: the version number; by default one more than the highest present.
        preprocessor: the BertPreprocessor for raw text; by default the model's own or one
            built from ``vocab_file`` (casing from ``lower_case`` or the checkpoint directory).
        seq_length: packed length of raw text (default: the preprocessor's, else 128).
        text_pair: whether serving_default takes ``text_pair`` (default: the task's).
        dynamic_padding: raw-text signatures pad each batch to its longest text (rounded up to
            a multiple of 8, at most seq_length), so short requests cost what short texts cost;
            False pads every text to seq_length (static shapes, e.g. for XLA or TPUs).
        mixed_precision: ``"bf16"`` exports a model that keeps float32 weights and outputs but
            computes in bfloat16 (GPUs, CPUs with AVX512_BF16 or AMX; MiniLM's pooled output
            moves by less than 0.05, tests/export/test_saved_model.py); None (default): float32.
        quantize: ``"int8"`` exports the encoder's dense layers as int8 matmuls and its word
            embeddings as int8 (``export.int8``; a third of the float32 size or less), for
            CPUs whose TensorFlow runs oneDNN's int8 kernel (x86-64 builds; checked first).
            None (default): float32, unless ``model.quantize("int8")`` has run: a model
            quantized so exports as int8 either way.
        calibration_texts: with ``quantize="int8"``, a few hundred sample texts (strings,
            like the ones to be served): the int8 layers but each block's output get static
            per-channel input ranges from them (``models.int8_calibration``), which runs faster
            than finding each row's range per call. None (default): the sample of its training
            texts a task model keeps (``calibration_texts``, after ``fit``, ``keras-bert
            finetune`` or ``distill``), else per-row ranges.
        serving_default: what ``serving_default`` takes: "text" (default: raw text), or
            "transformers": the ids and outputs of transformers 4.x's TF classes
            (``input_ids``, ``attention_mask``, ``token_type_ids`` int32 in, ``logits``...
            out; ``int64_serving`` with int64 ids), so that a client of a
            ``TFBertFor*`` export works unchanged; raw text is then ``serve_text``.
        format: "saved_model" (default), or "openvino": OpenVINO IR (``model.xml`` and
            ``model.bin`` in the version directory, OpenVINO Model Server's layout) taking
            raw text as serving_default does, with its outputs (``export.openvino``); with
            ``quantize="int8"`` NNCF quantizes it from ``calibration_texts`` (or the
            model's kept training texts). Its tokenizer cuts long texts into the windows
            serving_default reads (``max_windows`` applies): a classifier's (a pair's second
            text), a tagger's, a question answerer's contexts.
        max_windows: for a model that reads a text longer than seq_length as overlapping
            windows (a classifier, a tagger, a question answerer's contexts), the most windows
            one text may be; a request with a longer text fails with INVALID_ARGUMENT naming
            the limit, instead of holding the server for what its windows cost. None
            (default): ``config.DEFAULT_MAX_WINDOWS``; 0: no limit.

    Returns:
        ``<export_base>/<model_name>/<version>``, which appears only once complete.

    Raises:
        FileExistsError: that version exists already.
        ValueError: the model cannot be exported, or its graph has ops TF Serving cannot run.
        Int8KernelMissing: ``quantize="int8"`` on a TensorFlow without oneDNN's int8 kernel.
        ImportError: ``format="openvino"`` without OpenVINO installed (one line, what to
            install).
    """
    if format not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}, got {format!r}")
    if format == "openvino":
        from keras_bert.export.openvino_extra import check_openvino

        check_openvino()
        from keras_bert.export import openvino

        openvino.check_exportable(model, signatures.task_export(model), mixed_precision,
                                  dynamic_padding, serving_default)
    check_export_target(export_base, model_name, version)
    model_dir = join(export_base, model_name)
    version = next_version(model_dir) if version is None else int(version)
    if format == "openvino":
        return openvino.write_openvino(
            model, join(model_dir, str(version)),
            preprocessor=resolve_preprocessor(model, preprocessor, vocab_file, lower_case,
                                              seq_length),
            text_pair=text_pair, quantize=quantize, calibration_texts=calibration_texts,
            max_windows=max_windows)
    return write_saved_model(
        model, join(model_dir, str(version)), preprocessor=preprocessor, vocab_file=vocab_file,
        lower_case=lower_case, seq_length=seq_length, text_pair=text_pair,
        mixed_precision=mixed_precision, dynamic_padding=dynamic_padding, quantize=quantize,
        calibration_texts=calibration_texts, serving_default=serving_default,
        max_windows=max_windows)


def write_saved_model(model, directory: str, *, overwrite: bool = False, preprocessor=None,
                      vocab_file: str | None = None, lower_case: bool | None = None,
                      seq_length: int | None = None, text_pair: bool | None = None,
                      mixed_precision: str | None = None, dynamic_padding: bool = True,
                      quantize: str | None = None, calibration_texts=None,
                      serving_default: str = "text", max_windows: int | None = None) -> str:
    """Writes ``model``'s serving SavedModel at ``directory`` (which appears only when
    complete) and returns it; ``export_model`` writes a TF Serving version directory with it,
    and a task model's ``export(path)`` a plain one. The other arguments are
    ``export_model``'s.

    Raises:
        SaveError: the write failed part-way (a full disk...), naming what, where and why; an
            earlier ``directory`` (``overwrite``) is left as it was.
    """
    if mixed_precision and (quantize or is_int8(model)):
        raise ValueError(f"int8 and mixed_precision={mixed_precision!r} exclude each other; "
                         f"mixed precision is for float32 models")
    preprocessor = resolve_preprocessor(model, preprocessor, vocab_file, lower_case, seq_length)
    if mixed_precision is not None:
        model = with_compute_dtype(model, mixed_precision)
    model, quantized = int8.export_variant(model, quantize, calibration_texts, preprocessor)
    task_int8 = quantized and not isinstance(model, BertEncoder)
    side_by_side = int8.qkv_side_by_side(model) if task_int8 else contextlib.nullcontext()
    name = type(model).__name__
    with side_by_side, tempfile.TemporaryDirectory(prefix="keras_bert_export-") as scratch:
        vocab_path = os.path.join(scratch, vocab_lib.VOCAB_FILENAME)
        vocab_lib.save_vocab(list(preprocessor.vocabulary), vocab_path)
        functions = signatures.build_signatures(model, preprocessor, text_pair, dynamic_padding,
                                                serving_default, max_windows)
        module = ExportModule(model, functions, vocab_path, preprocessor.lower_case)
        try:
            if not is_remote(directory):
                with atomic_output_dir(directory, overwrite=overwrite) as out:
                    _save(module, functions, out, quantized=quantized)
                    warmup.write_warmup_requests(out, preprocessor)
            else:
                local = os.path.join(scratch, "saved_model")
                _save(module, functions, local, quantized=quantized)
                warmup.write_warmup_requests(local, preprocessor)
                _upload_saved_model_last(local, directory)
        except fileio.OutputExistsError:
            raise
        except (OSError, tf.errors.OpError) as e:
            raise SaveError(f"could not write the {name} SavedModel to {directory!r}: "
                            f"{one_line_reason(e)}; nothing was left there") from e
    logger.info("exported %s%s as %s (%s; signatures: %s)", name,
                " (int8)" if quantized else "", directory, _describe_size(module.variables),
                ", ".join(sorted(functions)))
    return directory


class ExportsRawText:
    """Mixed in before ``BertTask`` by the task models: Keras' ``model.export(path)`` writes the
    raw-text serving SavedModel that ``export_model`` writes (``serving_default`` on text, the
    packed-id signatures, warm-up requests), at ``path`` itself (TF Serving's versioned layout:
    ``keras_bert.export_model``), and logs one line instead of Keras' signature listing."""

    def export(self, filepath, format: str = "tf_saved_model", verbose: bool | None = None,
               input_signature=None, **kwargs) -> str:
        """Writes the raw-text SavedModel at ``filepath`` (replacing one there whole);
        ``kwargs`` are ``export_model``'s (``quantize``, ``seq_length``...). Other Keras
        formats and a custom ``input_signature`` are refused in one line."""
        if format != "tf_saved_model" or input_signature is not None:
            raise ValueError(
                f"{type(self).__name__}.export writes the raw-text serving SavedModel "
                f"(format='tf_saved_model', its own signatures); for TF Serving's versioned "
                f"layout use keras_bert.export_model(model, base, name), and for other formats "
                f"export the packed-id keras.Model(model.inputs, model.outputs)")
        return write_saved_model(self, os.fspath(filepath), overwrite=True, **kwargs)


def _describe_size(variables) -> str:
    """"N variables, M MB of weights" for the export log."""
    size = sum(v.shape.num_elements() * v.dtype.size for v in variables)
    return f"{len(variables)} variables, {size / 1e6:.1f} MB of weights"


def _save(module: ExportModule, functions: dict, path: str, quantized: bool = False) -> None:
    tf.saved_model.save(module, path, signatures=functions)
    ops.check_ops(path, int8=quantized)


def _upload_saved_model_last(local_dir: str, dst: str) -> None:
    """Copies a SavedModel to a remote ``dst``, saved_model.pb last: TF Serving (and our server)
    only treat a version directory as complete once that file exists."""
    files = [os.path.relpath(os.path.join(root, name), local_dir)
             for root, _, names in os.walk(local_dir) for name in names]
    files.sort(key=lambda rel: rel == "saved_model.pb")
    for rel in files:
        target = join(dst, *rel.split(os.sep))
        fileio.makedirs(os.path.dirname(target) if not is_remote(target)
                        else target.rsplit("/", 1)[0])
        fileio.copy(os.path.join(local_dir, rel), target, overwrite=False)
