"""keras-bert: BERT (Devlin et al., 2018) for TensorFlow and Keras 3.

The public API: configuration, the encoder and task models, tokenization, checkpoint interop.
"""

from keras_bert.config import BertConfig
from keras_bert.export import export_model
from keras_bert.models import BertEncoder, BertPretrainer
from keras_bert.tokenization import BertPreprocessor, BertTokenizer

__all__ = ["BertConfig", "BertEncoder", "BertPretrainer", "BertPreprocessor", "BertTokenizer",
           "export_model"]
__version__ = "0.1.0"
