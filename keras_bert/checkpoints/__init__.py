"""Checkpoint interop: Google TF1 checkpoints, Hugging Face BERT directories and our own saves."""

from keras_bert.checkpoints.loader import (FORMATS, CheckpointMismatchError, convert,
                                           detect_format, find_vocab, load_encoder, load_model,
                                           load_pretrainer, model_values, save_checkpoint,
                                           save_preset)

__all__ = ["FORMATS", "CheckpointMismatchError", "convert", "detect_format", "find_vocab",
           "load_encoder", "load_model", "load_pretrainer", "model_values", "save_checkpoint",
           "save_preset"]
