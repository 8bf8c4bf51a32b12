"""A task model's steps of the one load body (``TaskLoading``, a base of ``BertTask``;
``models.loading``): a task model from any checkpoint (``checkpoints.reading``), with the
checkpoint's head when it holds one for the task, or the task model saved there as it is.

A head for the class's task (``checkpoint_tasks``) gives the constructor its sizes and names
(``head_arguments``: a Hugging Face classifier's ``num_labels``, ``id2label`` and
``problem_type``, a tagger's tags, a sentence-transformers pooling) and its weights; an argument
that disagrees with it is a ValueError naming both. A checkpoint without a head for the task
gives a fresh head, and one log line says so and names any head it found.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from keras_bert.checkpoints.stored_head import StoredHead
from keras_bert.checkpoints.names import (POOLERLESS_TASKS, encoder_weight_names, is_pooler,
                                          task_head_weight_names)
from keras_bert.checkpoints.reading import Checkpoint, unused_keys
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.loading import CheckpointLoading
from keras_bert.tokenization.preprocessor import BertPreprocessor
from keras_bert.tokenization.tokenizer import BertTokenizer

logger = logging.getLogger(__name__)

_ABSENT = object()


class TaskLoading(CheckpointLoading):
    """``BertTask``'s steps of the one load body (``models.loading.CheckpointLoading``), as
    methods that a task model class may override (``head_arguments_of``,
    ``check_saved_arguments`` and the class attributes ``checkpoint_tasks``,
    ``head_arguments``, ``overridable_head_arguments`` and ``default_seq_length`` live on
    ``BertTask``)."""

    @classmethod
    def _asked_arguments(cls, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        """By position the class's ``head_arguments`` then ``seq_length``, and every keyword:
        ``{name: value}``, with ``seq_length``, ``lower_case`` and the head arguments None when
        not given (None asks for the checkpoint's)."""
        positional = (*cls.head_arguments, "seq_length")
        if len(args) > len(positional):
            raise TypeError(f"{cls.__name__} takes the checkpoint and at most "
                            f"{len(positional)} more positional arguments "
                            f"({', '.join(positional)}); got {len(args) + 1}")
        kwargs = dict(kwargs)
        for name, value in zip(positional, args):
            if name in kwargs:
                raise TypeError(f"{cls.__name__} got multiple values for "
                                f"argument {name!r}")
            kwargs[name] = value
        asked = {name: kwargs.pop(name, None) for name in (*positional, "lower_case")}
        asked.update(kwargs)
        return asked

    @classmethod
    def _from_saved(cls, saved, path: str, asked: dict[str, Any]):
        """A saved model of this class, as it is (``_kept_as_saved``); None for another class,
        whose encoder the new model takes. ``dtype`` does not apply to a saved model."""
        if isinstance(saved, cls):
            return saved._kept_as_saved(path, {k: v for k, v in asked.items() if k != "dtype"})
        return None

    @classmethod
    def _new_encoder(cls, config, asked: dict[str, Any]) -> BertEncoder:
        return BertEncoder.from_bert_config(config, dtype=asked.get("dtype"))

    @classmethod
    def _around(cls, encoder: BertEncoder, checkpoint: Checkpoint, asked: dict[str, Any]):
        """The task model on ``encoder``: the constructor's arguments from ``asked`` and the
        checkpoint's head when it holds one for the class's task (``checkpoint_tasks``), the
        preprocessor from the checkpoint's vocabulary (or the saved model's)."""
        path, head = checkpoint.path, checkpoint.head
        arguments = {name: value for name, value in cls._given_arguments(asked).items()
                     if name not in ("seq_length", "lower_case", "dtype")}
        if cls._takes_head(checkpoint):
            arguments = cls._merge_head_arguments(head, arguments, path)
        elif head is not None:
            logger.info("%s holds %s; the %s takes its encoder and a new head", path,
                        head.describe(), cls.__name__)
        else:
            logger.info("%s holds no head for a %s; it starts with a new one", path, cls.__name__)
        required = inspect.signature(cls.__init__).parameters
        for name in cls.head_arguments:
            if name not in arguments and required[name].default is inspect.Parameter.empty:
                raise ValueError(f"{name} is required for a new {cls.__name__} ({path!r} holds no "
                                 f"head to take it from)")
        preprocessor = cls._preprocessor_from(
            checkpoint, getattr(checkpoint.model, "preprocessor", None),
            cls._seq_length_from(checkpoint, asked.get("seq_length")), asked.get("lower_case"))
        return cls(encoder, preprocessor=preprocessor, **arguments)

    def _weights_in(self, checkpoint: Checkpoint):
        """The encoder's weights, and the head's when the model took the checkpoint's; the
        pooler may be absent where the head does not read it or the checkpoint's task has
        none."""
        head = checkpoint.head
        weights = encoder_weight_names(self.encoder)
        layer = self.checkpoint_head().layer if self._takes_head(checkpoint) else None
        if layer is not None:
            weights += task_head_weight_names(head.task, layer)
        pooler_optional = (not self.uses_pooler
                           or (head is not None and head.task in POOLERLESS_TASKS))
        return weights, (is_pooler if pooler_optional else lambda weight: False)

    def _after_weights(self, checkpoint: Checkpoint, weights) -> None:
        """A warning naming the checkpoint's variables left unused, when it holds no head."""
        if checkpoint.head is None:
            unused = unused_keys(checkpoint, weights)
            if unused:
                logger.warning("%s: %d variables not used by the %s: %s", checkpoint.path,
                               len(unused), type(self).__name__, ", ".join(unused[:20]) +
                               (" ..." if len(unused) > 20 else ""))

    @classmethod
    def _takes_head(cls, checkpoint: Checkpoint) -> bool:
        """Whether the checkpoint holds a head for this class's task."""
        return checkpoint.head is not None and checkpoint.head.task in cls.checkpoint_tasks

    @classmethod
    def _seq_length_from(cls, checkpoint: Checkpoint, asked: int | None) -> int:
        """The packed length: the one asked for, else the one the checkpoint's author meant
        (``Checkpoint.seq_length``: a sentence-transformers folder's ``max_seq_length``), else the
        class's ``default_seq_length``; at most the encoder's positions."""
        positions = checkpoint.config.max_position_embeddings
        if asked is not None:
            return asked
        if checkpoint.seq_length is not None:
            logger.info("%s says to read it at %d tokens (sentence-transformers' max_seq_length); "
                        "seq_length=N asks for another length", checkpoint.path,
                        checkpoint.seq_length)
            return min(checkpoint.seq_length, positions)
        return min(cls.default_seq_length, positions)

    @classmethod
    def _given_arguments(cls, asked: dict[str, Any]) -> dict[str, Any]:
        """The arguments of ``asked`` that were given: all but a None for the class's
        ``head_arguments``, ``seq_length`` and ``lower_case``, where None means "the checkpoint's"
        (any other argument given as None asks for None, e.g. ``activation=None``: logits)."""
        absent_if_none = (*cls.head_arguments, "seq_length", "lower_case")
        return {name: value for name, value in asked.items()
                if not (value is None and name in absent_if_none)}

    @classmethod
    def _merge_head_arguments(cls, head: StoredHead, asked: dict[str, Any], path: str
                             ) -> dict[str, Any]:
        """``asked`` (the given arguments) with the arguments ``cls.head_arguments_of(head)``
        gives; ValueError naming an asked argument that disagrees with the checkpoint's head
        (unless the class lets it override the head's: ``overridable_head_arguments``)."""
        found = cls.head_arguments_of(head)
        for name, value in list(found.items()):
            if name not in asked or _comparable(asked[name]) == _comparable(value):
                continue
            given_value = asked[name]
            if name in cls.overridable_head_arguments:
                logger.info("%s holds %s; the %s takes %s=%r instead", path, head.describe(),
                            cls.__name__, name, given_value)
                del found[name]
            else:
                raise ValueError(
                    f"{path!r} holds {head.describe()}, but the {cls.__name__} was asked for "
                    f"{name}={given_value!r} (the checkpoint's: {value!r}); leave {name} out to "
                    f"take the checkpoint's head, or build a new one on its encoder "
                    f"({cls.__name__}(BertEncoder.from_pretrained(path), ...))")
        return {**asked, **found}

    @classmethod
    def _preprocessor_from(cls, checkpoint: Checkpoint, saved_preprocessor, seq_length: int,
                          lower_case: bool | None):
        """The saved model's preprocessor, or one from the checkpoint's vocabulary, with
        ``seq_length`` and (when given) ``lower_case``; None, with a warning, without a
        vocabulary."""
        preprocessor = saved_preprocessor
        if preprocessor is None and checkpoint.vocabulary is not None:
            preprocessor = BertPreprocessor.from_checkpoint(checkpoint, lower_case, seq_length)
        if preprocessor is None:
            logger.warning("%s has no vocabulary (vocab.txt or tokenizer.json); the %s takes "
                           "packed ids only (pass preprocessor=BertPreprocessor(vocab_file, ...) "
                           "for raw text)", checkpoint.path, cls.__name__)
            return None
        if lower_case is not None and lower_case != preprocessor.lower_case:
            preprocessor = BertPreprocessor(vocabulary=list(preprocessor.vocabulary),
                                            lower_case=lower_case, seq_length=seq_length)
        if preprocessor.seq_length != seq_length:
            preprocessor = preprocessor.with_seq_length(seq_length)
        return preprocessor

    def _kept_as_saved(self, path: str, asked: dict[str, Any]):
        """This model, saved at ``path``, which ``from_pretrained`` returns as it is, or
        ValueError naming each argument that asks for something else (``given_arguments``: None
        asks for nothing for the head arguments, ``seq_length`` and ``lower_case``).
        ``seq_length`` and ``lower_case`` are the preprocessor's; the class may check more
        (``check_saved_arguments``)."""
        asked = self.check_saved_arguments(path, self._given_arguments(asked))
        preprocessor = getattr(self, "preprocessor", None)
        current_of = {"seq_length": getattr(preprocessor, "seq_length", None),
                      "lower_case": getattr(preprocessor, "lower_case", None)}
        wrong = []
        for name, value in asked.items():
            current = current_of[name] if name in current_of else getattr(self, name, _ABSENT)
            if current is _ABSENT:
                wrong.append(f"{name}={value!r} (a setting of a new model)")
            elif _comparable(current) != _comparable(value):
                wrong.append(f"{name}={value!r} (the saved model has {current!r})")
        if wrong:
            raise ValueError(f"{path!r} holds a saved {type(self).__name__}, which from_pretrained "
                             f"loads as it is, but was asked for {', '.join(wrong)}; to change it, "
                             f"build a new model on its encoder "
                             f"({type(self).__name__}(model.encoder, ...))")
        return self


def tokenizer_of(preprocessor, owner: str) -> BertTokenizer:
    """The pure-Python tokenizer with the preprocessor's vocabulary and casing (for word and
    character alignment, which needs offsets)."""
    if preprocessor is None:
        raise ValueError(f"{owner} has no preprocessor, so it cannot tokenize raw text; build it "
                         f"with from_pretrained(...) or pass preprocessor=BertPreprocessor(...)")
    return BertTokenizer(vocabulary=list(preprocessor.vocabulary),
                         lower_case=preprocessor.lower_case)


def _comparable(value):
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else value
