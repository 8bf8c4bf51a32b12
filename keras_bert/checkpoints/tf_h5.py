"""The weights of a transformers TensorFlow folder (what TFBertModel and the TFBertFor* classes of
transformers 4.x wrote with ``save_pretrained``: ``tf_model.h5``, or the shards
``tf_model-0000k-of-0000n.h5`` that ``tf_model.h5.index.json`` names) as NumPy arrays under the
Hugging Face (PyTorch) keys, read with h5py: no transformers, tf-keras or TensorFlow. A folder of
TFBertForSequenceClassification then reads exactly as one of BertForSequenceClassification.

``tf_model.h5`` is Keras 2's HDF5 weights file (``model.save_weights``): the root attribute
``layer_names`` lists the model's top layers (``bert``, ``classifier``, ``mlm___cls``...), each
layer's group lists its variables in the attribute ``weight_names`` by full name
(``tf_bert_for_sequence_classification/bert/encoder/layer_._0/attention/self/query/kernel:0``),
and the dataset ``<layer>/<weight name>`` holds each. A shard's root ``layer_names`` lists its
datasets, named without the model's name (``bert/encoder/layer_._0/...``). An attribute too big
for an HDF5 object header is split in chunks (``layer_names0``, ``layer_names1``...), as Keras
writes it. TFBertForPreTraining and TFBertForMaskedLM store the word embeddings twice (under
``bert`` and again under ``mlm___cls``, whose decoder they are): the copies must agree.

Names become keys by transformers' own rule (``tf_names.hf_key``); the keys then go through
``names`` as a PyTorch folder's do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import h5py
import numpy as np

from keras_bert import fileio
from keras_bert.checkpoints.hf_weights import read_sharded
from keras_bert.checkpoints.tf_names import names_to_hf
from keras_bert.fileio import join

logger = logging.getLogger(__name__)

TF_WEIGHTS_NAME = "tf_model.h5"
TF_WEIGHTS_INDEX_NAME = "tf_model.h5.index.json"
# In order of preference, as hf_weights.WEIGHT_FILES (read after those: TF saves are the older).
TF_WEIGHT_FILES: tuple[str, ...] = (TF_WEIGHTS_NAME, TF_WEIGHTS_INDEX_NAME)

_RESAVE = "download or save it again"


class _Bad(ValueError):
    """A file that is not what save_pretrained writes; the message names it."""


def has_tf_weights(directory: fileio.PathLike) -> bool:
    """Whether ``directory`` holds one of TF_WEIGHT_FILES."""
    return any(fileio.exists(join(directory, name)) for name in TF_WEIGHT_FILES)


def read_tf_weights(directory: fileio.PathLike) -> dict[str, np.ndarray]:
    """Reads every weight of a transformers TensorFlow folder under its Hugging Face key.

    The first of TF_WEIGHT_FILES present is read: ``tf_model.h5``, or the shards that
    ``tf_model.h5.index.json`` names. Keys and values are what the PyTorch class of the same
    model holds (``bert.`` prefix kept; Dense kernels transposed to [out, in]), in the stored
    dtype; transformers' TF classes, like its PyTorch ones, save the tied MLM decoder only as
    the word embeddings.

    Args:
        directory: the model folder, local or ``gs://``.

    Returns:
        {key: array}.

    Raises:
        FileNotFoundError: no TF weight file in ``directory``, or the index names a missing
            shard.
        ValueError: a file that is truncated or not Keras' HDF5 weights, a name given two
            different values, or an index that does not match its shards; one line naming
            the file.
    """
    for name in TF_WEIGHT_FILES:
        path = join(directory, name)
        if fileio.exists(path):
            logger.info("reading transformers' TensorFlow weights from %s", path)
            if name == TF_WEIGHTS_INDEX_NAME:
                stored = read_sharded(directory, path, lambda shard: _read_h5(shard, sharded=True),
                                      _strip_model_name)
            else:
                stored = _read_h5(path, sharded=False)
            return names_to_hf(stored, path)
    raise FileNotFoundError(f"{fileio.local_path(directory)!r} has no transformers TensorFlow "
                            f"weights: expected one of {', '.join(TF_WEIGHT_FILES)}")


def _strip_model_name(name: str) -> str:
    """A weight's name without the model's (transformers' ``strip_model_name_and_prefix``)."""
    parts = name.split("/")
    return "/".join(parts[1:]) if "model." not in name and len(parts) > 1 else name


def _read_h5(path: str, sharded: bool) -> dict[str, np.ndarray]:
    """{name: array} of one tf_model.h5 or one shard, names without the model's (a shard's
    dataset names; tf_model.h5's ``weight_names`` less their first part, as transformers
    loads them)."""
    def bad(what: str) -> _Bad:
        return _Bad(f"{path!r} is truncated or not the Keras HDF5 weights that "
                    f"transformers' save_pretrained writes: {what}; {_RESAVE}")

    try:
        with fileio.open_file(path, "rb") as f, h5py.File(f, "r") as h5:
            layer_names = _attribute(h5, "layer_names")
            if layer_names is None:
                raise bad("its root has no 'layer_names' attribute")
            values = {}
            for name, dataset in _datasets(h5, layer_names, sharded, bad):
                if name in values and not np.array_equal(values[name], dataset):
                    raise bad(f"{name!r} is stored twice with different values")
                values[name] = dataset
            return values
    except _Bad:
        raise
    except (OSError, KeyError, TypeError, ValueError, RuntimeError) as error:
        raise bad(" ".join(str(error).split()) or type(error).__name__) from None


def _datasets(h5: h5py.File, layer_names: list[str], sharded: bool, bad
              ) -> Iterator[tuple[str, np.ndarray]]:
    for layer in layer_names:
        if layer not in h5:
            raise bad(f"'layer_names' lists {layer!r}, which it does not hold")
        item = h5[layer]
        if sharded:  # a shard lists its datasets
            if not isinstance(item, h5py.Dataset):
                raise bad(f"{layer!r} is not a dataset")
            yield layer, np.asarray(item[()])
            continue
        if not isinstance(item, h5py.Group):
            raise bad(f"layer {layer!r} is not a group (a shard given as tf_model.h5?)")
        for weight in _attribute(item, "weight_names") or []:
            if weight not in item or not isinstance(item[weight], h5py.Dataset):
                raise bad(f"layer {layer!r} lists the weight {weight!r}, which it does not hold")
            parts = weight.split("/")
            yield "/".join(parts[1:]) if len(parts) > 1 else weight, np.asarray(item[weight][()])


def _attribute(node, name: str) -> list[str] | None:
    """A list-of-names attribute as Keras writes it, whole or in chunks ``name0``,
    ``name1``...; None when absent."""
    attributes = node.attrs
    if name in attributes:
        chunks = [attributes[name]]
    else:
        chunks = []
        while f"{name}{len(chunks)}" in attributes:
            chunks.append(attributes[f"{name}{len(chunks)}"])
        if not chunks:
            return None
    return [n.decode("utf8") if isinstance(n, bytes) else str(n)
            for chunk in chunks for n in np.atleast_1d(chunk)]


__all__ = ["TF_WEIGHT_FILES", "TF_WEIGHTS_INDEX_NAME", "TF_WEIGHTS_NAME", "has_tf_weights",
           "read_tf_weights"]
