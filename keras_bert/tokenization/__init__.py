"""keras_bert.tokenization: vocabulary files and learning, the pure-Python BERT tokenizer (Google's
behaviour, exactly), and the in-graph BertPreprocessor that gives the same ids."""

from keras_bert.tokenization.preprocessor import BertPreprocessor
from keras_bert.tokenization.tokenizer import BertTokenizer, TokenizedText
from keras_bert.tokenization.vocab import load_vocab, save_vocab
from keras_bert.tokenization.vocab_learning import learn_vocab

__all__ = ["BertPreprocessor", "BertTokenizer", "TokenizedText", "learn_vocab", "load_vocab",
           "save_vocab"]
