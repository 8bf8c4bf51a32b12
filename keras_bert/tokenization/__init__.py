"""keras_bert.tokenization: vocabulary files and learning, the pure-Python BERT tokenizer (Google's
behaviour, exactly), and the in-graph Keras layers that give the same ids: `BertTokenizerLayer`
(text -> WordPiece ids), `BertPackerLayer` (ids -> the encoder inputs) and `BertPreprocessor`
(the two together, on raw text).

The pure-Python parts import without TensorFlow; the layers and `learn_vocab` load TensorFlow (and
tensorflow-text) on first use.
"""

import importlib

from keras_bert.tokenization.tokenizer import BertTokenizer, TokenizedText
from keras_bert.tokenization.vocab import load_vocab, save_vocab

_LAZY = {"BertPackerLayer": "keras_bert.tokenization.packer_layer",
         "BertPreprocessor": "keras_bert.tokenization.preprocessor",
         "BertTokenizerLayer": "keras_bert.tokenization.tokenizer_layer",
         "learn_vocab": "keras_bert.tokenization.vocab_learning"}

__all__ = ["BertPackerLayer", "BertPreprocessor", "BertTokenizer", "BertTokenizerLayer",
           "TokenizedText", "learn_vocab", "load_vocab", "save_vocab"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'keras_bert.tokenization' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
