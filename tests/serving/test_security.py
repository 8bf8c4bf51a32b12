"""What protects the server: reloads only from the model roots given at start, a warning when it
binds a non-loopback address, and gRPC over TLS from TF Serving's --ssl_config_file (tested with
real TLS clients and certificates made here)."""

import datetime
import ipaddress
import logging
import os
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import (model_management_pb2, predict_pb2,
                                     prediction_service_pb2_grpc)

from keras_bert.serving import config_files as config_lib
from keras_bert.serving.server import ModelServer, build_flag_parser
from tests.serving.server_helpers import free_port, running_server
from tests.serving.toy_models import write_toy_version


def predict(stub, model: str = "toy") -> int:
    """The version that answers a Predict (the toy model adds its version to 2x)."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.zeros((1, 3), np.float32)))
    return int(tf.make_ndarray(stub.Predict(request, timeout=30).outputs["y"])[0, 0])


def reload_request(**base_paths) -> model_management_pb2.ReloadConfigRequest:
    request = model_management_pb2.ReloadConfigRequest()
    for name, path in base_paths.items():
        request.config.model_config_list.config.add(name=name, base_path=str(path),
                                                    model_platform="tensorflow")
    return request


@pytest.fixture
def models(tmp_path):
    """models/toy (version 1), models/other (version 2) and, outside, elsewhere/evil (3)."""
    write_toy_version(str(tmp_path / "models" / "toy"), 1)
    write_toy_version(str(tmp_path / "models" / "other"), 2)
    write_toy_version(str(tmp_path / "elsewhere" / "evil"), 3)
    return tmp_path


def test_reloads_only_from_the_roots_given_at_start(models):
    evil = models / "elsewhere" / "evil"
    os.symlink(evil, models / "models" / "link")
    with running_server("--model_name", "toy", "--model_base_path",
                        str(models / "models" / "toy")) as (_, stubs):
        for path in (evil, models / "models" / ".." / "elsewhere" / "evil",
                     models / "models" / "link"):
            code, details = stubs.grpc_error(stubs.model.HandleReloadConfigRequest,
                                             reload_request(toy=path))
            assert code == grpc.StatusCode.PERMISSION_DENIED, details
            assert "outside the model roots" in details and "--unsafe_reload_any_path" in details
            assert predict(stubs.prediction) == 1  # nothing was unloaded
        # A sibling of the base path given at start is under the root: it loads.
        stubs.model.HandleReloadConfigRequest(
            reload_request(toy=models / "models" / "toy", other=models / "models" / "other"),
            timeout=60)
        assert predict(stubs.prediction, "other") == 2


def test_unsafe_flag_allows_any_path(models):
    with running_server("--model_name", "toy", "--model_base_path",
                        str(models / "models" / "toy"), "--unsafe_reload_any_path") as (_, stubs):
        stubs.model.HandleReloadConfigRequest(
            reload_request(evil=models / "elsewhere" / "evil"), timeout=60)
        assert predict(stubs.prediction, "evil") == 3


def test_a_config_file_reread_by_polling_adds_its_roots(models):
    config = models / "models.config"
    config.write_text(text_format.MessageToString(reload_request(
        toy=models / "models" / "toy").config))
    with running_server("--model_config_file", str(config),
                        "--model_config_file_poll_wait_seconds", "0.2") as (server, stubs):
        assert server.manager.roots == [str((models / "models").resolve())]
        config.write_text(text_format.MessageToString(reload_request(
            evil=models / "elsewhere" / "evil").config))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the poller re-reads the file and loads "evil"
            try:
                assert predict(stubs.prediction, "evil") == 3
                break
            except grpc.RpcError:
                time.sleep(0.1)
        assert str((models / "elsewhere").resolve()) in server.manager.roots
        assert predict(stubs.prediction, "evil") == 3
        # Now the RPC may name that directory too: it is not refused (PERMISSION_DENIED above).
        # What it loads is not asked for afterwards: the poller puts the file's config back
        # within 0.2 s, as TF Serving's does (a CI run under load lost "toy" that way).
        response = stubs.model.HandleReloadConfigRequest(reload_request(
            evil=models / "elsewhere" / "evil", toy=models / "models" / "toy"), timeout=60)
        assert response.status.error_code == 0, response.status.error_message


def test_remote_roots_compare_by_prefix():
    config = reload_request(a="gs://bucket/models/a").config
    roots = config_lib.model_roots(config)
    assert roots == {"gs://bucket/models/"}
    assert config_lib.paths_outside(reload_request(b="gs://bucket/models/b").config, roots) == []
    for outside in ("gs://bucket/models/../secrets/x", "gs://bucket/modelsx/b", "/models/b"):
        assert config_lib.paths_outside(reload_request(b=outside).config, roots) == [outside]


@pytest.mark.parametrize("host, warns", [("0.0.0.0", True), ("192.0.2.1", True),
                                          ("127.0.0.1", False), ("localhost", False),
                                          ("::1", False)])
def test_non_loopback_host_warns_once_naming_the_reload_rpc(models, caplog, host, warns):
    with caplog.at_level(logging.WARNING):
        ModelServer(build_flag_parser().parse_args(
            ["--host", host, "--model_base_path", str(models / "models" / "toy")]))
    warnings = [r.getMessage() for r in caplog.records if "loopback" in r.getMessage()]
    assert len(warnings) == (1 if warns else 0)
    if warns:
        assert "HandleReloadConfigRequest" in warnings[0] and "\n" not in warnings[0]


# ------------------------------------------------------------------------------------ TLS
def _certificates(tmp_path) -> dict[str, bytes]:
    """PEM of a CA, a server certificate for 127.0.0.1 and a client certificate, both
    signed by the CA, and their keys."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(common_name: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    def issue(subject: str, key, issuer_key, issuer: str, ca: bool, san=None):
        builder = (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(name(issuer))
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if san is not None:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    def pem_key(key) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    ca = issue("test CA", ca_key, ca_key, "test CA", ca=True)
    server = issue("localhost", server_key, ca_key, "test CA", ca=False,
                   san=[x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client = issue("client", client_key, ca_key, "test CA", ca=False)
    pem = serialization.Encoding.PEM
    return {"ca": ca.public_bytes(pem), "server_cert": server.public_bytes(pem),
            "server_key": pem_key(server_key), "client_cert": client.public_bytes(pem),
            "client_key": pem_key(client_key)}


def _ssl_config_file(tmp_path, certificates, client_verify: bool) -> str:
    ssl_config = config_lib.SSLConfig(server_key=certificates["server_key"].decode(),
                                      server_cert=certificates["server_cert"].decode())
    if client_verify:
        ssl_config.custom_ca = certificates["ca"].decode()
        ssl_config.client_verify = True
    path = tmp_path / f"ssl_config_{client_verify}.txt"
    path.write_text(text_format.MessageToString(ssl_config))
    return str(path)


def _stub(port: int, credentials=None):
    target = f"127.0.0.1:{port}"
    channel = (grpc.secure_channel(target, credentials) if credentials is not None
               else grpc.insecure_channel(target))
    return channel, prediction_service_pb2_grpc.PredictionServiceStub(channel)


def _fails(stub) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as error:
        predict(stub)
    return error.value.code()


def test_grpc_tls_with_and_without_client_verification(models):
    certificates = _certificates(models)
    base = str(models / "models" / "toy")
    server_only = grpc.ssl_channel_credentials(root_certificates=certificates["ca"])
    with_client_cert = grpc.ssl_channel_credentials(
        root_certificates=certificates["ca"], private_key=certificates["client_key"],
        certificate_chain=certificates["client_cert"])
    for client_verify in (False, True):
        port = free_port()
        server = ModelServer(build_flag_parser().parse_args(
            ["--port", str(port), "--model_name", "toy", "--model_base_path", base,
             "--file_system_poll_wait_seconds", "0",
             "--ssl_config_file", _ssl_config_file(models, certificates, client_verify)]))
        server.start()
        channels = []
        try:
            channel, plaintext = _stub(port)
            channels.append(channel)
            assert _fails(plaintext) == grpc.StatusCode.UNAVAILABLE
            channel, tls = _stub(port, server_only)
            channels.append(channel)
            if client_verify:
                assert _fails(tls) == grpc.StatusCode.UNAVAILABLE  # no client certificate
            else:
                assert predict(tls) == 1
            channel, mutual = _stub(port, with_client_cert)
            channels.append(channel)
            assert predict(mutual) == 1
        finally:
            for channel in channels:
                channel.close()
            server.stop(0)


def test_ssl_config_file_is_checked_at_start(models):
    path = models / "ssl.txt"
    path.write_text('server_key: "x" server_cert: "y" client_verify: true')
    with pytest.raises(ValueError, match="client_verify needs custom_ca"):
        config_lib.load_ssl_config(str(path))
    path.write_text('server_cert: "y"')
    with pytest.raises(ValueError, match="server_key and server_cert"):
        config_lib.load_ssl_config(str(path))
