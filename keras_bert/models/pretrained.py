"""Loading what a task model's ``from_pretrained`` needs: the encoder weights of a Google, Hugging
Face or keras-bert checkpoint and a preprocessor from its vocab.txt, or a saved task model."""

from __future__ import annotations

import logging

from keras_bert.tokenization.tokenizer import BertTokenizer

logger = logging.getLogger(__name__)


def load_task_parts(task_class, path: str, seq_length: int, dtype=None,
                    lower_case: bool | None = None):
    """(saved task model or None, encoder, preprocessor or None) for ``path``.

    When ``path`` holds a saved model of ``task_class`` (our ``.keras`` format), it is returned
    as it is. Otherwise the encoder is loaded from any checkpoint format and a BertPreprocessor
    of ``seq_length`` is built from the vocab.txt beside it (None, with a warning, when there is
    none: the model then takes packed ids only). ``lower_case`` overrides the checkpoint's
    casing for that preprocessor.
    """
    from keras_bert.checkpoints import detect_format, find_vocab
    from keras_bert.models.checkpoint_io import load_encoder, load_model
    from keras_bert.models.encoder import BertEncoder
    from keras_bert.tokenization.preprocessor import BertPreprocessor

    fmt = detect_format(path)
    preprocessor = None
    if fmt == "keras":
        model = load_model(path)
        if isinstance(model, task_class):
            return model, model.encoder, model.preprocessor
        encoder = model if isinstance(model, BertEncoder) else getattr(model, "encoder", None)
        if not isinstance(encoder, BertEncoder):
            raise ValueError(f"{path!r} holds a {type(model).__name__}, which has no BertEncoder")
        preprocessor = getattr(model, "preprocessor", None)
    else:
        encoder = load_encoder(path, dtype=dtype)
    if preprocessor is None:
        if find_vocab(path) is not None:
            preprocessor = BertPreprocessor.from_pretrained(path, seq_length=seq_length,
                                                            lower_case=lower_case)
        else:
            logger.warning("%s has no vocab.txt; the %s takes packed ids only (pass "
                           "preprocessor=BertPreprocessor(vocab_file, ...) for raw text)",
                           path, task_class.__name__)
    if preprocessor is not None and preprocessor.seq_length != seq_length:
        preprocessor = preprocessor.with_seq_length(seq_length)
    return None, encoder, preprocessor


def tokenizer_of(preprocessor, owner: str) -> BertTokenizer:
    """The pure-Python tokenizer with the preprocessor's vocabulary and casing (for word and
    character alignment, which needs offsets)."""
    if preprocessor is None:
        raise ValueError(f"{owner} has no preprocessor, so it cannot tokenize raw text; build it "
                         f"with from_pretrained(...) or pass preprocessor=BertPreprocessor(...)")
    return BertTokenizer(vocabulary=list(preprocessor.vocabulary),
                         lower_case=preprocessor.lower_case)


def keep_saved(saved, path: str, **asked):
    """``saved`` (the task model saved at ``path``), which ``from_pretrained`` returns as it is,
    or ValueError naming each argument that asks for something else (None asks for nothing).
    ``seq_length`` and ``lower_case`` are the preprocessor's."""
    preprocessor = getattr(saved, "preprocessor", None)
    current_of = {"seq_length": getattr(preprocessor, "seq_length", None),
                  "lower_case": getattr(preprocessor, "lower_case", None)}
    wrong = []
    for name, value in asked.items():
        if value is None:
            continue
        current = current_of[name] if name in current_of else getattr(saved, name, _ABSENT)
        if current is _ABSENT:
            wrong.append(f"{name}={value!r} (a setting of a new model)")
        elif _comparable(current) != _comparable(value):
            wrong.append(f"{name}={value!r} (the saved model has {current!r})")
    if wrong:
        raise ValueError(f"{path!r} holds a saved {type(saved).__name__}, which from_pretrained "
                         f"loads as it is, but was asked for {', '.join(wrong)}; to change it, "
                         f"build a new model on its encoder ({type(saved).__name__}(model.encoder,"
                         f" ...))")
    return saved


_ABSENT = object()


def _comparable(value):
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else value
