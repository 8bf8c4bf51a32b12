"""SavedModel export for TF Serving: ``<export_base>/<model_name>/<version>/`` written atomically,
with raw-text and packed-id signatures, TF Hub's attributes, and only servable ops."""

from __future__ import annotations

import logging
import os
import tempfile

import tensorflow as tf

from keras_bert.export import ops, signatures, tasks  # noqa: F401  (tasks registers exports)
from keras_bert.io_utils import atomic_output_dir, is_local, join
from keras_bert.models.encoder import BertEncoder
from keras_bert.tokenization import vocab as vocab_lib
from keras_bert.tokenization.preprocessor import BertPreprocessor

logger = logging.getLogger(__name__)


class ExportModule(tf.Module):
    """The exported object: the model, its preprocessor, and what TF Hub consumers read.

    Attributes saved: ``vocab_file`` (an asset, vocab.txt), ``do_lower_case`` (bool variable),
    ``variables`` and ``trainable_variables`` (lists), and for an encoder ``__call__(inputs,
    training=False)`` -> {sequence_output, pooled_output, encoder_outputs (a list)}.
    """

    # Plain attributes instead of tf.Module's properties: TF Hub reads them off the SavedModel.
    variables = None
    trainable_variables = None

    def __init__(self, model, preprocessor, vocab_path: str):
        super().__init__(name="keras_bert_export")
        self.model = model
        self.preprocessor = preprocessor
        self.vocab_file = tf.saved_model.Asset(vocab_path)
        self.do_lower_case = tf.Variable(bool(preprocessor.lower_case), trainable=False,
                                         name="do_lower_case")
        self.variables = list(model.variables)
        self.trainable_variables = list(model.trainable_variables)
        if isinstance(model, BertEncoder):
            call = tf.function(lambda inputs, training=False: model(inputs, training=training),
                               autograph=False)
            for training in (False, True):
                call.get_concrete_function(signatures.ids_input_signature(), training=training)
            self.__call__ = call


def next_version(model_dir: str) -> int:
    """One more than the highest numeric version under ``model_dir`` (1 when there is none)."""
    if not tf.io.gfile.isdir(model_dir):
        return 1
    versions = [int(e.rstrip("/")) for e in tf.io.gfile.listdir(model_dir)
                if e.rstrip("/").isdigit()]
    return max(versions, default=0) + 1


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
        if lower_case is None:
            _, lower_case = vocab_lib.resolve_pretrained(vocab_file)
        return BertPreprocessor(vocab_file, lower_case, seq_length or 128)
    if seq_length is not None and seq_length != preprocessor.seq_length:
        preprocessor = BertPreprocessor(vocabulary=list(preprocessor.vocabulary),
                                        lower_case=preprocessor.lower_case, seq_length=seq_length)
    return preprocessor


def export_model(model, export_base: str, model_name: str, version: int | None = None, *,
                 preprocessor=None, vocab_file: str | None = None,
                 lower_case: bool | None = None, seq_length: int | None = None,
                 text_pair: bool | None = None) -> str:
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

    Returns:
        ``<export_base>/<model_name>/<version>``, which appears only once complete.

    Raises:
        FileExistsError: that version exists already.
        ValueError: the model cannot be exported, or its graph has ops TF Serving cannot run.
    """
    preprocessor = resolve_preprocessor(model, preprocessor, vocab_file, lower_case, seq_length)
    model_dir = join(export_base, model_name)
    version = next_version(model_dir) if version is None else int(version)
    if version < 1:
        raise ValueError(f"version must be a positive integer, got {version}")
    version_dir = join(model_dir, str(version))
    if tf.io.gfile.exists(version_dir):
        raise FileExistsError(f"{version_dir!r} exists; TF Serving versions are immutable, so "
                              "export as a new version (leave version unset for the next one)")
    with tempfile.TemporaryDirectory(prefix="keras_bert_export-") as scratch:
        vocab_path = os.path.join(scratch, vocab_lib.VOCAB_FILENAME)
        vocab_lib.save_vocab(list(preprocessor.vocabulary), vocab_path)
        module = ExportModule(model, preprocessor, vocab_path)
        functions = signatures.build_signatures(model, preprocessor, text_pair)
        for name, function in functions.items():
            setattr(module, name, function)
        if is_local(version_dir):
            with atomic_output_dir(version_dir) as out:
                _save(module, functions, out)
        else:
            local = os.path.join(scratch, "saved_model")
            _save(module, functions, local)
            _upload_saved_model_last(local, version_dir)
    logger.info("exported %s as %s (signatures: %s)", type(model).__name__, version_dir,
                ", ".join(sorted(functions)))
    return version_dir


def _save(module: ExportModule, functions: dict, path: str) -> None:
    tf.saved_model.save(module, path, signatures=functions)
    ops.check_ops(path)


def _upload_saved_model_last(local_dir: str, dst: str) -> None:
    """Copies a SavedModel to a remote ``dst``, saved_model.pb last: TF Serving (and our server)
    only treat a version directory as complete once that file exists."""
    files = [os.path.relpath(os.path.join(root, name), local_dir)
             for root, _, names in os.walk(local_dir) for name in names]
    files.sort(key=lambda rel: rel == "saved_model.pb")
    for rel in files:
        target = join(dst, *rel.split(os.sep))
        tf.io.gfile.makedirs(os.path.dirname(target) if is_local(target)
                             else target.rsplit("/", 1)[0])
        tf.io.gfile.copy(os.path.join(local_dir, rel), target, overwrite=False)
