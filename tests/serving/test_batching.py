"""Dynamic batching: requests merge along dimension 0 and split back, and TF Serving's limits
(max_batch_size, max_enqueued_batches, batch_timeout_micros, allowed_batch_sizes) hold.

No test sleeps for a fixed time: each waits for what it needs (a batch reaching the model, a
queue's depth, a thread ending) under a generous deadline, so a loaded machine makes them slower,
never wrong."""

import threading
import time

import grpc
import numpy as np
import pytest

from keras_bert.serving.batching import BatchScheduler
from keras_bert.serving.config_files import BatchingOptions
from keras_bert.serving.errors import ServingError
from tests.helpers import wait_until

HOUR_MICROS = 3_600_000_000  # a batch timeout no test waits out: only a bug would wait for it


class Recorder:
    """A model that doubles its input and records each batch's rows; can be made to block.

    ``entered`` is set when a batch reaches the model (before the gate, if the gate is shut)."""

    def __init__(self):
        self.batches = []
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.gate.set()

    def block(self):
        """Shuts the gate: the next batch enters (``entered`` is set) and waits there."""
        self.entered.clear()
        self.gate.clear()

    def wait_entered(self):
        """Waits until a batch is in the model (with the gate shut: the batch thread is busy)."""
        assert self.entered.wait(60), "no batch reached the model within 60 s"

    def __call__(self, inputs):
        self.entered.set()
        self.gate.wait()
        self.batches.append(len(inputs["x"]))
        return {"y": inputs["x"] * 2}


def submit_all(queue, rows_per_request, deadline=None, width=1):
    """Submits each request ([rows, width] floats) from its own thread; returns the threads and
    the results and errors by request index, filled in as the requests end."""
    results, errors = {}, {}

    def run(i, rows):
        x = np.arange(rows * width, dtype=np.float32).reshape(rows, width) + 100 * i
        try:
            results[i] = (x, queue.submit({"x": x}, rows, deadline))
        except ServingError as e:
            errors[i] = e
    # Daemons: a request a bug leaves waiting fails its test instead of hanging the run.
    threads = [threading.Thread(target=run, args=(i, rows), daemon=True)
               for i, rows in enumerate(rows_per_request)]
    for thread in threads:
        thread.start()
    return threads, results, errors


def join_all(threads, timeout_s=60):
    """Joins ``threads``; fails naming those still running after ``timeout_s`` in all."""
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    alive = [thread.name for thread in threads if thread.is_alive()]
    assert not alive, f"still running after {timeout_s} s: {alive}"


def queued(queue, count):
    """Waits until ``count`` requests wait in ``queue`` (none taken by a batch thread)."""
    wait_until(lambda: queue.num_enqueued_tasks == count, 60,
               lambda: f"{queue.num_enqueued_tasks} requests queued, waited for {count}")


def test_requests_merge_and_split_back():
    model = Recorder()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=8, batch_timeout_micros=200_000,
                                               num_batch_threads=1))
    queue = scheduler.add_queue("m", model)
    model.block()  # the batch thread is busy with a first request ...
    blocker, _, _ = submit_all(queue, [1])
    model.wait_entered()
    threads, results, errors = submit_all(queue, [1, 2, 3, 2])
    queued(queue, 4)  # ... while the others gather
    model.gate.set()
    join_all(blocker + threads)
    scheduler.stop()
    assert not errors
    assert model.batches == [1, 8]  # the four merged into one batch
    for x, outputs in results.values():
        np.testing.assert_array_equal(outputs["y"], 2 * x)  # each got its own rows back


