"""int8 exports on real weights (all-MiniLM-L6-v2) against float32, with issue 21's bounds, run
as TF Serving runs them (graph-mode loader + Session.run, batches of 32 raw texts) on real
sentences from standard-library docstrings: sentence embeddings (per-sentence cosine, Spearman
correlation of pair similarities) and a fine-tuned classifier (label agreement).

Measured (TensorFlow 2.21, AMD EPYC Zen 4): embeddings cosine 0.9974 mean, 0.9942 worst, pair
Spearman 0.9972 (ONNX Runtime's quantize_dynamic QInt8 of the same model on the same sentences:
0.9633, 0.9337, 0.9480); classifier label agreement 99.5%, largest probability change 0.008.
Calibrated exports (static ranges from 300 other sentences): see the numbers in
benchmarks/README.md ("Static input ranges").
"""

import keras
import numpy as np
import pytest

from keras_bert import BertClassifier, BertEmbedder
from keras_bert.export import export_model
from tests.serving.graph_mode import GraphModeModel
from tests.tasks.docstring_sentences import TOPICS, docstring_sentences, topic_sentences

BATCH = 32


def served(path: str, output: str, texts: list[str]) -> np.ndarray:
    model = GraphModeModel(path)
    return np.concatenate([
        model.run("serving_default", text=np.array([t.encode() for t in texts[i:i + BATCH]],
                                                   object))[output]
        for i in range(0, len(texts), BATCH)])


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (the values here have no ties)."""
    return float(np.corrcoef(np.argsort(np.argsort(a)), np.argsort(np.argsort(b)))[0, 1])


@pytest.fixture(scope="module")
def embedded_sentences(minilm_dir):
    """MiniLM's sentence embedder, 400 sentences with their float32 embeddings, and 300 other
    sentences (the calibrated export's static ranges come from these)."""
    sentences = docstring_sentences(700)
    embedder = BertEmbedder.from_pretrained(minilm_dir, seq_length=128, pooling="mean",
                                            normalize=True)
    texts = sentences[:400]
    return embedder, texts, embedder.embed(texts), sentences[400:]


@pytest.mark.slow
@pytest.mark.parametrize("calibrated", [False, True], ids=["row-ranges", "calibrated"])
def test_int8_sentence_embeddings_stay_close_to_float32(embedded_sentences, tmp_path,
                                                        calibrated):
    embedder, texts, reference, other_sentences = embedded_sentences
    calibration = other_sentences if calibrated else None
    got = served(export_model(embedder, str(tmp_path), "minilm", quantize="int8",
                              calibration_texts=calibration), "embedding", texts)
    cosine = (got * reference).sum(1)  # both L2-normalized
    # 399 pairs of neighbouring sentences: how similar each pair is, float32 against int8.
    pairs_reference = (reference[:-1] * reference[1:]).sum(1)
    pairs_int8 = (got[:-1] * got[1:]).sum(1)
    correlation = spearman(pairs_reference, pairs_int8)
    numbers = (f"cosine mean {cosine.mean():.4f}, worst {cosine.min():.4f}; "
               f"pair-similarity Spearman {correlation:.4f}")
    print(numbers)
    assert cosine.mean() >= 0.99 and cosine.min() >= 0.97, numbers
    assert correlation >= 0.99, numbers
    assert cosine.min() < 0.99999, "int8 changed nothing: is the export really int8?"


@pytest.fixture(scope="module")
def topic_classifier(minilm_dir):
    """A topic classifier (which group of modules a docstring sentence comes from), fine-tuned
    once on 640 sentences; with its 1,000 test sentences and its float32 probabilities on them,
    and its training sentences."""
    rows = topic_sentences()
    test, train = rows[:1000], rows[1000:1640]
    keras.utils.set_random_seed(0)
    classifier = BertClassifier.from_pretrained(minilm_dir, num_classes=len(TOPICS),
                                                seq_length=64, label_names=list(TOPICS))
    classifier.compile(learning_rate=1e-4)
    classifier.fit([s for s, _ in train], [list(TOPICS)[label] for _, label in train],
                   batch_size=32, epochs=2, verbose=0)
    texts = [s for s, _ in test]
    reference = classifier.predict(texts, batch_size=BATCH, verbose=0)
    assert np.mean(reference.argmax(1) == [label for _, label in test]) > 0.4  # chance: 0.3
    return classifier, texts, reference, [s for s, _ in train]


@pytest.mark.slow
@pytest.mark.parametrize("calibrated", [False, True], ids=["row-ranges", "calibrated"])
def test_int8_classifier_agrees_with_float32_on_real_sentences(topic_classifier, tmp_path,
                                                                calibrated):
    """The topic classifier's 1,000 test labels, int8 against float32; calibrated on 300 of its
    training sentences."""
    classifier, texts, reference, train_texts = topic_classifier
    calibration = train_texts[:300] if calibrated else None
    kept, classifier.calibration_texts = classifier.calibration_texts, None  # row ranges: none
    try:
        got = served(export_model(classifier, str(tmp_path), "topics", quantize="int8",
                                  calibration_texts=calibration), "probabilities", texts)
    finally:
        classifier.calibration_texts = kept
    agreement = np.mean(got.argmax(1) == reference.argmax(1))
    largest_change = np.abs(got - reference).max()
    numbers = f"label agreement {agreement:.4f}, largest probability change {largest_change:.4f}"
    print(numbers)
    assert agreement >= 0.99, numbers
    assert largest_change < 0.05, numbers
