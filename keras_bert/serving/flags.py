"""The model server's flags: tensorflow_model_server's, as ``keras-bert serve`` takes them. Pure
Python, so that `keras-bert serve --help` and flag errors need no TensorFlow."""

from __future__ import annotations

import argparse
import os


def _flag_bool(value: str) -> bool:
    """A boolean flag value as tensorflow_model_server spells it (true/false, 1/0)."""
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def build_flag_parser(prog: str = "keras-bert serve") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="A local model server speaking TF Serving's gRPC and REST APIs.")
    add = parser.add_argument
    add("--port", type=int, default=8500, help="gRPC port; 0 disables gRPC")
    add("--rest_api_port", type=int, default=0, help="REST port; 0 (default) disables REST")
    add("--host", default="127.0.0.1",
        help="address to bind (tensorflow_model_server binds 0.0.0.0; this server is local "
             "unless told otherwise)")
    add("--model_name", default="default", help="name of the model (without --model_config_file)")
    add("--model_base_path", help="the model's directory of numbered versions")
    add("--model_config_file", help="a ModelServerConfig text proto (overrides the two above)")
    add("--model_config_file_poll_wait_seconds", type=float, default=0,
        help="re-read --model_config_file this often; 0 reads it once")
    add("--file_system_poll_wait_seconds", type=float, default=1,
        help="look for new and removed versions this often; start-up waits for each model's "
             "first version; 0 looks once at startup (a model without a version then fails it)")
    add("--enable_batching", type=_flag_bool, nargs="?", const=True, default=False,
        help="batch concurrent requests (--enable_batching or --enable_batching=true)")
    add("--batching_parameters_file", help="a BatchingParameters text proto")
    add("--grpc_max_threads", type=int, default=max(64, 4 * (os.cpu_count() or 1)),
        help="gRPC requests handled at once; a request waiting for its batch holds one, so "
             "this also caps how many requests a batch can gather (default: 64 or 4 per CPU)")
    add("--grpc_max_message_bytes", type=int, default=64 << 20,
        help="largest gRPC message accepted or sent; larger requests get RESOURCE_EXHAUSTED")
    add("--rest_api_max_body_bytes", type=int, default=64 << 20,
        help="largest REST body accepted; larger requests get RESOURCE_EXHAUSTED (429)")
    add("--rest_api_timeout_in_ms", type=int, default=30000,
        help="a REST request still queued for batching after this long fails")
    add("--rest_api_read_timeout_in_ms", type=int, default=30000,
        help="a REST request body not received within this long is answered 408")
    add("--rest_api_header_timeout_in_ms", type=int, default=30000,
        help="a REST connection that has not sent a complete request header this long after "
             "it opened, or after its previous answer, is closed: idle keep-alive connections "
             "and clients that send headers slowly alike (> 0)")
    add("--rest_api_num_threads", type=int, default=max(64, 4 * (os.cpu_count() or 1)),
        help="REST requests worked on at once; more wait for a free thread (connections are "
             "held by one event loop, not by threads)")
    add("--max_rows_per_call", type=int, default=256,
        help="without --enable_batching, a request with more rows runs as several model calls "
             "of at most this many rows, so memory stays bounded whatever a request's size "
             "(with batching, --batching_parameters_file's max_batch_size bounds it); 0: no "
             "limit")
    add("--tensorflow_session_parallelism", type=int, default=0,
        help="threads of each model's TensorFlow session, intra-op and inter-op alike, as "
             "tensorflow_model_server's flag; 0 (default): TensorFlow's (one per core)")
    add("--tensorflow_intra_op_parallelism", type=int, default=0,
        help="threads one op may use (oneDNN's matmuls); 0: TensorFlow's default. With this or "
             "--tensorflow_inter_op_parallelism set, --tensorflow_session_parallelism is ignored")
    add("--tensorflow_inter_op_parallelism", type=int, default=0,
        help="ops of one model call run at once; 0: TensorFlow's default")
    add("--drain_timeout_seconds", type=float, default=30,
        help="on SIGTERM, how long in-flight requests may take to finish")
    add("--ssl_config_file",
        help="an SSLConfig text proto (server_key, server_cert, custom_ca, client_verify): "
             "gRPC over TLS, as tensorflow_model_server")
    add("--unsafe_reload_any_path", action="store_true",
        help="let HandleReloadConfigRequest name base paths outside the directories of those "
             "given at start; a SavedModel is code, so whoever can call the RPC runs theirs")
    return parser
