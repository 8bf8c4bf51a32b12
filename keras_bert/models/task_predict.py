"""``BertTask.predict`` on in-memory inputs: raw text packed by a traced function kept on the
model, then the rows sorted by length and run in chunks, each padded only to its longest row,
as the exported raw-text signatures run a request; the results come back in the caller's
order."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from keras_bert.models.task_pipeline import INPUT_NAMES, PACK_BATCH_SIZE, is_packed

# Rows per model call when predict's input fits one batch; exported raw-text signatures run
# served requests in the same chunks (export.signatures.LENGTH_CHUNK_ROWS).
SMALL_CALL_CHUNK_ROWS = 8
# A chunk of rows sorted by length is padded to its longest row exactly (a multiple of this):
# its rows are 8 (M stays a multiple of 8 for the matmuls), and rounding the length up to 8
# cost BERT-base's int8 export 8% of its time on short texts (benchmarks/README.md).
CHUNK_PAD_MULTIPLE = 1


class PackFunctions:
    """A task model's traced tokenization functions for ``predict``, keyed by input structure,
    and the (preprocessor, vocabulary fingerprint) they were traced with. A plain object, so
    that neither Keras nor tf.train.Checkpoint tracks the functions as parts of the model."""

    def __init__(self):
        self.owner: tuple = (None, None)
        self.functions: dict = {}


def packed_arrays(model: keras.Model, x) -> dict[str, np.ndarray]:
    """In-memory ``x`` as packed int32 arrays, [rows, ..., seq] each (and any features,
    [rows] each). Raw text is tokenized PACK_BATCH_SIZE rows a call by a traced function
    kept for the next call (``pack_function``)."""
    x = model.to_arrays(x, None)[0]
    rows = _num_rows(x)
    if not rows:
        raise ValueError(f"{type(model).__name__}.predict got no examples")
    if is_packed(x):
        return {name: np.asarray(value) for name, value in x.items()}
    parts = []
    for start in range(0, rows, PACK_BATCH_SIZE):
        chunk = tf.nest.map_structure(
            lambda array: tf.constant(array[start:start + PACK_BATCH_SIZE]), x)
        parts.append({name: value.numpy()
                      for name, value in pack_function(model, chunk)(chunk).items()})
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


def pack_function(model: keras.Model, tensors) -> tf.types.experimental.PolymorphicFunction:
    """``model.pack_batch`` traced once for inputs shaped as ``tensors`` with any number of
    rows, and kept in ``model._pack_functions``: building a tf.data pipeline per ``predict``
    call would trace the tokenizer every time, which costs more than running the model on a
    few texts. The functions are dropped when the preprocessor or its vocabulary changes."""
    specs = tf.nest.map_structure(
        lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype), tensors)
    key = tuple(keras.tree.flatten_with_path(specs))
    cache = model._pack_functions
    owner = (model.preprocessor, getattr(model.preprocessor, "vocabulary_sha256", None))
    if cache.owner[0] is not owner[0] or cache.owner[1] != owner[1]:
        cache.owner, cache.functions = owner, {}
    if key not in cache.functions:
        def pack(x):
            with tf.device("/CPU:0"):  # on the host, as in tf.data
                return model.pack_batch(x)
        cache.functions[key] = tf.function(pack, input_signature=[specs], autograph=False)
    return cache.functions[key]


def predict_by_length(model: keras.Model, packed: dict[str, np.ndarray], batch_size: int,
                      verbose):
    """``model``'s outputs on ``packed`` (as ``packed_arrays`` gives it), rows sorted by
    length and run ``batch_size`` at a time (``SMALL_CALL_CHUNK_ROWS`` when they fit one
    batch); outputs in the input's order, a sequence axis padded back to [rows, seq, ...]."""
    mask = packed["input_mask"]
    rows, full_length = mask.shape[0], mask.shape[-1]
    lengths = mask.reshape(rows, -1, full_length).sum(-1).max(-1)
    order = np.argsort(lengths, kind="stable")
    progress = keras.utils.Progbar(rows, verbose=0 if verbose == 0 else 1)
    # One batch's rows run in chunks of a few, each padded to its own longest row, as the
    # exported signatures run a request: a call on texts of 10 to 40 tokens costs what
    # they cost, not 40 tokens each. Larger inputs keep batches of batch_size, whose
    # rows, sorted over the whole input, are already of similar lengths.
    step = batch_size if rows > batch_size else min(batch_size, SMALL_CALL_CHUNK_ROWS)
    results = []
    for start in range(0, rows, step):
        index = order[start:start + step]
        length = min(max(-(-int(lengths[index].max()) // CHUNK_PAD_MULTIPLE)
                         * CHUNK_PAD_MULTIPLE, CHUNK_PAD_MULTIPLE), full_length)
        batch = {name: value[index][..., :length] if name in INPUT_NAMES else value[index]
                 for name, value in packed.items()}  # features have no sequence axis
        results.append(keras.tree.map_structure(np.asarray, model.predict_on_batch(batch)))
        progress.add(len(index))
    restore = np.argsort(order, kind="stable")
    # A None past the batch axis is a sequence axis; an output's path ends in its name.
    specs = keras.tree.flatten_with_path(model.output)
    parts = zip(*(keras.tree.flatten(result) for result in results))
    joined = []
    for (path, spec), pieces in zip(specs, parts):
        fill = model.sequence_padding.get(path[-1] if path else None, 0)
        padded = [np.pad(piece, [(0, full_length - piece.shape[a]) if a and size is None
                                 else (0, 0) for a, size in enumerate(spec.shape)],
                         constant_values=fill)
                  for piece in pieces]
        joined.append(np.concatenate(padded)[restore])
    return keras.tree.pack_sequence_as(model.output, joined)


def _num_rows(x) -> int | None:
    """Rows in an array structure (first leaf's length)."""
    leaves = tf.nest.flatten(x)
    return len(leaves[0]) if leaves and hasattr(leaves[0], "__len__") else None
