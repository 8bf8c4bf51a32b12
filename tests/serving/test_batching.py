"""Dynamic batching: requests merge along dimension 0 and split back, and TF Serving's limits
(max_batch_size, max_enqueued_batches, batch_timeout_micros, allowed_batch_sizes) hold."""

import threading
import time

import grpc
import numpy as np
import pytest

from keras_bert.serving.batching import BatchScheduler
from keras_bert.serving.config import BatchingOptions
from keras_bert.serving.errors import ServingError


class Recorder:
    """A model that doubles its input and records each batch's rows; can be made to block."""

    def __init__(self):
        self.batches = []
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, inputs):
        self.gate.wait()
        self.batches.append(len(inputs["x"]))
        return {"y": inputs["x"] * 2}


def submit_all(queue, rows_per_request, deadline=None):
    results, errors = {}, {}

    def run(i, rows):
        x = np.arange(rows, dtype=np.float32)[:, None] + 100 * i
        try:
            results[i] = (x, queue.submit({"x": x}, rows, deadline))
        except ServingError as e:
            errors[i] = e
    threads = [threading.Thread(target=run, args=(i, rows))
               for i, rows in enumerate(rows_per_request)]
    for thread in threads:
        thread.start()
    return threads, results, errors


def test_requests_merge_and_split_back():
    model = Recorder()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=8, batch_timeout_micros=200_000,
                                               num_batch_threads=1))
    queue = scheduler.add_queue("m", model)
    threads, results, errors = submit_all(queue, [1, 2, 3, 2])
    for thread in threads:
        thread.join()
    scheduler.stop()
    assert not errors
    assert sum(model.batches) == 8 and len(model.batches) < 4  # merged
    for x, outputs in results.values():
        np.testing.assert_array_equal(outputs["y"], 2 * x)  # each got its own rows back


def test_full_batch_runs_without_waiting_for_the_timeout():
    model = Recorder()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, batch_timeout_micros=30_000_000,
                                               num_batch_threads=1))
    queue = scheduler.add_queue("m", model)
    start = time.monotonic()
    threads, results, _ = submit_all(queue, [2, 2])
    for thread in threads:
        thread.join(timeout=10)
    scheduler.stop()
    assert len(results) == 2 and model.batches == [4]
    assert time.monotonic() - start < 5


def test_limits():
    model = Recorder()
    options = BatchingOptions(max_batch_size=4, batch_timeout_micros=0, max_enqueued_batches=2,
                              num_batch_threads=1)
    scheduler = BatchScheduler(options)
    queue = scheduler.add_queue("m", model)
    with pytest.raises(ServingError) as error:
        queue.submit({"x": np.zeros((5, 1), np.float32)}, 5)
    assert error.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "larger than maximum input batch size 4" in error.value.message

    model.gate.clear()  # the batch thread blocks on the first batch ...
    first, _, _ = submit_all(queue, [4])
    deadline = time.monotonic() + 10
    while not model.batches and time.monotonic() < deadline and queue._batches:
        time.sleep(0.01)
    # ... so full batches pile up: two may wait, the third is refused as TF Serving does.
    queued, results, errors = submit_all(queue, [4, 4, 4])
    time.sleep(0.5)
    model.gate.set()
    for thread in first + queued:
        thread.join(timeout=10)
    scheduler.stop()
    assert len(results) == 2 and len(errors) == 1
    [refused] = errors.values()
    assert refused.code == grpc.StatusCode.UNAVAILABLE
    assert "queue to which this task was submitted is full" in refused.message


def test_expired_request_is_dropped_with_resource_exhausted():
    model = Recorder()
    model.gate.clear()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=2, num_batch_threads=1))
    queue = scheduler.add_queue("m", model)
    blocker, _, _ = submit_all(queue, [2])
    time.sleep(0.2)
    late, results, errors = submit_all(queue, [1], deadline=time.monotonic() + 0.05)
    time.sleep(0.3)
    model.gate.set()
    for thread in blocker + late:
        thread.join(timeout=10)
    scheduler.stop()
    assert not results and errors[0].code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_allowed_batch_sizes_pad_and_shapes_do_not_mix():
    model = Recorder()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=8, allowed_batch_sizes=(4, 8),
                                               num_batch_threads=1))
    queue = scheduler.add_queue("m", model)
    outputs = queue.submit({"x": np.ones((3, 1), np.float32)}, 3)
    assert model.batches == [4] and outputs["y"].shape == (3, 1)  # padded to 4, cut back to 3
    model.gate.clear()
    wide = np.ones((1, 2), np.float32)
    threads, results, _ = submit_all(queue, [1, 1])
    extra = threading.Thread(target=lambda: results.__setitem__(
        "wide", (wide, queue.submit({"x": wide}, 1))))
    extra.start()
    time.sleep(0.2)
    model.gate.set()
    for thread in threads + [extra]:
        thread.join(timeout=10)
    scheduler.stop()
    np.testing.assert_array_equal(results["wide"][1]["y"], 2 * wide)
    assert len(results) == 3


def test_stop_runs_what_is_queued_then_refuses():
    model = Recorder()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=8, batch_timeout_micros=5_000_000,
                                               num_batch_threads=1))
    queue = scheduler.add_queue("m", model)
    threads, results, _ = submit_all(queue, [1, 1])
    time.sleep(0.2)
    scheduler.stop()  # does not wait out the 5 s timeout: the queued batch runs now
    for thread in threads:
        thread.join(timeout=10)
    assert len(results) == 2 and sum(model.batches) == 2
    with pytest.raises(ServingError) as error:
        queue.submit({"x": np.ones((1, 1), np.float32)}, 1)
    assert error.value.code == grpc.StatusCode.UNAVAILABLE


def test_a_closed_queue_is_dropped_once_drained():
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, num_batch_threads=1))
    kept, retired = scheduler.add_queue("v2", Recorder()), scheduler.add_queue("v1", Recorder())
    retired.submit({"x": np.ones((1, 1), np.float32)}, 1)
    retired.close()  # its version was unloaded
    deadline = time.monotonic() + 10
    while retired in scheduler._queues and time.monotonic() < deadline:
        time.sleep(0.01)
    assert scheduler._queues == [kept]  # no reference keeps the retired model alive
    scheduler.stop()
