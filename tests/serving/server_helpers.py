"""Helpers for the serving tests: free ports, an in-process server, and REST/gRPC calls."""

import contextlib
import json
import socket
import urllib.error
import urllib.request

import grpc
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from keras_bert.serving.server import ModelServer, build_flag_parser


def write_model_config(base, names) -> str:
    """A model_config_list serving every ``base/<name>`` (TF Serving's text format); its path."""
    config = base / "models.config"
    config.write_text("model_config_list {" + "".join(
        f' config {{ name: "{name}" base_path: "{base / name}" model_platform: "tensorflow" }}'
        for name in names) + " }")
    return str(config)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(*flags: str):
    """A ModelServer on free local ports, stopped on exit; yields (server, grpc stubs)."""
    args = build_flag_parser().parse_args(
        ["--port", str(free_port()), "--rest_api_port", str(free_port()), *flags])
    server = ModelServer(args)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    try:
        yield server, Stubs(prediction_service_pb2_grpc.PredictionServiceStub(channel),
                            model_service_pb2_grpc.ModelServiceStub(channel),
                            f"http://127.0.0.1:{server.rest_port}")
    finally:
        channel.close()
        server.stop(5)


class Stubs:
    def __init__(self, prediction, model, rest_url):
        self.prediction = prediction
        self.model = model
        self.rest_url = rest_url

    def rest(self, path: str, body=None):
        """(HTTP status, JSON body) of a GET (body None) or POST."""
        data = None if body is None else (body if isinstance(body, bytes)
                                          else json.dumps(body).encode())
        request = urllib.request.Request(self.rest_url + path, data=data)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def grpc_error(self, method, request, timeout: float = 30) -> tuple[grpc.StatusCode, str]:
        """(code, details) of a call that must fail (within ``timeout`` seconds)."""
        try:
            method(request, timeout=timeout)
        except grpc.RpcError as e:
            return e.code(), e.details()
        raise AssertionError("the call succeeded but should have failed")
