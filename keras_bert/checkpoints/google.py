"""Google TF1 BERT checkpoints: a directory with bert_config.json, vocab.txt and bert_model.ckpt.*.

Reading uses tf.train.load_checkpoint (local or gs://). Writing uses the SaveV2 op directly, so the
bundle holds exactly the given variable names, shapes and float32 values, as Google's tf.train.Saver
wrote them, with no TF2 object graph.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import logging
import os

import numpy as np
import tensorflow as tf

from keras_bert.checkpoints.detection import GOOGLE_CONFIG_NAME
from keras_bert.config import BertConfig
from keras_bert import fileio
from keras_bert.fileio import join
from keras_bert.tokenization import vocab as vocab_lib

logger = logging.getLogger(__name__)

VOCAB_NAME = "vocab.txt"
CHECKPOINT_NAME = "bert_model.ckpt"


def find_checkpoint_prefix(path: fileio.PathLike) -> str:
    """The checkpoint prefix for a directory or a prefix (``.../bert_model.ckpt``).

    In a directory it takes the ``checkpoint`` state file's latest entry, else the single
    ``*.index`` bundle (``bert_model.ckpt`` preferred when there are several).
    """
    path = os.fspath(path)
    if fileio.exists(path + ".index"):
        return path
    if not fileio.isdir(path):
        raise FileNotFoundError(f"{path!r} is neither a checkpoint directory nor a checkpoint "
                                "prefix (no .index file)")
    latest = tf.train.latest_checkpoint(path)
    if latest:
        return latest
    indexes = fileio.glob(join(path, "*.index"))
    if not indexes:
        raise FileNotFoundError(f"no TF1 checkpoint (*.index) in {path!r}")
    prefixes = [p[: -len(".index")] for p in indexes]
    preferred = [p for p in prefixes if os.path.basename(p) == CHECKPOINT_NAME]
    if preferred:
        return preferred[0]
    if len(prefixes) > 1:
        raise ValueError(f"several checkpoints in {path!r} ({', '.join(map(os.path.basename, prefixes))}) "
                         "and no 'checkpoint' file saying which is latest; pass the prefix")
    return prefixes[0]


class CheckpointValues(collections.abc.Mapping):
    """Read-only name -> np.ndarray view of a TF1 checkpoint; tensors are read on access."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self._reader = tf.compat.v1.train.NewCheckpointReader(prefix)
        self._shapes = self._reader.get_variable_to_shape_map()

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._shapes:
            raise KeyError(name)
        return np.asarray(self._reader.get_tensor(name))

    def __iter__(self):
        return iter(sorted(self._shapes))

    def __len__(self) -> int:
        return len(self._shapes)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._shapes[name])


def read_google_checkpoint(path: str) -> tuple[BertConfig, CheckpointValues, str | None]:
    """Reads (config, variables, vocab path or None) from a directory or checkpoint prefix."""
    prefix = find_checkpoint_prefix(path)
    directory = path if fileio.isdir(path) else os.path.dirname(prefix)
    config_path = join(directory, GOOGLE_CONFIG_NAME)
    if not fileio.exists(config_path):
        raise FileNotFoundError(f"{directory!r} has a checkpoint but no {GOOGLE_CONFIG_NAME}")
    config = BertConfig.from_json_file(config_path)
    values = CheckpointValues(prefix)
    if "_CHECKPOINTABLE_OBJECT_GRAPH" in values and not any(n.startswith("bert/") for n in values):
        raise ValueError(f"{prefix!r} is a TF2 object-based checkpoint, not a Google TF1 BERT "
                         "checkpoint (no bert/... variables); load it with the code that wrote it")
    vocab_path = join(directory, VOCAB_NAME)
    return config, values, vocab_path if fileio.exists(vocab_path) else None


def write_google_checkpoint(directory: str, config: BertConfig, values: dict[str, np.ndarray],
                            tokens: list[str] | None = None) -> None:
    """Writes bert_config.json, bert_model.ckpt.{index,data-*} and vocab.txt (``tokens``) into
    ``directory``.

    ``directory`` should be a fresh (scratch) directory; see fileio.atomic_output_dir.
    """
    fileio.makedirs(directory)
    if config.hidden_act == "gelu_exact":
        # Google's format has one GELU, the tanh approximation; a reader of this directory gets it.
        logger.warning(
            "writing hidden_act 'gelu' (Google's tanh approximation) for a model trained with the "
            "exact erf GELU: Google's format has no erf form. Outputs move slightly (up to 3e-3 "
            "on MiniLM); use the hf or keras format to keep the exact form")
        config = dataclasses.replace(config, hidden_act="gelu")
    config.to_json_file(join(directory, GOOGLE_CONFIG_NAME))
    names = sorted(values)
    tf.raw_ops.SaveV2(
        prefix=join(directory, CHECKPOINT_NAME),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(np.asarray(values[n], dtype=np.float32)) for n in names])
    if tokens is not None:
        vocab_lib.save_vocab(tokens, join(directory, VOCAB_NAME))
