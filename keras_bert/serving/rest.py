"""TF Serving's REST API on the standard library's ThreadingHTTPServer: JSON in, the same request
protos as gRPC, JSON out, and {"error": ...} with TF Serving's HTTP code on failure."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2,
                                     get_model_status_pb2, predict_pb2, regression_pb2)

from keras_bert.serving import json_api
from keras_bert.serving.errors import (ServingError, from_exception, invalid_argument,
                                       resource_exhausted)
from keras_bert.serving.service import ServingCore

logger = logging.getLogger(__name__)

# tensorflow_serving/model_servers/http_rest_api_util.cc
_PREDICT_PATH = re.compile(r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?"
                           r":(classify|regress|predict)", re.IGNORECASE)
_STATUS_PATH = re.compile(r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?"
                          r"(?:/(metadata))?", re.IGNORECASE)


class InFlight:
    """Counts requests being answered, so shutdown can wait for them."""

    def __init__(self):
        self._count = 0
        self._cond = threading.Condition()

    def __enter__(self):
        with self._cond:
            self._count += 1

    def __exit__(self, *exc):
        with self._cond:
            self._count -= 1
            self._cond.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._count == 0, timeout=timeout_s)


class RestServer(ThreadingHTTPServer):
    """The HTTP server; one thread per connection, idle keep-alive connections close after
    ``idle_timeout_s``."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], core: ServingCore, max_body_bytes: int,
                 timeout_ms: int, idle_timeout_s: float = 30.0):
        self.core = core
        self.max_body_bytes = max_body_bytes
        self.timeout_ms = timeout_ms
        self.in_flight = InFlight()
        self.draining = False
        handler = type("Handler", (_Handler,), {"timeout": idle_timeout_s})
        super().__init__(address, handler)


def _model_spec(spec, name: str, version: str | None, label: str | None) -> None:
    spec.name = urllib.parse.unquote(name)
    if version is not None:
        spec.version.value = int(version)
    if label is not None:
        spec.version_label = urllib.parse.unquote(label)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: RestServer

    def log_message(self, format: str, *args) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._answer(self._get)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None):
        """Errors the HTTP layer raises itself (an unknown method, a malformed request line)
        as JSON, like every other answer."""
        data = json.dumps({"error": message or self.responses.get(code, ("error",))[0]}).encode()
        self.send_response(code, message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.close_connection = True
        self.end_headers()
        if getattr(self, "command", None) != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(data)

    def do_POST(self) -> None:
        self._answer(self._post)

    def _answer(self, handle) -> None:
        with self.server.in_flight:
            try:
                status, body = 200, handle()
            except Exception as e:
                error = from_exception(e)
                if not isinstance(e, ServingError):
                    logger.exception("REST request %s failed", self.path)
                status, body = error.http_status, {"error": error.message}
            data = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if self.server.draining:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)

    def _body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            raise invalid_argument("Content-Length is not a number") from None
        if length > self.server.max_body_bytes:
            remaining = length
            while remaining > 0:  # discard the body, holding at most 1 MiB of it at a time
                chunk = self.rfile.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                remaining -= len(chunk)
            raise resource_exhausted(f"the request body of {length} bytes is larger than the "
                                     f"limit of {self.server.max_body_bytes} bytes "
                                     "(--rest_api_max_body_bytes)")
        return self.rfile.read(length)

    def _deadline(self) -> float | None:
        timeout_ms = self.server.timeout_ms
        return time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None

    def _get(self) -> dict:
        path = urllib.parse.urlsplit(self.path).path
        match = _STATUS_PATH.fullmatch(path)
        if not match:
            raise invalid_argument(f"Malformed request: GET {path}")
        name, version, label, subresource = match.groups()
        if not name:
            raise invalid_argument("Missing model name in request.")
        core = self.server.core
        if subresource:
            request = get_model_metadata_pb2.GetModelMetadataRequest(
                metadata_field=["signature_def"])
            _model_spec(request.model_spec, name, version, label)
            return json_api.metadata_response(core.get_model_metadata(request))
        request = get_model_status_pb2.GetModelStatusRequest()
        _model_spec(request.model_spec, name, version, label)
        return json_api.status_response(core.get_model_status(request))

    def _post(self) -> dict:
        path = urllib.parse.urlsplit(self.path).path
        body = self._body()
        match = _PREDICT_PATH.fullmatch(path)
        if not match:
            raise invalid_argument(f"Malformed request: POST {path}")
        name, version, label, method = match.groups()
        doc = json_api.parse_body(body)
        core = self.server.core
        if "signature_name" in doc and not isinstance(doc["signature_name"], str):
            raise invalid_argument("'signature_name' must be a string")
        if method.lower() == "predict":
            request = predict_pb2.PredictRequest()
            _model_spec(request.model_spec, name, version, label)
            request.model_spec.signature_name = doc.get("signature_name", "")
            servable = core.manager.servable(request.model_spec)
            signature_name = request.model_spec.signature_name or "serving_default"
            if signature_name not in servable.signature_defs:
                raise invalid_argument(f"Serving signature name: \"{signature_name}\" not found "
                                       "in signature def")
            inputs = servable.signature_defs[signature_name].inputs
            format_ = json_api.fill_predict_request(doc, inputs, request)
            return json_api.predict_response(core.predict(request, self._deadline()), format_)
        if method.lower() == "classify":
            request = classification_pb2.ClassificationRequest()
            _model_spec(request.model_spec, name, version, label)
            json_api.fill_example_request(doc, request)
            return json_api.classify_response(core.classify(request, self._deadline()))
        request = regression_pb2.RegressionRequest()
        _model_spec(request.model_spec, name, version, label)
        json_api.fill_example_request(doc, request)
        return json_api.regress_response(core.regress(request, self._deadline()))


def start_rest_server(core: ServingCore, host: str, port: int, max_body_bytes: int,
                      timeout_ms: int) -> RestServer:
    """Starts serving REST on (host, port) in a background thread; port 0 picks a free one."""
    server = RestServer((host, port), core, max_body_bytes, timeout_ms)
    threading.Thread(target=server.serve_forever, name="rest-server", daemon=True).start()
    logger.info("REST API listening on %s:%d", host, server.server_address[1])
    return server