def test_full_batch_runs_without_waiting_for_the_timeout():
    model = Recorder()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, batch_timeout_micros=HOUR_MICROS,
                                               num_batch_threads=1))
    queue = scheduler.add_queue("m", model)
    threads, results, _ = submit_all(queue, [2, 2])
    join_all(threads)  # before stop(), which would run the batch anyway
    scheduler.stop()
    assert len(results) == 2 and model.batches == [4]


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

    model.block()  # the batch thread blocks on the first batch ...
    first, _, _ = submit_all(queue, [4])
    model.wait_entered()
    # ... so full batches pile up: two may wait, the third is refused as TF Serving does.
    waiting, results, errors = submit_all(queue, [4, 4, 4])
    wait_until(lambda: queue.num_enqueued_tasks + len(errors) == 3, 60,
               lambda: f"of 3 requests {queue.num_enqueued_tasks} queued, {len(errors)} refused")
    model.gate.set()
    join_all(first + waiting)
    scheduler.stop()
    assert len(results) == 2 and len(errors) == 1
    [refused] = errors.values()
    assert refused.code == grpc.StatusCode.UNAVAILABLE
    assert "queue to which this task was submitted is full" in refused.message


def test_expired_request_is_dropped_with_resource_exhausted():
    model = Recorder()
    model.block()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=2, num_batch_threads=1))
    queue = scheduler.add_queue("m", model)
    blocker, _, _ = submit_all(queue, [2])
    model.wait_entered()
    expires = time.monotonic() + 0.05
    late, results, errors = submit_all(queue, [1], deadline=expires)
    # It waits behind the blocked batch until its deadline has passed.
    wait_until(lambda: queue.num_enqueued_tasks == 1 and time.monotonic() > expires, 60,
               "the late request was never queued")
    model.gate.set()
    join_all(blocker + late)
    scheduler.stop()
    assert not results and errors[0].code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_allowed_batch_sizes_pad_and_shapes_do_not_mix():
    model = Recorder()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=8, allowed_batch_sizes=(4, 8),
                                               num_batch_threads=1))
    queue = scheduler.add_queue("m", model)
    outputs = queue.submit({"x": np.ones((3, 1), np.float32)}, 3)
    assert model.batches == [4] and outputs["y"].shape == (3, 1)  # padded to 4, cut back to 3
    model.block()
    blocker, _, _ = submit_all(queue, [1])
    model.wait_entered()
    narrow, results, errors = submit_all(queue, [1, 1])
    queued(queue, 2)  # one open batch of [1, 1] rows ...
    wide, wide_results, wide_errors = submit_all(queue, [1], width=2)
    queued(queue, 3)  # ... that the [1, 2] request did not join
    model.gate.set()
    join_all(blocker + narrow + wide)
    scheduler.stop()
    assert not errors and not wide_errors, (errors, wide_errors)
    for x, outputs in [*results.values(), *wide_results.values()]:
        np.testing.assert_array_equal(outputs["y"], 2 * x)
    assert len(results) == 2 and len(wide_results) == 1
    assert model.batches == [4, 4, 4, 4]  # the blocker, both narrow rows, the wide row: padded


def test_stop_runs_what_is_queued_then_refuses():
    model = Recorder()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=8, batch_timeout_micros=HOUR_MICROS,
                                               num_batch_threads=1))
    queue = scheduler.add_queue("m", model)
    threads, results, _ = submit_all(queue, [1, 1])
    queued(queue, 2)
    # stop() does not wait out the hour-long timeout: the queued batch runs now.
    stopper = threading.Thread(target=scheduler.stop, name="scheduler.stop", daemon=True)
    stopper.start()
    join_all([stopper, *threads])
    assert len(results) == 2 and model.batches == [2]
    with pytest.raises(ServingError) as error:
        queue.submit({"x": np.ones((1, 1), np.float32)}, 1)
    assert error.value.code == grpc.StatusCode.UNAVAILABLE


def test_a_closed_queue_is_dropped_once_drained():
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, num_batch_threads=1))
    kept, retired = scheduler.add_queue("v2", Recorder()), scheduler.add_queue("v1", Recorder())
    retired.submit({"x": np.ones((1, 1), np.float32)}, 1)
    retired.close()  # its version was unloaded
    wait_until(lambda: retired not in scheduler._queues, 60,
               "the batch threads kept the drained queue of an unloaded version")
    assert scheduler._queues == [kept]  # no reference keeps the retired model alive
    scheduler.stop()
