"""A tiny encoder exported once per test session (with the real uncased vocabulary, so raw text
tokenizes as it would for BERT-base), shared by the export and serving tests."""

import atexit
import dataclasses
import functools
import shutil
import tempfile

import keras

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Héllo, wörld! Ünïcode and CJK 中文",
         "short"]
SEQ_LENGTH = 24


@dataclasses.dataclass(frozen=True)
class Export:
    model: object
    preprocessor: object
    export_base: str
    version_dir: str


def tiny_encoder(vocab_size: int):
    from keras_bert import BertEncoder
    keras.utils.set_random_seed(7)
    return BertEncoder(vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=128,
                       max_position_embeddings=64)


@functools.lru_cache(maxsize=None)
def encoder_export(vocab_file: str) -> Export:
    """Exports a 2-layer, hidden-64 encoder as <base>/encoder/1 (raw text packed to 24)."""
    from keras_bert.export import export_model
    from keras_bert.tokenization.preprocessor import BertPreprocessor
    preprocessor = BertPreprocessor(vocab_file, lower_case=True, seq_length=SEQ_LENGTH)
    model = tiny_encoder(len(preprocessor.vocabulary))
    base = tempfile.mkdtemp(prefix="keras_bert_export_test-")
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    version_dir = export_model(model, base, "encoder", preprocessor=preprocessor)
    return Export(model, preprocessor, base, version_dir)


def keras_encoder_outputs(export: Export, texts=TEXTS) -> dict:
    """What the Keras model gives for raw ``texts``: packed ids and the encoder's outputs at
    seq_length, and (``text_*``) what a raw-text signature returns: the same, cut to the
    longest text rounded up to a multiple of 8, zeros past each sorted chunk's longest text."""
    import numpy as np
    import tensorflow as tf
    packed = export.preprocessor(tf.constant(texts))
    outputs = export.model(packed, training=False)
    mask = np.asarray(packed["input_mask"])
    length = min(-(-int(mask.sum(1).max()) // 8) * 8, mask.shape[1])
    assert not mask[:, length:].any()
    sequence_output = np.asarray(outputs["sequence_output"])
    # The signature runs rows sorted by length in chunks, each cut to its own longest row, and
    # pads the positions past a chunk's longest row with zeros.
    from keras_bert.models.task_predict import LENGTH_CHUNK_ROWS
    text_sequence_output = sequence_output[:, :length].copy()
    order = np.argsort(mask.sum(1), kind="stable")
    for start in range(0, len(order), LENGTH_CHUNK_ROWS):
        rows = order[start:start + LENGTH_CHUNK_ROWS]
        text_sequence_output[rows, int(mask[rows].sum(1).max()):] = 0.0
    return {**{k: np.asarray(v) for k, v in packed.items()},
            "sequence_output": sequence_output,
            "pooled_output": np.asarray(outputs["pooled_output"]),
            "encoder_outputs": np.stack([np.asarray(o) for o in outputs["encoder_outputs"]], 1),
            "text_sequence_output": text_sequence_output,
            "text_input_mask": mask[:, :length]}
