"""TF Serving's gRPC services, PredictionService and ModelService, over the shared ServingCore."""

from __future__ import annotations

import logging
import time
from concurrent import futures

import grpc
from tensorflow_serving.apis import (model_management_pb2, model_service_pb2_grpc,
                                     prediction_service_pb2_grpc)

from keras_bert.serving.errors import from_exception, is_server_fault
from keras_bert.serving.service import ServingCore

logger = logging.getLogger(__name__)


def _call(context, method, request, with_deadline: bool = True):
    """Runs ``method``; a failure aborts the RPC with the error's status code and message."""
    try:
        if not with_deadline:
            return method(request)
        remaining_s = context.time_remaining()
        deadline = time.monotonic() + remaining_s if remaining_s is not None else None
        return method(request, deadline)
    except Exception as e:
        error = from_exception(e)
        if is_server_fault(e):
            logger.exception("gRPC request failed")
        context.abort(error.code, error.message)


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    """tensorflow.serving.PredictionService: Predict, Classify, Regress, GetModelMetadata."""

    def __init__(self, core: ServingCore):
        self.core = core

    def Predict(self, request, context):
        return _call(context, self.core.predict, request)

    def Classify(self, request, context):
        return _call(context, self.core.classify, request)

    def Regress(self, request, context):
        return _call(context, self.core.regress, request)

    def GetModelMetadata(self, request, context):
        return _call(context, self.core.get_model_metadata, request, with_deadline=False)


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
    """tensorflow.serving.ModelService: GetModelStatus and HandleReloadConfigRequest."""

    def __init__(self, core: ServingCore):
        self.core = core

    def GetModelStatus(self, request, context):
        return _call(context, self.core.get_model_status, request, with_deadline=False)

    def HandleReloadConfigRequest(self, request, context):
        """Switches to request.config; a failure is the RPC's status, as in TF Serving."""
        _call(context, self.core.manager.reload_config, request.config, with_deadline=False)
        return model_management_pb2.ReloadConfigResponse()


class GrpcServer:
    """Both services on host:port (0 picks a free port), with message-size limits.

    Args:
        core: answers the requests.
        host, port: where to listen; ``self.port`` is the port bound.
        max_workers: RPCs handled at once.
        max_message_bytes: larger requests fail with RESOURCE_EXHAUSTED (gRPC's own check).
        ssl_config: an SSLConfig for TLS, as tensorflow_model_server's --ssl_config_file
            (client certificates signed by custom_ca required when client_verify); None:
            plaintext.
    """

    def __init__(self, core: ServingCore, host: str, port: int, max_workers: int,
                 max_message_bytes: int, ssl_config=None):
        self._executor = futures.ThreadPoolExecutor(max_workers=max_workers,
                                                    thread_name_prefix="grpc")
        self._server = grpc.server(
            self._executor,
            options=[("grpc.max_receive_message_length", max_message_bytes),
                     ("grpc.max_send_message_length", max_message_bytes),
                     ("grpc.so_reuseport", 0)])
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            PredictionService(core), self._server)
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(core),
                                                                  self._server)
        try:
            if ssl_config is None:
                self.port = self._server.add_insecure_port(f"{host}:{port}")
            else:
                self.port = self._server.add_secure_port(f"{host}:{port}", _credentials(ssl_config))
        except RuntimeError:  # grpcio >= 1.60 raises where older versions returned 0
            self.port = 0
        if self.port == 0:
            raise OSError(f"cannot listen for gRPC on {host}:{port}; is the port in use?")
        self._server.start()
        logger.info("gRPC listening on %s:%d%s", host, self.port,
                    "" if ssl_config is None else " (TLS)")

    def stop(self, grace_s: float) -> None:
        """Refuses new RPCs at once, gives in-flight ones ``grace_s``, then ends the threads."""
        self._server.stop(grace_s).wait()
        self._executor.shutdown(wait=True)


def _credentials(ssl_config) -> grpc.ServerCredentials:
    """gRPC server credentials for an SSLConfig, with TF Serving's meaning of its fields."""
    return grpc.ssl_server_credentials(
        [(ssl_config.server_key.encode(), ssl_config.server_cert.encode())],
        root_certificates=ssl_config.custom_ca.encode() or None,
        require_client_auth=ssl_config.client_verify)
