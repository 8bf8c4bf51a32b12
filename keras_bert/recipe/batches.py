"""tf.data for fine-tuning: in-memory examples packed once into ids, then served in batches of rows
of similar length, each padded only to one of a few bucket lengths. Which rows form each batch
is a function of (seed, epoch), so a resumed run reads the batches an uninterrupted one would,
and every worker of a multi-worker run builds the same batches. Nothing here runs in the model,
so the model only ever sees int32 ids (what TPUs and every tf.distribute strategy need).

How an epoch's batches are made (``BatchPlan``): the rows are shuffled, cut into windows of 50
batches (Hugging Face's ``group_by_length`` "mega-batches"), ordered by bucket within each
window (rows of one bucket stay in shuffled order) and cut into batches, and the batches are
shuffled. A batch is padded to the bucket of its longest row, so ordering by bucket pads as
little as sorting by exact length would, and rows of a bucket meet new neighbours every epoch.
Where the lengths are too alike for this to pad at least ``MIN_GROUPING_SAVING`` less than
shuffled batches (``grouping_saving``), the shuffled rows are batched as they come, each batch
still padded to its bucket: batches as random as with fixed padding, for little lost time.
Every batch but the last is full, so an epoch has ``ceil(rows / batch_size)`` batches
(``floor`` with ``drop_remainder``), as without grouping, and the learning-rate schedule knows
the number of steps in advance.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import keras
import numpy as np
import tensorflow as tf

from keras_bert.config import normalize_bucket_lengths
from keras_bert.recipe.inputs import (EXAMPLE_INDEX, int32_ids, is_packed, join_packed,
                                      windowed_examples, windows_line)
from keras_bert.tokenization.packing import INPUT_NAMES

logger = logging.getLogger(__name__)

IGNORED_LABEL = -1  # token labels with this value are left out of the loss and the metrics
LENGTH_MULTIPLE = 8  # bucket lengths are multiples of this (aligned matmuls, few shapes)
MAX_BUCKETS = 8  # the "auto" ladder has at most this many lengths (XLA/TPU compile one each)
WINDOW_BATCHES = 50  # batches per window of rows grouped by bucket
# Shuffled rows are regrouped only when that cuts the padded positions by at least this share
# (against shuffled batches each padded to their bucket): regrouping makes a batch's rows less
# random, which costs learning on small, uniform data sets and buys little time there.
MIN_GROUPING_SAVING = 0.2
PACK_BATCH_SIZE = 256  # examples tokenized together


def row_lengths(x: dict[str, np.ndarray]) -> np.ndarray:
    """The real length of every row of packed ids: int32 [rows], from ``input_mask`` [rows, seq]
    (the longest choice of [rows, num_choices, seq])."""
    mask = np.asarray(x["input_mask"])
    rows, width = mask.shape[0], mask.shape[-1]
    return mask.reshape(rows, -1, width).sum(-1).max(-1).astype(np.int32)


def length_ladder(lengths: np.ndarray, width: int, max_buckets: int = MAX_BUCKETS,
                  multiple: int = LENGTH_MULTIPLE) -> list[int]:
    """The bucket lengths that pad ``lengths`` least: at most ``max_buckets`` multiples of
    ``multiple`` (``width`` in place of one above it), the last covering the longest row.

    Each row counts as padded to the smallest chosen length that holds it; the choice minimizes
    the total padded length over all rows (dynamic programming over the rounded-up lengths that
    occur), so it follows the data's length histogram: short texts get fine steps, and a
    rare long text costs one bucket, not ``width`` for every batch.

    Args:
        lengths: int [rows], each row's real length (at most ``width``).
        width: the packed length (the preprocessor's seq_length).
        max_buckets: the most lengths to return.
        multiple: lengths are rounded up to a multiple of this.

    Returns:
        Ascending bucket lengths.

    Example:
    >>> length_ladder(np.array([5, 7, 12, 13, 30, 31, 120]), width=128, max_buckets=3)
    [16, 32, 120]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        return [width]
    rounded = np.minimum(-(-np.maximum(lengths, 1) // multiple) * multiple, width)
    candidates, counts = np.unique(rounded, return_counts=True)
    k = min(max_buckets, len(candidates))
    prefix = np.concatenate([[0], np.cumsum(counts)])
    # cost[b][j]: least padded length of the rows up to candidate j with b lengths, j chosen.
    cost = np.full((k + 1, len(candidates)), np.inf)
    previous = np.zeros((k + 1, len(candidates)), dtype=np.int64)
    for j, length in enumerate(candidates):
        cost[1][j] = length * prefix[j + 1]
    for b in range(2, k + 1):
        for j in range(b - 1, len(candidates)):
            options = [cost[b - 1][i] + candidates[j] * (prefix[j + 1] - prefix[i + 1])
                       for i in range(j)]
            previous[b][j] = int(np.argmin(options))
            cost[b][j] = options[previous[b][j]]
    last = len(candidates) - 1
    b = int(np.argmin(cost[1:, last])) + 1
    ladder = []
    while b >= 1:
        ladder.append(int(candidates[last]))
        last, b = int(previous[b][last]), b - 1
    return sorted(ladder)


def resolve_bucket_lengths(bucket_lengths, lengths: np.ndarray, width: int) -> list[int]:
    """The lengths batches are padded to: ``"auto"`` gives ``length_ladder``'s, None the packed
    width alone (every batch padded to seq_length), a list its lengths up to ``width`` plus
    ``width`` when a row is longer than all of them."""
    bucket_lengths = normalize_bucket_lengths(bucket_lengths)
    if bucket_lengths is None:
        return [width]
    if bucket_lengths == "auto":
        return length_ladder(lengths, width)
    ladder = [b for b in bucket_lengths if b <= width]
    if not ladder or (lengths.size and int(lengths.max()) > ladder[-1]):
        ladder.append(width)
    return ladder


class BatchPlan:
    """Which rows form each batch of an epoch, and the length each batch is padded to.

    ``plan(epoch)`` is a function of (seed, epoch) alone, in TensorFlow ops (it runs inside
    tf.data): with ``shuffle``, the rows are shuffled, cut into windows of ``window_batches``
    batches, ordered by bucket within each window (a stable sort: shuffled order within a
    bucket) and cut into batches, and the batches are shuffled; without, the rows are ordered
    by bucket over the whole set, in their order within one. With a single bucket length, or
    when shuffled rows regrouped would fill less than ``MIN_GROUPING_SAVING`` fewer padded
    positions than plain shuffled batches (``grouping_saving``: lengths too alike for grouping
    to pay, as on small generated data sets), no reordering is done (plain shuffled batches).
    Each batch is padded to the smallest bucket length that holds its longest row.

    Args:
        lengths: int [rows], each row's real length.
        batch_size: rows per batch.
        bucket_lengths: ascending padded lengths, the last at least ``max(lengths)``.
        shuffle: shuffle the rows and the batch order of every epoch.
        seed: the shuffling seed (an int).
        drop_remainder: leave out the ``rows % batch_size`` rows that do not fill a batch (other
            rows each epoch), so that every batch is full (static batch size for TPUs).
        window_batches: batches per window of rows grouped together.

    Example:
    >>> plan = BatchPlan(np.array([3, 9, 4, 10, 2]), batch_size=2, bucket_lengths=[8, 16],
    ...                  shuffle=False, seed=0)
    >>> rows, padded = plan(0)
    >>> rows.numpy().tolist(), padded.numpy().tolist()
    ([[0, 2], [4, 1], [3, -1]], [8, 16, 16])
    """

    def __init__(self, lengths: np.ndarray, batch_size: int, bucket_lengths: Sequence[int],
                 shuffle: bool, seed: int, drop_remainder: bool = False,
                 window_batches: int = WINDOW_BATCHES):
        self.lengths = np.asarray(lengths, dtype=np.int32)
        self.batch_size = int(batch_size)
        self.bucket_lengths = [int(b) for b in bucket_lengths]
        if self.lengths.size and int(self.lengths.max()) > self.bucket_lengths[-1]:
            raise ValueError(f"a row of length {int(self.lengths.max())} is longer than the "
                             f"last bucket length {self.bucket_lengths[-1]}")
        self.shuffle, self.seed, self.drop_remainder = shuffle, int(seed), drop_remainder
        rows = len(self.lengths)
        self.num_batches = num_batches(rows, self.batch_size, drop_remainder)
        self.rows_per_epoch = min(rows, self.num_batches * self.batch_size)
        self.window_rows = window_batches * self.batch_size if shuffle else max(rows, 1)
        self.saving = grouping_saving(self.lengths, self.batch_size, self.bucket_lengths)
        self.grouped = len(self.bucket_lengths) > 1 and (
            not shuffle or self.saving >= MIN_GROUPING_SAVING)

    def __call__(self, epoch) -> tuple[tf.Tensor, tf.Tensor]:
        """``(rows, padded_lengths)`` of epoch ``epoch`` (int or int64 scalar tensor): int32
        [num_batches, batch_size] row indices (-1 past the rows of a partial last batch) and
        int32 [num_batches] the length each batch is padded to."""
        lengths = tf.constant(self.lengths)
        rows = tf.range(len(self.lengths), dtype=tf.int32)
        if self.shuffle:
            row_seed, batch_seed = tf.unstack(tf.random.experimental.stateless_split(
                tf.stack([tf.constant(self.seed, tf.int64), tf.cast(epoch, tf.int64)]), 2))
            rows = tf.argsort(tf.random.stateless_uniform([len(self.lengths)], row_seed))
        rows = rows[:self.rows_per_epoch]
        ladder = tf.constant(self.bucket_lengths)
        if self.grouped:  # order by (window, bucket); a stable sort keeps a bucket shuffled
            window = tf.range(self.rows_per_epoch, dtype=tf.int32) // self.window_rows
            bucket = tf.searchsorted(ladder, tf.gather(lengths, rows), side="left")
            key = window * len(self.bucket_lengths) + bucket
            rows = tf.gather(rows, tf.argsort(key, stable=True))
        padding = self.num_batches * self.batch_size - self.rows_per_epoch
        rows = tf.reshape(tf.concat([rows, tf.fill([padding], -1)], 0),
                          [self.num_batches, self.batch_size])
        longest = tf.reduce_max(tf.gather(tf.concat([lengths, [0]], 0),
                                          tf.where(rows < 0, len(self.lengths), rows)), axis=1)
        padded = tf.gather(ladder, tf.searchsorted(ladder, longest, side="left"))
        if self.shuffle:
            order = tf.argsort(tf.random.stateless_uniform([self.num_batches], batch_seed))
            rows, padded = tf.gather(rows, order), tf.gather(padded, order)
        return rows, padded

    def summary(self) -> str:
        """One line for the log: buckets and how many of an epoch's padded positions are text."""
        rows, padded = (t.numpy() for t in self(0))
        counts = (rows >= 0).sum(axis=1)
        real = int(self.lengths[rows[rows >= 0]].sum())
        total = int((counts * padded).sum())
        used = np.bincount(np.searchsorted(self.bucket_lengths, padded),
                           minlength=len(self.bucket_lengths))
        order = ("" if self.grouped or not self.shuffle or len(self.bucket_lengths) < 2 else
                 f"; rows left in shuffled order (grouping would pad only {self.saving:.0%} "
                 f"less)")
        return (f"{self.num_batches} batches of {self.batch_size} per epoch, padded to "
                f"{', '.join(f'{b} ({n})' for b, n in zip(self.bucket_lengths, used))}; "
                f"{real / max(total, 1):.0%} of padded positions are text{order}")


def grouping_saving(lengths: np.ndarray, batch_size: int, bucket_lengths: Sequence[int]) -> float:
    """The share of padded positions that grouping rows by bucket saves over shuffled batches
    each padded to the bucket of its longest row: ``1 - grouped / shuffled``, with ``grouped``
    each row's own bucket length (what full grouped batches pad to) and ``shuffled`` the
    expected bucket of the longest of ``batch_size`` rows drawn at random.

    >>> round(grouping_saving(np.array([10] * 90 + [60] * 10), 8, [16, 64]), 2)
    0.52
    >>> round(grouping_saving(np.array([30] * 40 + [36] * 60), 16, [32, 40]), 2)
    0.08
    """
    lengths = np.asarray(lengths)
    if lengths.size == 0 or len(bucket_lengths) < 2:
        return 0.0
    ladder = np.asarray(bucket_lengths, dtype=np.float64)
    buckets = np.searchsorted(ladder, lengths, side="left")
    share_up_to = np.cumsum(np.bincount(buckets, minlength=len(ladder))) / lengths.size
    longest_in = np.diff(np.concatenate([[0.0], share_up_to ** batch_size]))
    shuffled = float((ladder * longest_in).sum())
    grouped = float(ladder[buckets].mean())
    return 1.0 - grouped / shuffled


def num_batches(rows: int, batch_size: int, drop_remainder: bool = False) -> int:
    """Batches in an epoch of ``rows`` rows: ``ceil(rows / batch_size)`` (``floor`` with
    ``drop_remainder``), with or without grouping by length."""
    return rows // batch_size if drop_remainder else -(-rows // batch_size)


class EpochCounter:
    """The epoch a dataset's next pass reads: every new iterator of the dataset takes the
    counter's value and advances it (passes 0, 1, 2, ...), and ``set`` moves it (``fit`` sets it
    at every epoch's start, so that a resumed fit reads epoch k's batches)."""

    def __init__(self, first_epoch: int = 0):
        self.variable = tf.Variable(first_epoch, dtype=tf.int64, trainable=False,
                                    name="data_epoch")

    def set(self, epoch: int) -> None:
        self.variable.assign(epoch)

    def take(self) -> tf.Tensor:
        return self.variable.assign_add(1) - 1


class SetDataEpoch(keras.callbacks.Callback):
    """Sets an ``EpochCounter`` to Keras' epoch at each epoch's start, before ``fit`` makes that
    epoch's iterator: the dataset then reads the epoch's own batches, also when ``fit`` starts
    at a later epoch (``initial_epoch``, ``keras.callbacks.BackupAndRestore``)."""

    def __init__(self, counter: EpochCounter):
        super().__init__()
        self.counter = counter

    def on_epoch_begin(self, epoch, logs=None):
        self.counter.set(epoch)


def _take_rows(data: tuple, rows: tf.Tensor, length: tf.Tensor, token_level_labels: bool):
    """One batch: ``rows`` of every array, packed ids (and token-level labels and weights) cut
    to ``length`` positions. Features, with no sequence axis, are only gathered."""
    rows = tf.boolean_mask(rows, rows >= 0)

    x = {name: tf.gather(value, rows) for name, value in data[0].items()}
    x = {name: value[..., :length] if name in INPUT_NAMES else value
         for name, value in x.items()}

    def take_labels(value):  # [rows, seq, ...]: cut along the sequence axis
        value = tf.gather(value, rows)
        return value[:, :length] if token_level_labels and value.shape.rank > 1 else value
    rest = tuple(tf.nest.map_structure(take_labels, part) for part in data[1:])
    return (x, *rest) if rest else x


def pack_examples(x, preprocess: Callable) -> dict[str, np.ndarray]:
    """In-memory inputs (``to_arrays`` output: string arrays, a tuple of them, a dict of columns)
    as packed NumPy arrays, PACK_BATCH_SIZE rows a call of ``preprocess`` (a batch of tensors ->
    packed tensors: a model's ``traced_pack_batch``, traced once and kept, so that ``fit``,
    ``evaluate`` and ``predict`` do not each trace the tokenizer again); packed ids pass
    through. ``{name: [rows, ..., seq]}`` plus any features ([rows]), and ``EXAMPLE_INDEX``
    [rows] where ``preprocess`` reads long texts as windows."""
    if is_packed(x):
        return int32_ids(x)
    examples = len(tf.nest.flatten(x)[0])
    if not examples:
        raise ValueError("got no examples")
    parts, sizes = [], []
    for start in range(0, examples, PACK_BATCH_SIZE):
        # x whole (a tuple of arrays for pairs is one input), each array cut to the chunk.
        chunk = tf.nest.map_structure(
            lambda array: tf.constant(np.asarray(array)[start:start + PACK_BATCH_SIZE]), x)
        parts.append({name: np.asarray(value) for name, value in preprocess(chunk).items()})
        sizes.append(min(PACK_BATCH_SIZE, examples - start))
    return join_packed(parts, sizes)


class PackedRows:
    """In-memory examples tokenized once, and the ``BatchPlan`` of their batches.

    Args:
        data: ``(x,)``, ``(x, y)`` or ``(x, y, sample_weight)``, arrays with one row per
            example; ``x`` is raw text (string arrays, a tuple of them for pairs, a dict of
            columns) or packed ids.
        preprocess: maps a batch of ``x`` to the packed ids dict (a model's
            ``traced_pack_batch``, or a BertPreprocessor).
        batch_size: rows per batch.
        bucket_lengths: the lengths batches are padded to: ``"auto"`` (from the data's length
            histogram, ``length_ladder``), a list, or None (every batch padded to the packed
            seq_length, rows in their order unless shuffled).
        shuffle: shuffle the rows and batches of every epoch.
        seed: the shuffling seed (None: drawn from NumPy's global generator, so
            ``keras.utils.set_random_seed`` fixes it).
        drop_remainder: only full batches.
        token_level_labels: labels (and sample weights) have a sequence axis, cut with the ids.

    Attributes:
        windowed_examples: how many examples ``preprocess`` read as more than one window
            (each window a row, with the example's labels and weights).
    """

    def __init__(self, data: tuple, preprocess: Callable, batch_size: int,
                 bucket_lengths="auto", shuffle: bool = False, seed: int | None = None,
                 drop_remainder: bool = False, token_level_labels: bool = False):
        x = pack_examples(data[0], preprocess)
        # Long texts read as windows: each window is a row, with its text's labels and weights.
        example_index = x.pop(EXAMPLE_INDEX, None)
        self.windowed_examples = windowed_examples(example_index)
        if self.windowed_examples:
            data = (x, *(tf.nest.map_structure(lambda a: np.asarray(a)[example_index], part)
                         for part in data[1:]))
            logger.info("%s", windows_line(example_index))
        lengths = row_lengths(x)
        ladder = resolve_bucket_lengths(bucket_lengths, lengths, x["input_word_ids"].shape[-1])
        if seed is None:
            seed = int(np.random.randint(2**31 - 1))
        self.plan = BatchPlan(lengths, batch_size, ladder, shuffle, seed, drop_remainder)
        if self.plan.num_batches == 0:
            raise ValueError(f"{len(lengths)} example(s) make no full batch of {batch_size}")
        logger.log(logging.INFO if shuffle else logging.DEBUG, "%s", self.plan.summary())
        self.arrays = (x, *data[1:])
        self.token_level_labels = token_level_labels

    def dataset(self, epoch: int | EpochCounter | None = None) -> tf.data.Dataset:
        """Batches of ``(packed x, y[, sample_weight])`` (or ``packed x``), with a known number
        of batches per pass.

        Args:
            epoch: the epoch whose batches every pass yields (an int), or an ``EpochCounter``
                whose value each new pass takes (None: a new counter, so passes are epochs 0,
                1, ...).
        """
        plan, token_level_labels = self.plan, self.token_level_labels
        if isinstance(epoch, int):
            epochs = tf.data.Dataset.from_tensors(tf.constant(epoch, tf.int64))
        else:
            counter = epoch or EpochCounter()
            epochs = tf.data.Dataset.from_tensors(0).map(lambda _: counter.take())
        batches = epochs.flat_map(lambda e: tf.data.Dataset.from_tensor_slices(plan(e)))
        dataset = tf.data.Dataset.zip((batches,
                                       tf.data.Dataset.from_tensors(self.arrays).repeat()))
        dataset = dataset.map(
            lambda batch, values: _take_rows(values, *batch, token_level_labels),
            num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.apply(tf.data.experimental.assert_cardinality(plan.num_batches)).prefetch(
            tf.data.AUTOTUNE)
