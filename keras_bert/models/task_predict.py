"""``BertTask.predict`` on in-memory inputs: raw text packed by a traced function kept on the
model, then the rows sorted by length and run in chunks, each padded only to its longest row;
the results come back in the caller's order. An input of at most one batch runs in
``LENGTH_CHUNK_ROWS``-row chunks inside one traced call (``in_length_chunks``), as the exported
raw-text signatures run every request."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from keras_bert.recipe.batches import INPUT_NAMES, pack_examples
from keras_bert.tokenization.preprocessor import trim_to_longest

# Rows per chunk when a batch runs sorted by length in one traced call: predict's inputs of at
# most one batch, and every request to an exported raw-text signature.
LENGTH_CHUNK_ROWS = 8
# A chunk of rows sorted by length is padded to its longest row exactly (a multiple of this):
# its rows are 8 (M stays a multiple of 8 for the matmuls), and rounding the length up to 8
# cost BERT-base's int8 export time on short texts (benchmarks/README.md).
CHUNK_PAD_MULTIPLE = 1


class PackFunctions:
    """A task model's traced functions for ``predict``: tokenization, keyed by input structure,
    with the (preprocessor, vocabulary fingerprint) they were traced with; and the small-input
    calls (``chunked_outputs``), keyed by input structure, with the Keras predict function they
    were traced beside. A plain object, so that neither Keras nor tf.train.Checkpoint tracks
    the functions as parts of the model."""

    def __init__(self):
        self.owner: tuple = (None, None)
        self.functions: dict = {}
        self.predict_function = None
        self.chunked: dict = {}


def packed_arrays(model: keras.Model, x) -> dict[str, np.ndarray]:
    """In-memory ``x`` as packed int32 arrays, [rows, ..., seq] each (and any features,
    [rows] each; ``EXAMPLE_INDEX`` [rows] where the model reads long texts as windows), raw
    text tokenized by the model's kept traced function (``pack_function``)."""
    x = model.to_arrays(x, None)[0]
    if not _num_rows(x):
        raise ValueError(f"{type(model).__name__}.predict got no examples")
    return pack_examples(x, model.traced_pack_batch)


def pack_function(model: keras.Model, tensors) -> tf.types.experimental.PolymorphicFunction:
    """``model.pack_batch`` traced once for inputs shaped as ``tensors`` with any number of
    rows, and kept in ``model._pack_functions`` (``BertTask.traced_pack_batch`` calls it):
    tracing the tokenizer for every ``fit``, ``evaluate`` or ``predict`` call costs more than
    running the model on a few texts. The functions are dropped when the preprocessor or its
    vocabulary changes."""
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
    length and run ``batch_size`` at a time (``LENGTH_CHUNK_ROWS`` when they fit one
    batch); outputs in the input's order, a sequence axis padded back to [rows, seq, ...]."""
    mask = packed["input_mask"]
    rows, full_length = mask.shape[0], mask.shape[-1]
    lengths = mask.reshape(rows, -1, full_length).sum(-1).max(-1)
    order = np.argsort(lengths, kind="stable")
    progress = keras.utils.Progbar(rows, verbose=0 if verbose == 0 else 1)
    if rows <= batch_size:
        outputs = chunked_outputs(model, packed)
        if outputs is not None:
            progress.add(rows)
            return outputs
    # One batch's rows run in chunks of a few, each padded to its own longest row, as the
    # exported signatures run a request: a call on texts of 10 to 40 tokens costs what
    # they cost, not 40 tokens each. Larger inputs keep batches of batch_size, whose
    # rows, sorted over the whole input, are already of similar lengths.
    step = batch_size if rows > batch_size else min(batch_size, LENGTH_CHUNK_ROWS)
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


def chunked_outputs(model: keras.Model, packed: dict[str, np.ndarray]):
    """``model``'s outputs on ``packed`` (at most one batch, as ``packed_arrays`` gives it) from
    one call of a traced function that runs ``in_length_chunks``, as numpy arrays in
    ``model.output``'s structure, a sequence axis padded back to the packed length; None where
    that call does not apply (a model without ``PackFunctions``, inputs with a choice axis, a
    distribution strategy, or ``run_eagerly``), and ``predict_on_batch`` runs each chunk
    instead.

    Each ``predict_on_batch`` call has a fixed cost on top of the model, large beside a small
    student's time on a few texts; one traced call of all the chunks saves it
    (benchmarks/README.md, "Against ONNX Runtime int8"). The function is traced again whenever Keras' own predict function is (after
    ``compile`` or ``quantize``), so it always runs the model's current layers.
    """
    cache = getattr(model, "_pack_functions", None)
    if (cache is None or model.run_eagerly or tf.distribute.has_strategy()
            or model.distribute_strategy is not tf.distribute.get_strategy()
            or any(packed[name].ndim != 2 for name in INPUT_NAMES if name in packed)):
        return None
    model.make_predict_function()  # Keras' own: None after compile() or quantize()
    predict_function = model.predict_function
    if cache.predict_function is not predict_function:
        cache.predict_function, cache.chunked = predict_function, {}
    tensors = {name: tf.convert_to_tensor(value) for name, value in packed.items()}
    key = tuple(sorted((name, t.dtype.name, t.shape.rank) for name, t in tensors.items()))
    if key not in cache.chunked:
        specs = {name: tf.TensorSpec([None] * t.shape.rank, t.dtype)
                 for name, t in tensors.items()}
        flat = keras.tree.flatten_with_path(model.output)
        fill = {str(i): model.sequence_padding.get(path[-1] if path else None, 0)
                for i, (path, _) in enumerate(flat)}
        dtypes = {str(i): tf.as_dtype(output.dtype) for i, (_, output) in enumerate(flat)}

        def outputs_fn(chunk):
            return {str(i): output for i, output in
                    enumerate(keras.tree.flatten(model(chunk, training=False)))}

        cache.chunked[key] = tf.function(
            lambda x: in_length_chunks(outputs_fn, x, LENGTH_CHUNK_ROWS, fill, dtypes),
            input_signature=[specs], autograph=False)
    outputs = cache.chunked[key](tensors)
    return keras.tree.pack_sequence_as(
        model.output, [outputs[str(i)].numpy() for i in range(len(outputs))])


