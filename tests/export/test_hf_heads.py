"""The flow users come for: a fine-tuned Hugging Face model (folders transformers saved,
tests/fixtures/hf_heads) exported for TF Serving with raw text in, by Keras' own
``model.export`` and by the command line, run through TF Serving's own graph-mode loader, gives
what transformers computed: a classifier's probabilities are the softmax of its logits within
1e-4 (a tagger's and a span model's outputs likewise: tests/export/test_transformers_signature.py,
on its exports)."""

import logging
import os
import pathlib

import numpy as np
import pytest

from keras_bert import BertClassifier, BertEncoder, BertPreprocessor
from keras_bert.cli import main
from keras_bert.tasks.checkpoint_models import model_of_checkpoint
from tests.serving.graph_mode import GraphModeModel

HF = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "hf_heads"


def expected(folder) -> dict:
    with np.load(HF / folder / "expected.npz", allow_pickle=True) as z:
        return {k: z[k] for k in z.files}


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def texts(values) -> np.ndarray:
    return np.array([str(t).encode() for t in values], object)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The command line's exports of the checkpoint: int8, and pairs of texts."""
    base = tmp_path_factory.mktemp("models")
    for name, flags in (("int8", ["--quantize", "int8"]), ("pairs", ["--text_pair"])):
        assert main(["export", str(HF / "seq_cls"), str(base), "--model_name", name,
                     *flags]) == 0
    return base


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def keras_exported(tmp_path_factory):
    """Keras' own ``model.export`` of the checkpoint's classifier: (the classifier, what export
    returned, the folder asked for, what was logged meanwhile)."""
    classifier = model_of_checkpoint(HF / "seq_cls")
    folder = tmp_path_factory.mktemp("keras") / "exported"
    records = Records()
    logging.getLogger().addHandler(records)
    try:
        path = classifier.export(folder)
    finally:
        logging.getLogger().removeHandler(records)
    return classifier, path, folder, records.messages


def test_served_probabilities_are_transformers_softmax(exported, keras_exported):
    reference = expected("seq_cls")
    _, path, _, _ = keras_exported
    served = GraphModeModel(str(path)).run("serving_default", text=texts(reference["texts"]))
    np.testing.assert_allclose(served["probabilities"], softmax(reference["logits"]), atol=1e-4)
    assert [n.decode() for n in served["class_names"]] == [
        ["neg", "neu", "pos"][i] for i in reference["logits"].argmax(-1)]
    pairs = GraphModeModel(str(exported / "pairs" / "1")).run(
        "serving_default", text=texts(reference["pair_texts"]),
        text_pair=texts(reference["pair_text_pairs"]))
    np.testing.assert_allclose(pairs["probabilities"], softmax(reference["pair_logits"]),
                               atol=1e-4)
    int8 = GraphModeModel(str(exported / "int8" / "1")).run(
        "serving_default", text=texts(reference["texts"]))
    np.testing.assert_allclose(int8["probabilities"], softmax(reference["logits"]), atol=0.02)


def test_keras_export_writes_the_raw_text_savedmodel(keras_exported, tmp_path):
    classifier, path, folder, messages = keras_exported
    assert os.fspath(path) == str(folder)
    assert not [m for m in messages if "Captures" in m], messages
    with pytest.raises(ValueError, match="writes the raw-text serving SavedModel.*"
                                         "keras_bert.export_model"):
        classifier.export(tmp_path / "onnx", format="onnx")


def test_a_preprocessor_longer_than_the_positions_is_refused():
    encoder = BertEncoder.from_pretrained(HF / "seq_cls")  # 64 positions
    assert BertClassifier.from_pretrained(HF / "seq_cls").preprocessor.seq_length == 64
    with pytest.raises(ValueError, match="packs 128 tokens, but the encoder has 64 positions"):
        BertClassifier(encoder, 3, preprocessor=BertPreprocessor(
            vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"], seq_length=128))
