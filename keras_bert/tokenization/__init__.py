"""keras_bert.tokenization: vocabulary files and learning, the pure-Python BERT tokenizer (Google's
behaviour, exactly), and the in-graph Keras layers that give the same ids: `BertTokenizerLayer`
(text -> WordPiece ids), `BertPackerLayer` (ids -> the encoder inputs) and `BertPreprocessor`
(the two together, on raw text).

The pure-Python parts import without TensorFlow; the layers and `learn_vocab` load TensorFlow (and
tensorflow-text) on first use.
"""

from keras_bert.lazy import lazy_attributes
from keras_bert.tokenization.tokenizer import BertTokenizer, TokenizedText
from keras_bert.tokenization.vocab import load_vocab, save_vocab

__all__ = ["BertPackerLayer", "BertPreprocessor", "BertTokenizer", "BertTokenizerLayer",
           "TokenizedText", "learn_vocab", "load_vocab", "save_vocab"]
__getattr__, __dir__ = lazy_attributes(__name__, {
    "BertPackerLayer": "keras_bert.tokenization.packer_layer",
    "BertPreprocessor": "keras_bert.tokenization.preprocessor",
    "BertTokenizerLayer": "keras_bert.tokenization.tokenizer_layer",
    "learn_vocab": "keras_bert.tokenization.vocab_learning",
})
