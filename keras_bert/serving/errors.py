"""Request errors with TF Serving's status codes, and the HTTP codes its REST API maps them to."""

from __future__ import annotations

import grpc

# tensorflow_serving/model_servers/http_server.cc: ToHTTPStatusCode.
HTTP_STATUS = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}
_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}
# TF Serving cuts error messages to this many characters (grpc_status_util.cc).
MAX_MESSAGE_CHARS = 1024


class ServingError(Exception):
    """A request failed with a gRPC status ``code`` and a message for the client.

    >>> ServingError(grpc.StatusCode.NOT_FOUND, "no model").http_status
    404
    """

    def __init__(self, code: grpc.StatusCode, message: str):
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[:MAX_MESSAGE_CHARS] + "...TRUNCATED"
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 500)

    @property
    def code_number(self) -> int:
        return self.code.value[0]


def invalid_argument(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.NOT_FOUND, message)


def failed_precondition(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.FAILED_PRECONDITION, message)


def permission_denied(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.PERMISSION_DENIED, message)


def resource_exhausted(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.RESOURCE_EXHAUSTED, message)


def unavailable(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.UNAVAILABLE, message)


class Unloaded(ServingError):
    """UNAVAILABLE: the version a request was given to was retired before it ran."""

    def __init__(self, message: str):
        super().__init__(grpc.StatusCode.UNAVAILABLE, message)


def from_exception(error: BaseException) -> ServingError:
    """The ServingError for any exception raised while serving a request.

    TensorFlow's errors carry canonical codes (the same numbers as gRPC's); anything else is an
    INTERNAL error, since it is a fault of the server or the model, not of the request.
    """
    import tensorflow as tf  # the error is TensorFlow's only where TensorFlow runs

    if isinstance(error, ServingError):
        return error
    if isinstance(error, tf.errors.OpError):
        code = _BY_NUMBER.get(error.error_code, grpc.StatusCode.UNKNOWN)
        # One line: TensorFlow appends the graph node ("\n\t [[{{node ...}}]]") for its logs.
        message = " ".join(error.message.split("\n\t [[")[0].split())
        return ServingError(code, message)
    return ServingError(grpc.StatusCode.INTERNAL, f"{type(error).__name__}: {error}")


def is_server_fault(error: BaseException) -> bool:
    """Whether ``error``, raised while answering a request, is worth a traceback in the log:
    not a ServingError (those are decided answers) nor TensorFlow rejecting the request's
    values (INVALID_ARGUMENT, e.g. inputs of different lengths)."""
    if isinstance(error, ServingError):
        return False
    return from_exception(error).code != grpc.StatusCode.INVALID_ARGUMENT
