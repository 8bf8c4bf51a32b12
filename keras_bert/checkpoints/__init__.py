"""Checkpoint formats, the one module that knows them: Google TF1 checkpoints (pretrained and
run_classifier.py / run_squad.py fine-tuned), Hugging Face folders (BertModel and the BertFor*
task classes, sentence-transformers folders, and the tf_model.h5 of transformers 4.x's
TFBertModel and TFBertFor* classes), keras-hub presets and our own saves; the names table
between them for the encoder, the pretraining heads and each task head.

``reading.read_checkpoint`` reads any of them into a format-neutral ``Checkpoint`` (which model
classes turn into themselves in ``from_pretrained``), ``saving.save_checkpoint`` writes any
model in any format. This package sits below the models and imports none of them. Importing it
imports nothing: ``detection`` (which format a path holds) and the pure readers
(``hf_weights``, ``tf_h5``, ``keras_hub``) stay free of TensorFlow.
"""

FORMATS = ("keras", "google", "hf")  # what saving.save_checkpoint writes
READ_FORMATS = ("keras", "google", "hf", "keras-hub")  # what reading.read_checkpoint reads
