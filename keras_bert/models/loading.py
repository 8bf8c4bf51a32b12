"""``from_pretrained`` and ``from_checkpoint`` of every keras-bert model (``BertEncoder``,
``BertPretrainer`` and each task model): one load body, ``CheckpointLoading.from_checkpoint``,
and the steps each class fills in.

A checkpoint is read once (``checkpoints.reading.read_checkpoint``) and holds either a saved
keras-bert model or weights under one naming. The body: the arguments as the class takes them
(``_asked_arguments``); a saved model the class returns as it is (``_from_saved``), else an
encoder, the saved model's or a new one of the checkpoint's config (``_new_encoder``), and the
model built around it (``_around``); for a checkpoint's weights, the class's weights assigned by
name, every shape checked first (``_weights_in``), then what the class says of what was left
(``_after_weights``).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Self

from keras_bert import fileio
from keras_bert.checkpoints.names import WeightName, encoder_of
from keras_bert.checkpoints.reading import Checkpoint, assign_weights, read_checkpoint
from keras_bert.config import BertConfig

logger = logging.getLogger(__name__)


class CheckpointLoading:
    """The load of every keras-bert model class (mixed in before ``keras.Model``)."""

    @classmethod
    def from_pretrained(cls, path: fileio.PathLike, *args, **kwargs) -> Self:
        """The model of the checkpoint at ``path``: a Google TF1 (run_classifier.py's and
        run_squad.py's fine-tuned ones included), Hugging Face (BertFor* task models and
        sentence-transformers folders included), keras-hub or keras-bert checkpoint (or a
        ``.keras`` file), local or gs://.

        Weights are assigned by name, every shape checked first. A saved keras-bert model of
        the class is returned as it is; a saved model of another class gives its encoder.

        - ``BertEncoder``: the encoder alone (a head the checkpoint holds is left, one log line
          says so). Keyword arguments (e.g. ``dtype``) go to its constructor.
        - ``BertPretrainer``: the encoder and the masked-LM and next-sentence heads; heads the
          checkpoint lacks keep their fresh initialisation, and a warning names them. Keyword
          arguments go to the encoder's constructor.
        - A task model: with the checkpoint's head when it holds one for the class's task
          (``checkpoint_tasks``), with its size and label names (an argument that disagrees
          with it is a ValueError naming both), else a new head (one log line says so, naming
          any head of another task it holds). A BertPreprocessor is built from the checkpoint's
          vocabulary (vocab.txt, or the tokenizer.json transformers saves; without one, a
          warning, and the model takes packed ids only). Arguments: by position the class's
          ``head_arguments`` then ``seq_length`` (``BertClassifier.from_pretrained(path, 3,
          64)``), by keyword any constructor argument, and ``seq_length`` (the packed length;
          None: the checkpoint's, else ``default_seq_length``), ``lower_case`` (None: the
          checkpoint's casing) and ``dtype`` (the encoder's policy when it is built from
          weights). A head argument left None takes the checkpoint's head's, or the
          constructor's default. An argument that would change a saved model is a ValueError
          naming it.

        ``from_checkpoint(read_checkpoint(path), ...)`` is the same load.
        """
        return cls.from_checkpoint(read_checkpoint(path), *args, **kwargs)

    @classmethod
    def from_checkpoint(cls, checkpoint: Checkpoint, *args, **kwargs) -> Self:
        """The model of a checkpoint already read (``checkpoints.reading.read_checkpoint``);
        nothing is read again. Arguments as ``from_pretrained``'s."""
        asked = cls._asked_arguments(args, kwargs)
        saved = checkpoint.model
        if saved is not None:
            kept = cls._from_saved(saved, checkpoint.path, asked)
            if kept is not None:
                return kept
            encoder = encoder_of_saved(checkpoint, asked.get("dtype"))
        else:
            encoder = cls._new_encoder(checkpoint.config, asked)
        model = cls._around(encoder, checkpoint, asked)
        if saved is None:
            weights, optional = model._weights_in(checkpoint)
            assign_weights(weights, checkpoint, cls.__name__, optional=optional)
            model._after_weights(checkpoint, weights)
        return model

    # ------------------------------------------------------------------ the steps a class fills
    @classmethod
    def _asked_arguments(cls, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``from_pretrained``'s arguments by name (keyword arguments only, by default)."""
        if args:
            raise TypeError(f"{cls.__name__}.from_pretrained takes the checkpoint and keyword "
                            f"arguments only; got {len(args) + 1} positional arguments")
        return dict(kwargs)

    @classmethod
    def _from_saved(cls, saved, path: str, asked: dict[str, Any]):
        """The saved keras-bert model as this class returns it, or None to build one around
        its encoder."""
        return None

    @classmethod
    def _new_encoder(cls, config: BertConfig, asked: dict[str, Any]):
        """A BertEncoder of ``config`` with random weights, for a checkpoint's weights."""
        raise NotImplementedError

    @classmethod
    def _around(cls, encoder, checkpoint: Checkpoint, asked: dict[str, Any]):
        """The model of this class around ``encoder``."""
        raise NotImplementedError

    def _weights_in(self, checkpoint: Checkpoint
                    ) -> tuple[list[WeightName], Callable[[WeightName], bool]]:
        """The weights to assign from a checkpoint's values, and which of them it may lack."""
        raise NotImplementedError

    def _after_weights(self, checkpoint: Checkpoint, weights: list[WeightName]) -> None:
        """What to say once the weights are assigned (nothing by default)."""


def encoder_of_saved(checkpoint: Checkpoint, dtype=None):
    """The BertEncoder of a saved keras-bert model (``checkpoint.model``: an encoder, or a
    model around one)."""
    encoder = encoder_of(checkpoint.model)
    if encoder is None:
        raise ValueError(f"{checkpoint.path!r} holds a {type(checkpoint.model).__name__}, which "
                         f"has no BertEncoder")
    if dtype is not None:
        logger.warning("dtype=%r is ignored for a saved keras-bert model; it keeps its own "
                       "policy", dtype)
    return encoder