def in_length_chunks(outputs_fn, packed: dict[str, tf.Tensor],
                     chunk_rows: int = LENGTH_CHUNK_ROWS,
                     fill: dict[str, float] | None = None,
                     dtypes: dict[str, tf.DType] | None = None) -> dict[str, tf.Tensor]:
    """``outputs_fn(packed)`` for a batch, computed on its rows sorted by length in chunks of
    ``chunk_rows``, each padded only to its own longest row (``CHUNK_PAD_MULTIPLE``); results in
    the batch's order.

    A served batch gathers requests of any length, and padding all of them to the longest costs
    what that one costs per row. Run sorted in chunks, a batch of short and long texts costs
    about what the texts cost. Outputs with a sequence axis (axis 1 of unknown size) are padded
    to the batch's packed length with ``fill``'s value for them, else zeros ("" / False), as
    ``predict`` pads them (``BertTask.sequence_padding``).

    Args:
        outputs_fn: packed ids {name: int32 [rows, length]} -> {output: [rows, ...]}.
        packed: the batch's packed ids, [batch, length] each (and any features, [batch]
            each, which go with their rows).
        chunk_rows: rows per chunk.
        fill: {output name: the value of its padded positions}.
        dtypes: None: two chunks a step (an export's requests; ``outputs_fn`` is traced once,
            as a function the four places that run a chunk call); {output name: dtype}: one
            chunk a step, ``outputs_fn`` traced inline once (``predict``).
    """
    if dtypes is None:
        # One trace of the model for the four call sites below (the first chunk, the second
        # under a cond, the loop's pair): an export traces each signature's model once, not
        # four times. The runtime inlines the call (TensorFlow's LowerFunctionalOpsPass), so
        # the graph TF Serving runs is the same.
        outputs_fn = tf.function(outputs_fn, autograph=False)
    mask = packed["input_mask"]
    rows, length = tf.shape(mask)[0], tf.shape(mask)[1]
    order = tf.argsort(tf.reduce_sum(mask, axis=1), stable=True)
    ordered = {name: tf.gather(value, order) for name, value in packed.items()}

    def chunk_outputs(index):
        start = index * chunk_rows
        chunk = {name: value[start:start + chunk_rows] for name, value in ordered.items()}
        ids = trim_to_longest({name: chunk[name] for name in INPUT_NAMES}, CHUNK_PAD_MULTIPLE)
        outputs = outputs_fn({**chunk, **ids})
        padded = {}
        for name, value in outputs.items():
            if value.shape.rank >= 2 and value.shape[1] is None:  # a sequence axis
                tail = [[0, 0]] * (value.shape.rank - 2)
                value = tf.pad(value, [[0, 0], [0, length - tf.shape(value)[1]]] + tail,
                               constant_values=(fill or {}).get(name, 0))
            padded[name] = value
        return padded

    inverse = tf.math.invert_permutation(order)
    chunks = (rows + chunk_rows - 1) // chunk_rows
    if dtypes is not None:
        arrays = {name: tf.TensorArray(dtype, size=0, dynamic_size=True, infer_shape=False)
                  for name, dtype in dtypes.items()}

        def one_chunk(index, arrays):
            outputs = chunk_outputs(index)
            return index + 1, {name: arrays[name].write(index, outputs[name]) for name in arrays}

        _, arrays = tf.while_loop(lambda index, _: index < chunks, one_chunk, (0, arrays))
        return {name: tf.gather(array.concat(), inverse) for name, array in arrays.items()}

    # Two chunks per step, independent of each other: with two or more inter-op threads (TF
    # Serving's default: one per core) they run at the same time, so that the small matmuls
    # TensorFlow runs on one thread each do not leave the other cores idle. The second chunk of
    # the last step is empty (0 rows in, 0 rows out) when the chunks are odd in number; a batch
    # of one chunk skips the second (an empty model call still costs a model call's overhead).
    first = chunk_outputs(0)  # also the outputs' dtypes and shapes

    def no_rows(value):
        dims = [length if axis == 1 and size is None else size
                for axis, size in enumerate(value.shape)][1:]
        return value[:0] if None in dims else tf.zeros([0, *dims], value.dtype)

    second = tf.cond(rows > chunk_rows, lambda: chunk_outputs(1),
                     lambda: {name: no_rows(value) for name, value in first.items()})
    arrays = {name: tf.TensorArray(value.dtype, size=0, dynamic_size=True, infer_shape=False)
              .write(0, value).write(1, second[name]) for name, value in first.items()}

    def body(index, arrays):
        pair = [chunk_outputs(index), chunk_outputs(index + 1)]
        return index + 2, {name: arrays[name].write(index, pair[0][name])
                           .write(index + 1, pair[1][name]) for name in arrays}

    _, arrays = tf.while_loop(lambda index, _: index < chunks, body, (2, arrays))
    results = {}
    for name, array in arrays.items():
        results[name] = tf.gather(array.concat(), inverse)
        results[name].set_shape([None] + first[name].shape[1:])
    return results


def _num_rows(x) -> int | None:
    """Rows in an array structure (first leaf's length)."""
    leaves = tf.nest.flatten(x)
    return len(leaves[0]) if leaves and hasattr(leaves[0], "__len__") else None
