"""The REST server under hostile or careless clients: client errors are a 400 with one line and
no traceback in the log, oversize bodies are refused before they are read, stalled bodies get
408, headers sent slowly are cut off, idle connections hold no thread, and connections are kept
alive."""

import http.client
import json
import logging
import os
import re
import select
import socket
import threading
import time

import numpy as np
import pytest

from tests.serving.exports import encoder_export
from tests.serving.server_helpers import running_server
from tests.serving.toy_models import write_toy_version

BODY_LIMIT = 1_000_000
X = [[1.0, 2.0, 3.0]]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("toy")
    write_toy_version(str(base), 1)
    with running_server("--model_name", "toy", "--model_base_path", str(base),
                        "--rest_api_max_body_bytes", str(BODY_LIMIT),
                        "--rest_api_read_timeout_in_ms", "1000",
                        "--rest_api_num_threads", "4") as (srv, stubs):
        stubs.rest_port = srv.rest_port
        yield stubs


def raw_exchange(port: int, data: bytes, timeout_s: float = 60,
                 until_closed: bool = False) -> bytes:
    """Sends ``data`` as is and returns the answer: once it is whole (its Content-Length of
    body read), or with ``until_closed`` only when the server has closed the connection. (After
    answering a request whose body it did not read, aiohttp lingers up to 10 s for the rest of
    it before closing, so that the client reads the answer, not a reset.)"""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
            if not until_closed and _whole(answer):
                break
    return answer


def _whole(answer: bytes) -> bool:
    head, separator, body = answer.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head)
    return bool(separator and length and len(body) >= int(length[1]))


