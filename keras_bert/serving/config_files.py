"""Server configuration files, read with TF Serving's protos: ModelServerConfig (the
--model_config_file) and BatchingParameters (the --batching_parameters_file)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import posixpath

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf import wrappers_pb2
from tensorflow_serving.config import model_server_config_pb2

from keras_bert import fileio
from keras_bert.serving.errors import invalid_argument

ModelServerConfig = model_server_config_pb2.ModelServerConfig
ModelConfig = model_server_config_pb2.ModelConfig
TENSORFLOW_PLATFORM = "tensorflow"


def _message_class(pool: descriptor_pool.DescriptorPool, file: descriptor_pb2.FileDescriptorProto,
                   full_name: str):
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def _batching_parameters_class():
    """tensorflow.serving.BatchingParameters (session_bundle_config.proto), built here because
    the tensorflow-serving-api wheel does not ship that proto. Field names and numbers are
    upstream's, so text and binary forms are interchangeable with TF Serving's."""
    pool = descriptor_pool.DescriptorPool()
    wrappers = descriptor_pb2.FileDescriptorProto()
    wrappers_pb2.DESCRIPTOR.CopyToProto(wrappers)
    pool.Add(wrappers)
    file = descriptor_pb2.FileDescriptorProto(
        name="tensorflow_serving/servables/tensorflow/batching_parameters.proto",
        package="tensorflow.serving", syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"])
    message = file.message_type.add(name="BatchingParameters")
    field = descriptor_pb2.FieldDescriptorProto
    for number, name, wrapper in ((1, "max_batch_size", "Int64Value"),
                                  (2, "batch_timeout_micros", "Int64Value"),
                                  (3, "max_enqueued_batches", "Int64Value"),
                                  (4, "num_batch_threads", "Int64Value"),
                                  (5, "thread_pool_name", "StringValue")):
        message.field.add(name=name, number=number, type=field.TYPE_MESSAGE,
                          label=field.LABEL_OPTIONAL, type_name=f".google.protobuf.{wrapper}")
    message.field.add(name="allowed_batch_sizes", number=6, type=field.TYPE_INT64,
                      label=field.LABEL_REPEATED)
    message.field.add(name="pad_variable_length_inputs", number=7, type=field.TYPE_BOOL,
                      label=field.LABEL_OPTIONAL)
    return _message_class(pool, file, "tensorflow.serving.BatchingParameters")


def _ssl_config_class():
    """tensorflow.serving.SSLConfig (tensorflow_serving/config/ssl_config.proto, the
    --ssl_config_file), built here because the tensorflow-serving-api wheel does not ship it.
    Upstream's field names and numbers: server_key = 1, server_cert = 2 (PEM text, not file
    names), custom_ca = 3 (PEM of the CA that signs client certificates), client_verify = 4."""
    file = descriptor_pb2.FileDescriptorProto(
        name="tensorflow_serving/config/ssl_config.proto", package="tensorflow.serving",
        syntax="proto3")
    message = file.message_type.add(name="SSLConfig")
    field = descriptor_pb2.FieldDescriptorProto
    for number, name in ((1, "server_key"), (2, "server_cert"), (3, "custom_ca")):
        message.field.add(name=name, number=number, type=field.TYPE_STRING,
                          label=field.LABEL_OPTIONAL)
    message.field.add(name="client_verify", number=4, type=field.TYPE_BOOL,
                      label=field.LABEL_OPTIONAL)
    return _message_class(descriptor_pool.DescriptorPool(), file,
                          "tensorflow.serving.SSLConfig")


BatchingParameters = _batching_parameters_class()
SSLConfig = _ssl_config_class()


def read_text_proto(path: str, message):
    """Parses the text-format proto file at ``path`` (local or gs://) into ``message``."""
    if not fileio.exists(path):
        raise FileNotFoundError(f"config file {path!r} does not exist")
    with fileio.open_file(path) as f:
        text = f.read()
    try:
        return text_format.Parse(text, message)
    except text_format.ParseError as e:
        raise ValueError(f"{path!r} is not a valid {message.DESCRIPTOR.name} text proto: {e}")


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    """Dynamic batching settings; defaults are TF Serving's when a field is left out.

    Args:
        max_batch_size: the most rows one batch holds; a request with more rows is refused.
        batch_timeout_micros: how long the oldest request waits for others to fill its batch.
        max_enqueued_batches: queued batches per signature before new requests are refused.
        num_batch_threads: batches processed at once, across all models.
        allowed_batch_sizes: when set, batches are padded up to the next of these sizes.
    """
    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = os.cpu_count() or 1
    allowed_batch_sizes: tuple[int, ...] = ()

    def __post_init__(self):
        if self.max_batch_size < 1 or self.num_batch_threads < 1 or self.max_enqueued_batches < 1:
            raise ValueError(f"batching parameters must be positive, got {self}")
        if self.batch_timeout_micros < 0:
            raise ValueError(f"batch_timeout_micros must be >= 0, got {self.batch_timeout_micros}")
        sizes = list(self.allowed_batch_sizes)
        if sizes and (sizes != sorted(set(sizes)) or sizes[-1] != self.max_batch_size):
            raise ValueError(
                "allowed_batch_sizes must increase and end with max_batch_size "
                f"({self.max_batch_size}); got {sizes}")

    @classmethod
    def from_proto(cls, params) -> "BatchingOptions":
        values = {name: getattr(params, name).value
                  for name in ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
                               "num_batch_threads") if params.HasField(name)}
        return cls(**values, allowed_batch_sizes=tuple(params.allowed_batch_sizes))


