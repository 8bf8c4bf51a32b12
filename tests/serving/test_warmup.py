"""SavedModel warm-up as TF Serving does it: export writes assets.extra/tf_serving_warmup_requests
(PredictionLogs that tensorflow-serving-api parses), and the server replays a version's file
before it serves that version; a warm-up request that fails fails the load, so the version
being served stays."""

import logging
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

from keras_bert.export.warmup import BATCH_SIZES, WARMUP_FILE
from tests.serving.exports import SEQ_LENGTH, encoder_export
from tests.serving.server_helpers import running_server
from tests.serving.toy_models import write_toy_version


def read_warmup(version_dir: str) -> list:
    path = os.path.join(version_dir, WARMUP_FILE)
    return [prediction_log_pb2.PredictionLog.FromString(record.numpy())
            for record in tf.data.TFRecordDataset(path)]


def test_export_writes_warmup_requests_for_each_signature_batch_and_length(minilm_dir):
    export = encoder_export(os.path.join(minilm_dir, "vocab.txt"))
    logs = read_warmup(export.version_dir)
    assert {log.WhichOneof("log_type") for log in logs} == {"predict_log"}
    shapes: dict[str, set] = {}
    for log in logs:
        request = log.predict_log.request
        name = request.model_spec.signature_name
        if name == "serving_default":
            texts = tf.make_ndarray(request.inputs["text"])
            lengths = export.preprocessor(tf.constant(texts))["input_mask"].numpy().sum(1)
            assert len(set(lengths)) == 1  # every text of a batch packs to one length
            shapes.setdefault(name, set()).add((len(texts), int(lengths[0])))
        else:
            arrays = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
            assert len({a.shape for a in arrays.values()}) == 1
            assert (arrays["input_mask"] == 1).all() and (arrays["input_type_ids"] == 0).all()
            shapes.setdefault(name, set()).add(arrays["input_word_ids"].shape)
    # Raw text pads to the batch's longest text, a multiple of 8 up to seq_length (24 here).
    expected = {(batch, length) for batch in BATCH_SIZES for length in (8, 16, SEQ_LENGTH)}
    assert shapes == {"serving_default": expected, "serve_ids": expected}


def write_warmup(version_dir: str, requests: list) -> None:
    path = os.path.join(version_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for request in requests:
            writer.write(prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)).SerializeToString())


def toy_request(signature: str = "", rows: int = 2, name: str = "x"):
    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = signature
    request.inputs[name].CopyFrom(tf.make_tensor_proto(np.ones((rows, 3), np.float32)))
    return request


def served_version(stubs) -> int:
    request = toy_request(rows=1)
    request.model_spec.name = "toy"
    return stubs.prediction.Predict(request, timeout=30).model_spec.version.value


def test_server_replays_warmup_before_a_version_serves(tmp_path, caplog):
    base = tmp_path / "toy"
    write_toy_version(str(base), 1)
    with running_server("--model_name", "toy", "--model_base_path", str(base),
                        "--file_system_poll_wait_seconds", "0") as (server, stubs):
        # Version 2's warm-up request names an input the model does not have: the load fails
        # and version 1 keeps serving.
        write_warmup(write_toy_version(str(base), 2), [toy_request(), toy_request(name="z")])
        with caplog.at_level(logging.INFO):
            server.manager.poll()
        assert served_version(stubs) == 1
        assert any("loading toy version 2" in r.getMessage() and "input size does not match"
                   in r.getMessage() for r in caplog.records)

        write_warmup(write_toy_version(str(base), 3), [toy_request(), toy_request("", 8)])
        caplog.clear()
        with caplog.at_level(logging.INFO):
            server.manager.poll()
        assert served_version(stubs) == 3
        messages = [r.getMessage() for r in caplog.records]
        warmed = next(i for i, m in enumerate(messages)
                      if m.startswith("warmed up toy version 3 with 2 requests"))
        assert warmed < messages.index("serving toy version 3")


def test_unsupported_warmup_records_fail_the_load(tmp_path):
    from keras_bert.serving.servable import Servable
    version_dir = write_toy_version(str(tmp_path / "toy"), 1)
    path = os.path.join(version_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path))
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(prediction_log_pb2.PredictionLog(
            session_run_log=prediction_log_pb2.SessionRunLog()).SerializeToString())
    with pytest.raises(ValueError, match="session_run_log"):
        Servable("toy", 1, version_dir)


def test_requests_run_exactly_what_the_warmup_ran(tmp_path, monkeypatch):
    """A request of a batch size a warm-up record covered, batched or not, makes the very
    Session.run call the replay made (the same feeds in the same order, the same fetches, the
    same shapes), so it finds the executor and kernels that the replay prepared."""
    from keras_bert.serving.batching import BatchScheduler
    from keras_bert.serving.config_files import BatchingOptions
    from keras_bert.serving.servable import Servable
    version_dir = write_toy_version(str(tmp_path / "toy"), 1)
    write_warmup(version_dir, [toy_request(rows=1), toy_request(rows=4)])
    runs = []
    run = tf.compat.v1.Session.run

    def recording_run(session, fetches, feed_dict=None, **kwargs):
        if isinstance(fetches, dict):  # a signature's call (the loader fetches op names)
            runs.append((tuple(fetches.items()),
                         tuple((name, value.shape) for name, value in feed_dict.items())))
        return run(session, fetches, feed_dict, **kwargs)
    monkeypatch.setattr(tf.compat.v1.Session, "run", recording_run)
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=8, num_batch_threads=1))
    try:
        for batching in (None, scheduler):
            runs.clear()
            servable = Servable("toy", 1, version_dir, batching)
            replayed = list(runs)
            assert len(replayed) == 2
            for rows in (1, 4):
                runs.clear()
                servable.run("serving_default", {"x": np.ones((rows, 3), np.float32)}, rows)
                assert runs and runs[0] in replayed
            servable.close()
    finally:
        scheduler.stop()
