"""keras-bert: BERT (Devlin et al., 2018) for TensorFlow and Keras 3.

The public API: configuration, the encoder and task models, tokenization, checkpoint interop.
"""

from keras_bert.config import BertConfig
from keras_bert.export import export_model
from keras_bert.models import (BertClassifier, BertEmbedder, BertEncoder, BertMultipleChoice,
                               BertPretrainer, BertQuestionAnswerer, BertTokenClassifier)
from keras_bert.tokenization import BertPreprocessor, BertTokenizer
from keras_bert.training import PretrainingConfig, create_optimizer, get_strategy, run_pretraining
from keras_bert.training.finetune import FinetuneConfig, run_finetune

__all__ = ["BertClassifier", "BertConfig", "BertEmbedder", "BertEncoder", "BertMultipleChoice",
           "BertPretrainer", "BertPreprocessor", "BertQuestionAnswerer", "BertTokenClassifier",
           "BertTokenizer", "FinetuneConfig", "PretrainingConfig", "create_optimizer",
           "export_model", "get_strategy", "run_finetune", "run_pretraining"]
__version__ = "0.1.0"
