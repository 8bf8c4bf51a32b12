"""keras_bert.training."""
