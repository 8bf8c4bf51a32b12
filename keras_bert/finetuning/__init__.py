"""Running training: the tf.distribute strategy (TPU, workers, GPUs, CPU) and the fine-tuning run
behind ``keras-bert finetune`` (its tasks come from keras_bert.tasks)."""

from keras_bert.distribute import STRATEGIES, get_strategy, use_logical_cpu_devices

__all__ = ["STRATEGIES", "get_strategy", "use_logical_cpu_devices"]