def status_and_body(answer: bytes) -> tuple[int, bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def assert_still_serving(stubs):
    status, body = stubs.rest("/v1/models/toy:predict", {"instances": X})
    assert status == 200 and body["predictions"][0]["total"] == 6.0


def assert_no_traceback(caplog):
    for record in caplog.records:
        assert not record.exc_info and "Traceback" not in record.getMessage(), record.getMessage()


CLIENT_ERRORS = {
    "nested 100 deep": ("/v1/models/toy:predict",
                        b'{"instances": ' + b"[" * 100 + b"1" + b"]" * 100 + b"}"),
    "integer of 5000 digits": ("/v1/models/toy:predict",
                               b'{"instances": [[' + b"9" * 5000 + b", 1, 2]]}"),
    "integer beyond float32": ("/v1/models/toy:predict",
                               b'{"instances": [[' + b"9" * 4000 + b", 1, 2]]}"),
    "version of 30 nines": ("/v1/models/toy/versions/" + "9" * 30 + ":predict",
                            json.dumps({"instances": X}).encode()),
    "example feature beyond int64": ("/v1/models/toy:classify", json.dumps(
        {"signature_name": "classify", "examples": [{"x": 2**70}]}).encode()),
}


@pytest.mark.parametrize("case", sorted(CLIENT_ERRORS))
def test_client_errors_are_400_with_one_line(server, case, caplog):
    path, body = CLIENT_ERRORS[case]
    with caplog.at_level(logging.INFO):
        status, answer = server.rest(path, body)
    assert status == 400, answer
    assert set(answer) == {"error"} and "\n" not in answer["error"], answer
    assert_no_traceback(caplog)
    assert_still_serving(server)


def test_negative_content_length_is_400(server, caplog):
    with caplog.at_level(logging.INFO):
        answer = raw_exchange(server.rest_port, b"POST /v1/models/toy:predict HTTP/1.1\r\n"
                                                b"Host: x\r\nContent-Length: -5\r\n\r\n")
    status, body = status_and_body(answer)
    assert status == 400 and b"Content-Length" in body.splitlines()[0], answer
    assert_no_traceback(caplog)
    assert any("bad HTTP request: 400 Invalid character in Content-Length" in r.getMessage()
               for r in caplog.records)
    assert_still_serving(server)


MALFORMED_HTTP = {
    "request line": b"GARBAGE\r\n\r\n",
    "header without a colon": b"GET /v1/models/toy HTTP/1.1\r\nHost x\r\n\r\n",
    "HTTP version": b"GET /v1/models/toy HTTP/9.9\r\nHost: x\r\n\r\n",
    "control character in the path": b"GET /v1/models/t\x00oy HTTP/1.1\r\nHost: x\r\n\r\n",
}


@pytest.mark.parametrize("case", sorted(MALFORMED_HTTP))
def test_malformed_http_is_400_and_closes(server, case, caplog):
    """aiohttp's parser answers these before our code sees a request, with its own plain-text
    400 (serving/README.md, Errors, says why it is not our JSON); the connection is closed
    (raw_exchange reads until it is) and the server goes on."""
    with caplog.at_level(logging.INFO):
        answer = raw_exchange(server.rest_port, MALFORMED_HTTP[case], timeout_s=30,
                              until_closed=True)
    status, body = status_and_body(answer)
    assert status == 400 and b"Content-Type: text/plain" in answer and body, answer
    assert_no_traceback(caplog)
    assert_still_serving(server)


@pytest.mark.parametrize("length", [BODY_LIMIT + 1, 10**30])
def test_declared_oversize_body_is_refused_before_it_is_read(server, length):
    # Headers only: were the server reading the body first, it would wait for bytes that never
    # come (the read timeout is 1 s here, but a 408 is not the answer expected).
    answer = raw_exchange(server.rest_port, b"POST /v1/models/toy:predict HTTP/1.1\r\nHost: x\r\n"
                                            b"Content-Length: %d\r\n\r\n" % length)
    status, body = status_and_body(answer)
    if length > 2**63:  # aiohttp's parser refuses a Content-Length beyond int64 itself
        assert status == 400, answer
    else:
        assert status == 429, answer
        assert b"--rest_api_max_body_bytes" in body
    assert_still_serving(server)


def test_chunked_body_over_the_limit_is_refused(server):
    chunk = b"x" * 100_000
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(12)) + b"0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=60) as sock:
        sock.sendall(b"POST /v1/models/toy:predict HTTP/1.1\r\nHost: x\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        try:
            sock.sendall(body)
        except OSError:  # the server may answer and close before all of it is sent
            pass
        answer = sock.recv(65536)
    status, body = status_and_body(answer)
    assert status == 429 and b"--rest_api_max_body_bytes" in body, answer
    assert_still_serving(server)


def test_stalled_body_gets_408(server):
    answer = raw_exchange(server.rest_port, b"POST /v1/models/toy:predict HTTP/1.1\r\nHost: x\r\n"
                                            b"Content-Length: 100\r\n\r\n{\"instances\"")
    status, body = status_and_body(answer)
    assert status == 408, answer
    assert b"did not arrive within 1 s" in body
    assert_still_serving(server)


def trickle_until_closed(sock: socket.socket, data: bytes, limit_s: float) -> bool:
    """Sends ``data`` a byte every 0.1 s, and on once it is all sent; True if the server closed
    the connection within ``limit_s`` without answering."""
    deadline = time.monotonic() + limit_s
    position = 0
    while time.monotonic() < deadline:
        try:
            sock.sendall(data[position:position + 1] or b"a")
        except OSError:  # reset or broken pipe: closed
            return True
        position += 1
        if select.select([sock], [], [], 0.1)[0]:
            try:
                return sock.recv(65536) == b""
            except ConnectionResetError:
                return True
    return False


@pytest.mark.parametrize("after_an_answer", [False, True])
def test_headers_sent_slowly_are_cut_off(tmp_path, after_an_answer):
    """Slowloris: a client that keeps a connection open by sending its request header a byte at
    a time is closed --rest_api_header_timeout_in_ms after the connection opened (or after its
    previous answer), however steadily the bytes come."""
    base = tmp_path / "toy"
    write_toy_version(str(base), 1)
    with running_server("--model_name", "toy", "--model_base_path", str(base),
                        "--rest_api_header_timeout_in_ms", "1000") as (srv, stubs):
        connection = http.client.HTTPConnection("127.0.0.1", srv.rest_port, timeout=30)
        connection.connect()
        if after_an_answer:
            connection.request("GET", "/v1/models/toy")
            response = connection.getresponse()
            assert response.status == 200 and response.read()
        header = b"POST /v1/models/toy:predict HTTP/1.1\r\nHost: x\r\nX-Slow: "
        assert trickle_until_closed(connection.sock, header, limit_s=20)
        connection.close()
        assert_still_serving(stubs)


def test_header_timeout_must_be_positive(tmp_path):
    from keras_bert.serving.server import ModelServer, build_flag_parser
    args = build_flag_parser().parse_args(["--model_base_path", str(tmp_path), "--rest_api_port",
                                           "8501", "--rest_api_header_timeout_in_ms", "0"])
    with pytest.raises(ValueError, match="--rest_api_header_timeout_in_ms must be > 0"):
        ModelServer(args)  # 0 would let a client hold a connection forever


def test_connections_are_kept_alive(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=30)
    sockets = set()
    for _ in range(3):
        connection.request("POST", "/v1/models/toy:predict", json.dumps({"instances": X}))
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["predictions"]
        sockets.add(id(connection.sock))
    connection.close()
    assert len(sockets) == 1  # one TCP connection carried all three


def test_idle_connections_hold_no_thread(server):
    threads_before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", server.rest_port), timeout=30)
            for _ in range(100)]
    try:
        for sock in idle[:50]:  # half of them send part of a request and stall
            sock.sendall(b"POST /v1/models/toy:predict HTTP/1.1\r\nHost: x\r\n")
        assert_still_serving(server)
        # The REST pool has 4 threads (--rest_api_num_threads); connections add none.
        assert threading.active_count() <= threads_before + 4
    finally:
        for sock in idle:
            sock.close()


