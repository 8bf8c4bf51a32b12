"""What the task models and the recipe take as inputs: packed ids (``is_packed``; any integer
dtype as the int32 the models' inputs are, ``int32_ids`` and ``int32_ids_dataset``) and texts
(``is_text_arrays``, ``as_string_array``), checked once with errors that name the input."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from keras_bert.tokenization.packing import INPUT_NAMES

# Beside the packed ids of a batch, the entry in which a model's ``pack_batch`` tells which
# example each row comes from, when it reads a long text as several windows (a classifier,
# ``tokenization.windows``): int32 [rows], ascending, every example at least once. No model
# takes it as an input; the recipe repeats each example's labels and weights for its rows, and
# ``predict`` and ``evaluate`` combine the rows back into one per example.
EXAMPLE_INDEX = "example_index"


def join_packed(parts: list[dict[str, np.ndarray]], part_examples: list[int]
                ) -> dict[str, np.ndarray]:
    """Packed batches (``pack_batch``'s outputs as arrays) joined into one, each batch's
    ``EXAMPLE_INDEX`` counted past the ``part_examples`` examples of the batches before it."""
    joined = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]
              if name != EXAMPLE_INDEX}
    if EXAMPLE_INDEX in parts[0]:
        offsets = np.cumsum([0, *part_examples[:-1]])
        joined[EXAMPLE_INDEX] = np.concatenate(
            [part[EXAMPLE_INDEX] + offset for part, offset in zip(parts, offsets)]
        ).astype(np.int32)
    return joined


def windowed_examples(example_index: np.ndarray | None) -> int:
    """How many examples ``EXAMPLE_INDEX`` (int [rows]) reads as more than one window (0 for
    None)."""
    if example_index is None or not len(example_index):
        return 0
    return int((np.bincount(example_index) > 1).sum())


def windows_line(example_index: np.ndarray) -> str:
    """One line for the log: how many texts were read as windows, and how many windows in
    all."""
    return (f"{windowed_examples(example_index)} of {int(example_index[-1]) + 1} texts are "
            f"longer than one window: {len(example_index)} windows in all")


def is_packed(x) -> bool:
    """Whether ``x`` (arrays, tensors or a tf.data element spec) already holds packed ids."""
    return isinstance(x, dict) and "input_word_ids" in x


def int32_ids(x: dict) -> dict[str, np.ndarray]:
    """Packed ids given as arrays of any integer dtype (NumPy's default int64, a list) as int32
    [rows, ..., seq] arrays, what the model's inputs are; other entries (features) as arrays.

    Raises:
        ValueError: an id input that is not integer, or a value outside int32, named.
    """
    arrays = {}
    for name, value in x.items():
        array = np.asarray(value)
        if name in INPUT_NAMES and array.dtype != np.int32:
            if array.size and not np.issubdtype(array.dtype, np.integer):
                raise ValueError(f"{name} must hold integer ids, got dtype {array.dtype}")
            info = np.iinfo(np.int32)
            if array.size and (array.min() < info.min or array.max() > info.max):
                raise ValueError(f"{name} holds values outside int32")
            array = array.astype(np.int32)
        arrays[name] = array
    return arrays


def int32_ids_dataset(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """A dataset of packed ids (``x`` or ``(x, y[, sample_weight])``) whose id inputs of
    another integer dtype are cast to int32; the dataset itself where they already are."""
    spec = dataset.element_spec
    ids_spec = spec[0] if isinstance(spec, tuple) else spec
    if all(ids_spec[name].dtype == tf.int32 for name in INPUT_NAMES if name in ids_spec):
        return dataset
    for name in INPUT_NAMES:
        if name in ids_spec and not ids_spec[name].dtype.is_integer:
            raise ValueError(f"{name} must hold integer ids, got dtype "
                             f"{ids_spec[name].dtype.name}")

    def cast(x):
        return {name: tf.cast(value, tf.int32) if name in INPUT_NAMES else value
                for name, value in x.items()}
    if isinstance(spec, tuple):
        return dataset.map(lambda x, *rest: (cast(x), *rest))
    return dataset.map(cast)


def is_text_arrays(x) -> bool:
    """Whether ``x`` is already the output of ``to_arrays``: a tuple of string arrays."""
    return isinstance(x, tuple) and bool(x) and all(isinstance(a, np.ndarray) for a in x)


def as_string_array(values, what: str) -> np.ndarray:
    """A 1-D object array of str (bytes decoded as UTF-8); ValueError naming ``what`` for an
    entry that is not text. An empty text is valid and packs as ``[CLS] [SEP]``, as the served
    signatures and Google's run_classifier.py pack it."""
    array = np.asarray(values, dtype=object).reshape(-1)
    for index, value in enumerate(array):
        if isinstance(value, bytes):
            value = array[index] = value.decode("utf-8")
        if not isinstance(value, str):
            raise ValueError(f"{what}[{index}] is {value!r}; every text must be a string")
    return array