def load_batching_options(path: str | None) -> BatchingOptions:
    """BatchingOptions from a BatchingParameters text proto, or the defaults when ``path`` is None."""
    if not path:
        return BatchingOptions()
    return BatchingOptions.from_proto(read_text_proto(path, BatchingParameters()))


def model_server_config(args: argparse.Namespace) -> ModelServerConfig:
    """The models the flags name: --model_config_file's, else --model_name at
    --model_base_path."""
    if args.model_config_file:
        return load_model_server_config(args.model_config_file)
    if args.model_base_path:
        return single_model_config(args.model_name, args.model_base_path)
    raise ValueError("give --model_base_path (with --model_name) or --model_config_file")


def single_model_config(name: str, base_path: str) -> ModelServerConfig:
    """The config --model_name/--model_base_path stand for: one model, latest version served."""
    if "://" not in base_path:
        base_path = os.path.abspath(base_path)
    config = ModelServerConfig()
    config.model_config_list.config.add(name=name, base_path=base_path,
                                        model_platform=TENSORFLOW_PLATFORM)
    return config


def validate(config: ModelServerConfig) -> None:
    """Raises a ServingError(INVALID_ARGUMENT) where TF Serving would refuse ``config``."""
    if config.WhichOneof("config") != "model_config_list":
        raise invalid_argument("ServerModelConfig type not supported. Only ModelConfigList is "
                               "currently supported")
    names = set()
    for model in config.model_config_list.config:
        if not model.name:
            raise invalid_argument("a model in the config list has no name")
        if model.name in names:
            raise invalid_argument(
                f"Illegal to list model {model.name} multiple times in config list")
        names.add(model.name)
        if "://" not in model.base_path and not os.path.isabs(model.base_path):
            raise invalid_argument(
                f"Expected model {model.name} to have an absolute path or URI; got "
                f"base_path()={model.base_path}")
        if model.model_platform != TENSORFLOW_PLATFORM:
            raise invalid_argument(
                f"model {model.name}: model_platform must be \"{TENSORFLOW_PLATFORM}\", got "
                f"{model.model_platform!r}")


def load_ssl_config(path: str):
    """The SSLConfig text proto at ``path``; it must hold a server key and certificate, and a
    custom_ca when client_verify is set (there is no other CA to check clients against)."""
    ssl_config = read_text_proto(path, SSLConfig())
    if not ssl_config.server_key or not ssl_config.server_cert:
        raise ValueError(f"{path!r}: server_key and server_cert (PEM text) are required")
    if ssl_config.client_verify and not ssl_config.custom_ca:
        raise ValueError(f"{path!r}: client_verify needs custom_ca, the PEM of the CA that "
                         "signs client certificates")
    return ssl_config


def _normalized(path: str) -> str:
    """``path`` made comparable: symlinks and .. resolved for local paths, .. and // for URIs."""
    if "://" in path:
        scheme, rest = path.split("://", 1)
        return f"{scheme}://{posixpath.normpath('/' + rest).lstrip('/')}"
    return os.path.realpath(path)


def model_roots(config: ModelServerConfig) -> set[str]:
    """The directories holding the config's base paths (the parent of each one)."""
    roots = set()
    for model in config.model_config_list.config:
        path = _normalized(model.base_path).rstrip("/")
        roots.add(path.rsplit("/", 1)[0] + "/" if "://" in path else os.path.dirname(path))
    return roots


def paths_outside(config: ModelServerConfig, roots: set[str]) -> list[str]:
    """The base paths of ``config`` that lie under none of ``roots``."""
    def under(path: str, root: str) -> bool:
        if "://" in root or "://" in path:
            return path.startswith(root)  # a remote root ends with "/"
        return os.path.commonpath([path, root]) == root

    return [model.base_path for model in config.model_config_list.config
            if not any(under(_normalized(model.base_path), root) for root in roots)]


def load_model_server_config(path: str) -> ModelServerConfig:
    """The ModelServerConfig text proto at ``path``, validated as TF Serving would."""
    config = read_text_proto(path, ModelServerConfig())
    try:
        validate(config)
    except Exception as e:
        raise ValueError(f"model config file {path!r}: {e}") from None
    return config
