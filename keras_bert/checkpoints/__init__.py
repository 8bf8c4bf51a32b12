"""keras_bert.checkpoints."""
