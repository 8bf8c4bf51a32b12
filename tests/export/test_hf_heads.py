"""The flow users come for: a fine-tuned Hugging Face model (folders transformers saved,
tests/fixtures/hf_heads) exported for TF Serving with raw text in, run through TF Serving's own
graph-mode loader, gives what transformers computed: a classifier's probabilities are the
softmax of its logits within 1e-4 (a tagger's and a span model's outputs likewise:
tests/export/test_transformers_signature.py, on its exports). Keras' own ``model.export``
writes the same raw-text SavedModel."""

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
    base = tmp_path_factory.mktemp("models")
    for name, flags in (("fp32", []), ("int8", ["--quantize", "int8"]),
                        ("pairs", ["--text_pair"])):
        assert main(["export", str(HF / "seq_cls"), str(base), "--model_name", name,
                     *flags]) == 0
    return base


def test_served_probabilities_are_transformers_softmax(exported):
    reference = expected("seq_cls")
    served = GraphModeModel(str(exported / "fp32" / "1")).run(
        "serving_default", text=texts(reference["texts"]))
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


def test_keras_export_writes_the_raw_text_savedmodel(tmp_path, caplog):
    classifier = model_of_checkpoint(HF / "seq_cls")
    reference = expected("seq_cls")
    path = classifier.export(tmp_path / "exported")
    assert os.fspath(path) == str(tmp_path / "exported")
    served = GraphModeModel(str(path)).run("serving_default", text=texts(reference["texts"]))
    np.testing.assert_allclose(served["probabilities"], softmax(reference["logits"]), atol=1e-4)
    assert "Captures" not in caplog.text
    with pytest.raises(ValueError, match="writes the raw-text serving SavedModel.*"
                                         "keras_bert.export_model"):
        classifier.export(tmp_path / "onnx", format="onnx")


def test_a_preprocessor_longer_than_the_positions_is_refused():
    encoder = BertEncoder.from_pretrained(HF / "seq_cls")  # 64 positions
    assert BertClassifier.from_pretrained(HF / "seq_cls").preprocessor.seq_length == 64
    with pytest.raises(ValueError, match="packs 128 tokens, but the encoder has 64 positions"):
        BertClassifier(encoder, 3, preprocessor=BertPreprocessor(
            vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"], seq_length=128))
