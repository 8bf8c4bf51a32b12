"""The model server's entry point: ``keras-bert serve`` with tensorflow_model_server's flags
(--port, --rest_api_port, --model_name, --model_base_path, --model_config_file, --enable_batching,
--batching_parameters_file, --file_system_poll_wait_seconds, ...). It binds 127.0.0.1 unless
--host says otherwise, and on SIGTERM stops accepting, finishes what is in flight and exits 0."""

from __future__ import annotations

import argparse
import gc
import ipaddress
import logging
import signal
import sys
import threading

import tensorflow as tf

from keras_bert.serving import config_files as config_lib
from keras_bert.serving.base_paths import check_base_paths, holds_openvino_model
from keras_bert.serving.batching import BatchScheduler
from keras_bert.serving.errors import ServingError
from keras_bert.serving.flags import build_flag_parser
from keras_bert.serving.grpc_service import GrpcServer
from keras_bert.serving.model_manager import ModelManager
from keras_bert.serving.rest import RestServer
from keras_bert.serving.servable import Servable
from keras_bert.serving.service import ServingCore

logger = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or "localhost") is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def session_config(args: argparse.Namespace) -> tf.compat.v1.ConfigProto:
    """The TensorFlow session options of every model, from tensorflow_model_server's three
    parallelism flags, with its rules: all three set is an error; intra-op or inter-op set wins
    over session parallelism; 0 leaves TensorFlow's default."""
    flags = {name: getattr(args, f"tensorflow_{name}_parallelism")
             for name in ("session", "intra_op", "inter_op")}
    for name, value in flags.items():
        if value < 0:
            raise ValueError(f"--tensorflow_{name}_parallelism must be >= 0, got {value}")
    if all(flags.values()):
        raise ValueError("Either configure --tensorflow_session_parallelism or "
                         "(--tensorflow_intra_op_parallelism, --tensorflow_inter_op_parallelism) "
                         "separately. You cannot configure all.")
    if flags["intra_op"] or flags["inter_op"]:
        intra, inter = flags["intra_op"], flags["inter_op"]
    else:
        intra = inter = flags["session"]
    return tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra,
                                    inter_op_parallelism_threads=inter)


def servable_class(path: str) -> type[Servable]:
    """What loads the version at ``path``: ``OpenVinoServable`` for OpenVINO IR (model.xml),
    else ``Servable`` (a SavedModel)."""
    if holds_openvino_model(path):
        from keras_bert.serving.openvino_servable import OpenVinoServable
        return OpenVinoServable
    return Servable


