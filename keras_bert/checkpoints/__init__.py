"""Checkpoint formats: Google TF1 checkpoints, Hugging Face BERT directories and our own saves;
the names table between them. Loading into and saving from our models is
keras_bert.models.checkpoint_io (this package sits below the models)."""

from keras_bert.checkpoints.loader import (FORMATS, CheckpointMismatchError, assign_weights,
                                           detect_format, find_vocab, infer_lower_case,
                                           read_checkpoint)

__all__ = ["FORMATS", "CheckpointMismatchError", "assign_weights", "detect_format", "find_vocab",
           "infer_lower_case", "read_checkpoint"]
