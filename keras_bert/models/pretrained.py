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
