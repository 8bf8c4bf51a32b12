"""keras_bert.tokenization: vocabulary files and learning, the pure-Python BERT tokenizer (Google's
behaviour, exactly), and the in-graph BertPreprocessor that gives the same ids."""

from keras_bert.tokenization.preprocessor import BertPreprocessor
from keras_bert.tokenization.tokenizer import BertTokenizer, TokenizedText
from keras_bert.tokenization.vocab import load_vocab, save_vocab

__all__ = ["BertPreprocessor", "BertTokenizer", "TokenizedText", "load_vocab", "save_vocab"]
