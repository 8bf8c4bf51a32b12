"""The BERT network (BertEncoder), the pretraining model (BertPretrainer) and BertTask, the base
of the task models (which live with their tasks in keras_bert/tasks/)."""

from keras_bert.models.encoder import BertEncoder
from keras_bert.models.pretrainer import BertPretrainer
from keras_bert.models.task import BertTask

__all__ = ["BertEncoder", "BertPretrainer", "BertTask"]