class ModelServer:
    """The server's parts wired together: models, batching, gRPC and REST.

    Args:
        args: parsed flags (see ``build_flag_parser``).
    """

    def __init__(self, args: argparse.Namespace):
        self.args = args
        model_config = config_lib.model_server_config(args)
        check_base_paths(model_config)
        if not args.port and not args.rest_api_port:
            raise ValueError("--port and --rest_api_port are both 0; nothing would listen")
        if args.max_rows_per_call < 0:
            raise ValueError(f"--max_rows_per_call must be >= 0, got {args.max_rows_per_call}")
        self.session_config = session_config(args)
        if args.rest_api_header_timeout_in_ms <= 0:
            raise ValueError("--rest_api_header_timeout_in_ms must be > 0, got "
                             f"{args.rest_api_header_timeout_in_ms}")
        if args.port == args.rest_api_port:
            raise ValueError(f"--port and --rest_api_port must differ, both are {args.port}")
        if args.batching_parameters_file and not args.enable_batching:
            logger.warning("--batching_parameters_file is ignored without --enable_batching")
        self.scheduler = (BatchScheduler(config_lib.load_batching_options(
            args.batching_parameters_file)) if args.enable_batching else None)
        self.ssl_config = (config_lib.load_ssl_config(args.ssl_config_file)
                           if args.ssl_config_file else None)
        self.manager = ModelManager(
            model_config, lambda name, version, path: servable_class(path)(
                name, version, path, self.scheduler, args.max_rows_per_call or None,
                self.session_config),
            reload_any_path=args.unsafe_reload_any_path)
        # No decoded input may outgrow the largest message the server accepts.
        self.core = ServingCore(self.manager, max(args.grpc_max_message_bytes,
                                                  args.rest_api_max_body_bytes))
        self.grpc_server = self.rest_server = None
        self.grpc_port = self.rest_port = 0
        if not is_loopback(args.host):
            logger.warning(
                "--host %s is not a loopback address: whoever reaches the ports can call every "
                "API, including ModelService/HandleReloadConfigRequest, which loads models "
                "(code) from under %s%s; see serving/README.md, Security", args.host,
                ", ".join(self.manager.roots),
                "" if self.ssl_config and self.ssl_config.client_verify else
                " (--ssl_config_file with client_verify admits only clients with certificates)")
        self._config_poller: threading.Thread | None = None
        self._stopped = threading.Event()

    def start(self, stop: threading.Event | None = None) -> bool:
        """Loads the models, waits until each has a version (as tensorflow_model_server, whose
        ports open only then; ``stop`` set ends the wait), then opens the ports.

        Returns:
            True once listening; False if ``stop`` was set while waiting for a model.
        """
        self.manager.start(self.args.file_system_poll_wait_seconds)
        if not self.manager.wait_for_models(stop or threading.Event()):
            return False
        if self.args.port:
            self.grpc_server = GrpcServer(self.core, self.args.host, self.args.port,
                                          self.args.grpc_max_threads,
                                          self.args.grpc_max_message_bytes, self.ssl_config)
            self.grpc_port = self.grpc_server.port
        if self.args.rest_api_port:
            self.rest_server = RestServer(
                self.core, self.args.host, self.args.rest_api_port,
                max_body_bytes=self.args.rest_api_max_body_bytes,
                timeout_ms=self.args.rest_api_timeout_in_ms,
                read_timeout_s=self.args.rest_api_read_timeout_in_ms / 1000,
                num_threads=self.args.rest_api_num_threads,
                drain_timeout_s=self.args.drain_timeout_seconds,
                header_timeout_s=self.args.rest_api_header_timeout_in_ms / 1000)
            self.rest_port = self.rest_server.port
        if self.args.model_config_file and self.args.model_config_file_poll_wait_seconds > 0:
            self._config_poller = threading.Thread(target=self._poll_config, daemon=True,
                                                   name="config-poller")
            self._config_poller.start()
        return True

    def listening(self) -> str:
        """What listens where, e.g. "grpc 127.0.0.1:8500 rest 127.0.0.1:8501" (only those on)."""
        return " ".join(f"{protocol} {self.args.host}:{port}" for protocol, port in
                        (("grpc", self.grpc_port), ("rest", self.rest_port)) if port)

    def _poll_config(self) -> None:
        while not self._stopped.wait(self.args.model_config_file_poll_wait_seconds):
            try:
                self.manager.reload_config(
                    config_lib.load_model_server_config(self.args.model_config_file),
                    from_config_file=True)
            except Exception as e:
                logger.error("reloading %s failed, keeping the current models: %s",
                             self.args.model_config_file, e)

    def stop(self, grace_s: float) -> None:
        """Stops accepting requests, lets in-flight ones finish (up to ``grace_s``), unloads."""
        self._stopped.set()
        if self.scheduler is not None:
            self.scheduler.flush()  # queued requests need not wait for company any more
        if self.rest_server is not None:
            self.rest_server.shutdown()  # no new connections; open ones finish
        if self.grpc_server is not None:
            self.grpc_server.stop(grace_s)
        if self.rest_server is not None:
            self.rest_server.stop()
        if self.scheduler is not None:
            self.scheduler.stop()
        self.manager.stop()


def main(argv: list[str] | None = None, prog: str = "keras-bert serve") -> int:
    args = build_flag_parser(prog).parse_args(argv)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    startup_errors = (ValueError, FileNotFoundError, OSError, ServingError)
    try:
        server = ModelServer(args)
    except startup_errors as e:
        print(f"model server: error: {e}", file=sys.stderr)
        return 2
    # What exists now (TensorFlow's modules, mostly) lives as long as the process. Kept out of
    # garbage collections, the full collection that frees a retired version (ModelManager)
    # scans only the objects of models and requests, so it pauses requests far less after a
    # version switch (benchmarks/serving_warmup.py; benchmarks/README.md, "Warm-up").
    gc.freeze()
    stop = threading.Event()  # set by SIGTERM and Ctrl-C, also while models are awaited
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        started = server.start(stop)
    except startup_errors as e:
        server.stop(0)
        print(f"model server: error: {e}", file=sys.stderr)
        return 2
    if not started or stop.is_set():
        logger.info("stopped before listening")
        server.stop(0)
        return 0
    print(f"model server ready: {server.listening()}", flush=True)
    while not stop.wait(1.0):
        pass
    logger.info("shutting down: draining in-flight requests")
    server.stop(args.drain_timeout_seconds)
    logger.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
