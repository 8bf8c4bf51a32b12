"""Pretraining data in pure Python (no TensorFlow): read a corpus, build sentence-pair instances
and mask them as google-research/bert's create_pretraining_data.py does, and write TFRecords
that its run_pretraining.py reads. ``writer.create_pretraining_data`` is the entry point."""
