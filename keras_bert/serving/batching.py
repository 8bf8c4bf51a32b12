"""Dynamic batching as TF Serving does it: one queue per servable signature, shared batch threads,
requests merged along dimension 0 and the results split back.

A request joins the open batch of its queue when it fits (rows and trailing shapes); otherwise it
opens a new batch, unless ``max_enqueued_batches`` are already waiting (then UNAVAILABLE, as TF
Serving's scheduler answers). A batch runs when it is full, when a newer batch has opened behind
it, or when its oldest request has waited ``batch_timeout_micros``.

Each queued request is logged at DEBUG level (queue, rows, batches waiting), and
``BatchQueue.num_enqueued_tasks`` is a queue's depth.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Mapping

import numpy as np

from keras_bert.serving.config_files import BatchingOptions
from keras_bert.serving.errors import (ServingError, Unloaded, failed_precondition,
                                       from_exception, invalid_argument, resource_exhausted,
                                       unavailable)

logger = logging.getLogger(__name__)

Arrays = Mapping[str, np.ndarray]
RunFn = Callable[[Arrays], dict]


class _Task:
    def __init__(self, inputs: Arrays, size: int, deadline: float | None):
        self.inputs = inputs
        self.size = size
        self.deadline = deadline
        self.shape_key = tuple(sorted((k, v.dtype.str, v.shape[1:]) for k, v in inputs.items()))
        self.done = threading.Event()
        self.outputs: dict | None = None
        self.error: ServingError | None = None


class _Batch:
    def __init__(self, shape_key):
        self.tasks: list[_Task] = []
        self.size = 0
        self.shape_key = shape_key
        self.opened_at = time.monotonic()


class BatchQueue:
    """The queue of one servable signature; ``submit`` blocks until the request's rows are done."""

    def __init__(self, scheduler: "BatchScheduler", name: str, run: RunFn):
        self.name = name
        self._scheduler = scheduler
        self._run = run
        self._batches: list[_Batch] = []
        self.closed = False

    def submit(self, inputs: Arrays, size: int, deadline: float | None = None) -> dict:
        """Runs ``inputs`` ([size, ...] arrays) in some batch and returns this request's outputs."""
        options = self._scheduler.options
        if size > options.max_batch_size:
            raise invalid_argument(f"Task size {size} is larger than maximum input batch size "
                                   f"{options.max_batch_size}")
        task = _Task(inputs, size, deadline)
        with self._scheduler.cond:
            if self.closed:
                raise Unloaded(f"{self.name} is being unloaded; retry the request")
            last = self._batches[-1] if self._batches else None
            if (last is None or last.shape_key != task.shape_key
                    or last.size + size > options.max_batch_size):
                if len(self._batches) >= options.max_enqueued_batches:
                    raise unavailable(
                        "The batch scheduling queue to which this task was submitted is full")
                last = _Batch(task.shape_key)
                self._batches.append(last)
            last.tasks.append(task)
            last.size += size
            waiting = len(self._batches)
            self._scheduler.cond.notify()
        logger.debug("%s: queued a request of %d rows (%d batches waiting)", self.name, size,
                     waiting)
        task.done.wait()
        if task.error is not None:
            raise task.error
        return task.outputs

    @property
    def num_enqueued_tasks(self) -> int:
        """Requests queued here that no batch thread has taken yet (TF Serving's
        ``NumEnqueuedTasks``): the queue's depth, for monitoring, and for tests to wait on."""
        with self._scheduler.cond:
            return sum(len(batch.tasks) for batch in self._batches)

    @property
    def drained(self) -> bool:
        """Closed, and nothing of it is queued any more."""
        return self.closed and not self._batches

    def close(self) -> None:
        """Refuses new requests; queued ones still run."""
        with self._scheduler.cond:
            self.closed = True
            self._scheduler.cond.notify_all()

    # Called with the scheduler's lock held.
    def _ready_batch(self, now: float, timeout_s: float) -> _Batch | None:
        if not self._batches:
            return None
        first = self._batches[0]
        if (len(self._batches) > 1 or self.closed or self._scheduler.flushing
                or first.size >= self._scheduler.options.max_batch_size
                or now - first.opened_at >= timeout_s):
            return self._batches.pop(0)
        return None

    def _process(self, batch: _Batch) -> None:
        now = time.monotonic()
        tasks = []
        for task in batch.tasks:
            if task.deadline is not None and now > task.deadline:
                task.error = resource_exhausted(
                    "Run() timeout exceeded while waiting in batching queue")
                task.done.set()
            else:
                tasks.append(task)
        if not tasks:
            return
        try:
            outputs = self._run_merged(tasks)
        except Exception as e:  # every task of the batch gets the error
            error = from_exception(e)
            for task in tasks:
                task.error = error
                task.done.set()
            return
        start = 0
        for task in tasks:
            task.outputs = {k: v[start:start + task.size] for k, v in outputs.items()}
            start += task.size
            task.done.set()

    def _run_merged(self, tasks: list[_Task]) -> dict:
        rows = sum(task.size for task in tasks)
        padded = next((s for s in self._scheduler.options.allowed_batch_sizes if s >= rows), rows)
        merged = {}
        for name in tasks[0].inputs:
            parts = [task.inputs[name] for task in tasks]
            if padded > rows:  # TF Serving pads with copies of the first row
                parts.append(np.repeat(parts[0][:1], padded - rows, axis=0))
            merged[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
        outputs = self._run(merged)
        for name, value in outputs.items():
            if np.ndim(value) == 0 or value.shape[0] != padded:
                raise failed_precondition(
                    f"Batched output tensor '{name}' has shape {np.shape(value)}; its 0th "
                    f"dimension must equal the batch size {padded}")
        return outputs


class BatchScheduler:
    """Batch threads shared by all queues (TF Serving's SharedBatchScheduler).

    Args:
        options: the BatchingParameters in force.

    >>> scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, num_batch_threads=1))
    >>> queue = scheduler.add_queue("double", lambda x: {"y": x["x"] * 2})
    >>> queue.submit({"x": np.array([1, 2])}, size=2)["y"].tolist()
    [2, 4]
    >>> scheduler.stop()
    """

    def __init__(self, options: BatchingOptions):
        self.options = options
        self.cond = threading.Condition()
        self.flushing = False  # run batches at once instead of waiting for the timeout
        self.stopping = False  # end the threads once nothing is queued
        self._queues: list[BatchQueue] = []
        self._next = 0
        self._threads = [threading.Thread(target=self._loop, name=f"batch-thread-{i}", daemon=True)
                         for i in range(options.num_batch_threads)]
        for thread in self._threads:
            thread.start()

    def add_queue(self, name: str, run: RunFn) -> BatchQueue:
        queue = BatchQueue(self, name, run)
        with self.cond:
            self._queues.append(queue)
        return queue

    def flush(self) -> None:
        """From now on batches run as soon as a thread is free, without waiting to fill up
        (shutdown: nothing more is coming)."""
        with self.cond:
            self.flushing = True
            self.cond.notify_all()

    def stop(self) -> None:
        """Refuses new requests, runs what is queued, then ends the batch threads."""
        with self.cond:
            self.flushing = self.stopping = True
            for queue in self._queues:
                queue.closed = True
            self.cond.notify_all()
        for thread in self._threads:
            thread.join()

    def _next_batch(self) -> tuple[BatchQueue, _Batch] | None:
        """Waits for a ready batch; None when stopping with nothing left."""
        timeout_s = self.options.batch_timeout_micros / 1e6
        with self.cond:
            while True:
                # Queues of unloaded versions go once drained (and with them the model).
                self._queues = [q for q in self._queues if not (q.closed and not q._batches)]
                now = time.monotonic()
                count = len(self._queues)
                for offset in range(count):  # round robin, so no queue starves
                    queue = self._queues[(self._next + offset) % count]
                    batch = queue._ready_batch(now, timeout_s)
                    if batch is not None:
                        self._next = (self._next + offset + 1) % count
                        return queue, batch
                if self.stopping and not any(q._batches for q in self._queues):
                    return None
                waits = [q._batches[0].opened_at + timeout_s - now
                         for q in self._queues if q._batches]
                self.cond.wait(timeout=max(min(waits), 1e-4) if waits else None)

    def _loop(self) -> None:
        while True:
            item = self._next_batch()
            if item is None:
                return
            queue, batch = item
            queue._process(batch)