def test_long_paths_are_cut_in_the_log(server, caplog):
    with caplog.at_level(logging.DEBUG):
        status, answer = server.rest("/v1/models/" + "x" * 5000, {"instances": X})
        assert status == 400 and len(answer["error"]) < 1100
        answer = raw_exchange(server.rest_port, b"GET /" + b"y" * 9000 + b" HTTP/1.1\r\n"
                                                b"Host: x\r\n\r\n")
        assert status_and_body(answer)[0] == 400
    assert caplog.records  # the overlong request line is logged, cut
    assert all(len(record.getMessage()) < 500 for record in caplog.records)


def test_ready_line_names_only_the_protocols_on(tmp_path):
    write_toy_version(str(tmp_path / "toy"), 1)
    from keras_bert.serving.server import ModelServer, build_flag_parser
    from tests.serving.server_helpers import free_port
    port = free_port()
    server = ModelServer(build_flag_parser().parse_args(
        ["--port", str(port), "--model_base_path", str(tmp_path / "toy"),
         "--file_system_poll_wait_seconds", "0"]))
    server.start()
    try:
        assert server.listening() == f"grpc 127.0.0.1:{port}"
    finally:
        server.stop(0)


def test_serve_ids_inputs_of_different_lengths_are_400(minilm_dir, caplog):
    export = encoder_export(os.path.join(minilm_dir, "vocab.txt"))
    ids = np.ones((2, 8), np.int32).tolist()
    with running_server("--model_name", "encoder", "--model_base_path",
                        os.path.dirname(export.version_dir)) as (_, stubs):
        for mask_length in (6, 1):  # 1 would broadcast and answer 200 without the check
            inputs = {"input_word_ids": ids, "input_type_ids": np.zeros((2, 8), int).tolist(),
                      "input_mask": np.ones((2, mask_length), int).tolist()}
            with caplog.at_level(logging.INFO):
                status, answer = stubs.rest("/v1/models/encoder:predict",
                                            {"signature_name": "serve_ids", "inputs": inputs})
            assert status == 400, answer
            assert "must have the same shape" in answer["error"] and "\n" not in answer["error"]
            assert_no_traceback(caplog)
        inputs["input_mask"] = ids
        status, answer = stubs.rest("/v1/models/encoder:predict",
                                    {"signature_name": "serve_ids", "inputs": inputs})
        assert status == 200 and np.shape(answer["outputs"]["sequence_output"]) == (2, 8, 64)
