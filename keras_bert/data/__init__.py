"""keras_bert.data."""
