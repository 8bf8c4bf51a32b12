"""TF Serving's REST API on aiohttp: JSON in, the same request protos as gRPC, JSON out, and
{"error": ...} with TF Serving's HTTP code on failure.

aiohttp's event loop (one thread) accepts connections, keeps them alive and reads bodies, so a
slow or idle client costs a socket, not a thread. Each request's work (JSON, the model call, JSON
back) runs on a fixed pool of ``num_threads`` threads; requests beyond that wait for a thread. A
connection must deliver a complete request header within ``header_timeout_s`` of opening or of
its previous answer, else it is closed (idle keep-alive connections and slowloris clients
alike); a body must arrive within ``read_timeout_s`` (else 408), and one declared larger than
``max_body_bytes`` is refused before it is read (429, RESOURCE_EXHAUSTED, as for gRPC).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import re
import threading
import time
import urllib.parse

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2,
                                     get_model_status_pb2, predict_pb2, regression_pb2)

from keras_bert.serving import json_api
from keras_bert.serving.errors import (ServingError, from_exception, invalid_argument,
                                       is_server_fault, resource_exhausted)
from keras_bert.serving.service import ServingCore

logger = logging.getLogger(__name__)

# tensorflow_serving/model_servers/http_rest_api_util.cc
_PREDICT_PATH = re.compile(r"/v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?"
                           r":(classify|regress|predict)", re.IGNORECASE)
_STATUS_PATH = re.compile(r"/v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?"
                          r"(?:/(metadata))?", re.IGNORECASE)
# Listen-queue length asked of the kernel (which caps it at net.core.somaxconn).
LISTEN_BACKLOG = 1024
# What a log line echoes of a client's request path at most.
MAX_LOGGED_PATH_CHARS = 200


def loggable(path: str) -> str:
    """``path`` cut to MAX_LOGGED_PATH_CHARS for the log (a client chooses its length)."""
    if len(path) <= MAX_LOGGED_PATH_CHARS:
        return path
    return f"{path[:MAX_LOGGED_PATH_CHARS]}...({len(path)} characters)"


class _OneLineClientErrors(logging.Filter):
    """aiohttp logs a malformed request (bad Content-Length, an overlong header line) with its
    traceback; it is the client's error, so it becomes one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            reason = " ".join(str(error.message).split())
            record.msg = "bad HTTP request: %d %s"
            record.args = (error.code, reason[:MAX_LOGGED_PATH_CHARS])
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_ONE_LINE_CLIENT_ERRORS = _OneLineClientErrors()


def _json_response(status: int, body: bytes, close: bool = False) -> web.Response:
    response = web.Response(status=status, body=body, content_type="application/json")
    if close:  # the body was not read, so the connection cannot carry another request
        response.force_close()
    return response


def _error_body(message: str) -> bytes:
    return json.dumps({"error": message}).encode("utf-8")


