"""The BERT network and the task models built on it."""

from keras_bert.models.classifier import BertClassifier
from keras_bert.models.embedder import BertEmbedder
from keras_bert.models.encoder import BertEncoder
from keras_bert.models.multiple_choice import BertMultipleChoice
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.models.question_answerer import BertQuestionAnswerer
from keras_bert.models.token_classifier import BertTokenClassifier

__all__ = ["BertClassifier", "BertEmbedder", "BertEncoder", "BertMultipleChoice", "BertPretrainer",
           "BertQuestionAnswerer", "BertTokenClassifier"]
