"""What a model's base path holds, in pure Python (`keras-bert serve` looks before TensorFlow
loads): its versions, numbered directories each holding a SavedModel (or an OpenVINO model,
model.xml, as OpenVINO Model Server's repository holds it), as TF Serving's
FileSystemStoragePathSource finds them; and, where it holds a checkpoint instead (a keras-bert,
Hugging Face, Google or keras-hub folder), the one-line error that says so and how to export it.

A base path that is missing or holds no version yet is valid, as in TF Serving, which waits for
one: only a folder that positively holds a checkpoint's files, and no version, is refused."""

from __future__ import annotations

from tensorflow_serving.config import model_server_config_pb2

from keras_bert import fileio
from keras_bert.checkpoints.formats import describe_checkpoint
from keras_bert.export.openvino_extra import IR_FILE

SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")


def is_version_dir(path: str) -> bool:
    """True for a complete version directory: saved_model.pb or .pbtxt present, or an
    OpenVINO model's model.xml (written last)."""
    return (any(fileio.exists(fileio.join(path, f)) for f in SAVED_MODEL_FILES)
            or holds_openvino_model(path))


def holds_openvino_model(path: str) -> bool:
    """True for a version directory of OpenVINO IR (model.xml) and no SavedModel: ``serve``
    loads it with OpenVINO."""
    return (fileio.exists(fileio.join(path, IR_FILE))
            and not any(fileio.exists(fileio.join(path, f)) for f in SAVED_MODEL_FILES))


def numbered_dirs(base_path: str) -> list[int]:
    """The numbers of the directories under ``base_path`` named by a number, ascending."""
    if not fileio.isdir(base_path):
        return []
    return sorted(int(entry.rstrip("/")) for entry in fileio.listdir(base_path)
                  if entry.rstrip("/").isdigit())


def list_versions(base_path: str) -> list[int]:
    """The numeric version directories under ``base_path`` holding a complete SavedModel."""
    return [number for number in numbered_dirs(base_path)
            if is_version_dir(f"{base_path.rstrip('/')}/{number}")]


def check_not_a_checkpoint(model: model_server_config_pb2.ModelConfig) -> None:
    """Raises ValueError, in one line, where ``model``'s base path has no version but it (or a
    numbered directory in it) holds a checkpoint: what it holds and the command that exports
    it (TF Serving would wait for a version forever)."""
    base = model.base_path.rstrip("/")
    if list_versions(base):
        return
    for path, what in ((base, "a SavedModel base path (numbered version directories each "
                              "holding saved_model.pb)"),
                       *((f"{base}/{number}", f"a SavedModel version ({base}/{number}/"
                                              "saved_model.pb)")
                         for number in numbered_dirs(base))):
        holds = describe_checkpoint(path)
        if holds is not None:
            raise ValueError(
                f"model {model.name}: {path} is {holds}, not {what}; export it first: "
                f"keras-bert export {path} EXPORT_BASE --model_name {model.name}, then serve "
                f"--model_base_path EXPORT_BASE/{model.name}")


def check_base_paths(config: model_server_config_pb2.ModelServerConfig) -> None:
    """``check_not_a_checkpoint`` for every model of ``config``."""
    for model in config.model_config_list.config:
        check_not_a_checkpoint(model)
