"""keras_bert.tokenization."""