class RestServer:
    """The REST API on (host, port) (0 picks a free port; ``self.port`` is the one bound).

    Args:
        core: answers the requests.
        host, port: where to listen.
        max_body_bytes: larger bodies are refused (RESOURCE_EXHAUSTED, 429).
        timeout_ms: a request still waiting for a batch after this long fails (0: no limit).
        read_timeout_s: a body not received within this long is answered 408.
        num_threads: requests worked on at once; more wait for a free thread.
        drain_timeout_s: on shutdown, how long in-flight requests may take to finish.
        header_timeout_s: a connection that has not sent a complete request header this long
            after it opened, or after its previous answer, is closed (> 0). This is aiohttp's
            keep-alive timer, which runs from the moment a connection opens and closes it
            whenever no complete request has arrived by then; aiohttp has no hook to answer
            408 first.
    """

    def __init__(self, core: ServingCore, host: str, port: int, *, max_body_bytes: int,
                 timeout_ms: int, read_timeout_s: float, num_threads: int,
                 drain_timeout_s: float = 30.0, header_timeout_s: float = 30.0):
        if header_timeout_s <= 0:
            raise ValueError(f"the REST header timeout must be > 0 s, got {header_timeout_s}")
        self.core = core
        self.max_body_bytes = max_body_bytes
        self.timeout_ms = timeout_ms
        self.read_timeout_s = read_timeout_s
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=num_threads, thread_name_prefix="rest")
        self._loop = asyncio.new_event_loop()
        self._shutdown: concurrent.futures.Future | None = None
        self._drain_timeout_s = drain_timeout_s
        app = web.Application(client_max_size=max_body_bytes)
        app.router.add_route("*", "/{path:.*}", self._handle)
        http_logger = logging.getLogger(f"{__name__}.http")
        http_logger.addFilter(_ONE_LINE_CLIENT_ERRORS)  # once: the same filter every time
        self._runner = web.AppRunner(app, access_log=None, logger=http_logger,
                                     keepalive_timeout=header_timeout_s, handle_signals=False,
                                     shutdown_timeout=drain_timeout_s)
        self._thread = threading.Thread(target=self._loop.run_forever, name="rest-server",
                                        daemon=True)
        try:
            self.port = self._loop.run_until_complete(self._listen(host, port))
        except OSError as e:
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()
            self._executor.shutdown()
            raise OSError(f"cannot listen for REST on {host}:{port}: {e.strerror or e}") from None
        self._thread.start()
        logger.info("REST API listening on %s:%d", host, self.port)

    async def _listen(self, host: str, port: int) -> int:
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, backlog=LISTEN_BACKLOG)
        await site.start()
        return self._runner.addresses[0][1]

    def shutdown(self) -> concurrent.futures.Future:
        """Stops accepting at once; in-flight requests get ``drain_timeout_s`` to finish (their
        connections close after the answer). Returns a future that is done when they have."""
        if self._shutdown is None:
            self._shutdown = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
        return self._shutdown

    def stop(self) -> None:
        """``shutdown()`` (unless begun already), waited for; then the loop and the threads
        end."""
        try:
            self.shutdown().result(timeout=self._drain_timeout_s + 5)
        except concurrent.futures.TimeoutError:
            logger.warning("REST requests still running after %.0f s; stopping anyway",
                           self._drain_timeout_s)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._executor.shutdown(wait=True)

    # ----------------------------------------------------------------------------- requests
    async def _handle(self, request: web.Request) -> web.Response:
        if request.method not in ("GET", "POST"):
            return _json_response(501, _error_body(
                f"HTTP method {request.method} is not supported; use GET or POST"))
        deadline = (time.monotonic() + self.timeout_ms / 1000) if self.timeout_ms > 0 else None
        path = request.raw_path.split("?", 1)[0]
        body = b""
        if request.method == "POST":
            length = request.content_length
            if length is not None and length > self.max_body_bytes:
                return _json_response(429, _error_body(self._too_large(length).message), close=True)
            try:
                async with asyncio.timeout(self.read_timeout_s):
                    body = await request.read()
            except TimeoutError:
                return _json_response(408, _error_body(
                    f"the request body did not arrive within {self.read_timeout_s:g} s "
                    "(--rest_api_read_timeout_in_ms)"), close=True)
            except web.HTTPRequestEntityTooLarge:  # a chunked body ran over the limit
                return _json_response(429, _error_body(self._too_large(None).message), close=True)
        status, data = await self._loop.run_in_executor(
            self._executor, self._answer, request.method, path, body, deadline)
        return _json_response(status, data)

    def _too_large(self, length: int | None) -> ServingError:
        size = f"of {length} bytes " if length is not None else ""
        return resource_exhausted(f"the request body {size}is larger than the limit of "
                                  f"{self.max_body_bytes} bytes (--rest_api_max_body_bytes)")

    def _answer(self, method: str, path: str, body: bytes,
                deadline: float | None) -> tuple[int, bytes]:
        """(HTTP status, JSON bytes) for one request; runs on a worker thread."""
        try:
            if method == "GET":
                result = self._get(path)
            else:
                result = self._post(path, body, deadline)
            return 200, json.dumps(result).encode("utf-8")
        except Exception as e:
            error = from_exception(e)
            if is_server_fault(e):
                logger.exception("REST %s %s failed", method, loggable(path))
            return error.http_status, _error_body(error.message)

    def _get(self, path: str) -> dict:
        match = _STATUS_PATH.fullmatch(path)
        if not match:
            raise invalid_argument(f"Malformed request: GET {path}")
        name, version, label, subresource = match.groups()
        if not name:
            raise invalid_argument("Missing model name in request.")
        if subresource:
            request = get_model_metadata_pb2.GetModelMetadataRequest(
                metadata_field=["signature_def"])
            _model_spec(request.model_spec, name, version, label)
            return json_api.metadata_response(self.core.get_model_metadata(request))
        request = get_model_status_pb2.GetModelStatusRequest()
        _model_spec(request.model_spec, name, version, label)
        return json_api.status_response(self.core.get_model_status(request))

    def _post(self, path: str, body: bytes, deadline: float | None) -> dict:
        match = _PREDICT_PATH.fullmatch(path)
        if not match:
            raise invalid_argument(f"Malformed request: POST {path}")
        name, version, label, method = match.groups()
        doc = json_api.parse_body(body)
        core = self.core
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
            return json_api.predict_response(core.predict(request, deadline), format_)
        if method.lower() == "classify":
            request = classification_pb2.ClassificationRequest()
            _model_spec(request.model_spec, name, version, label)
            json_api.fill_example_request(doc, request)
            return json_api.classify_response(core.classify(request, deadline))
        request = regression_pb2.RegressionRequest()
        _model_spec(request.model_spec, name, version, label)
        json_api.fill_example_request(doc, request)
        return json_api.regress_response(core.regress(request, deadline))


_MAX_VERSION = 2**63 - 1  # ModelSpec.version is an int64


def _model_spec(spec, name: str, version: str | None, label: str | None) -> None:
    spec.name = urllib.parse.unquote(name)
    if version is not None:
        if len(version) > len(str(_MAX_VERSION)) or int(version) > _MAX_VERSION:
            raise invalid_argument(f"version {version[:40]} is not a 64-bit integer")
        spec.version.value = int(version)
    if label is not None:
        spec.version_label = urllib.parse.unquote(label)
