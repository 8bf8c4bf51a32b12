"""Importing keras_bert is cheap (no TensorFlow for the pure-Python tools), and the Keras classes
still register for `keras.saving.load_model` once Keras is loaded, whatever the import order."""

import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_the_pretraining_data_writer_runs_without_tensorflow(tmp_path):
    corpus, vocab = tmp_path / "corpus.txt", tmp_path / "vocab.txt"
    corpus.write_text("the cat sat .\nit was happy .\n\nthe dog ran .\nit was fast .\n")
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat",
                                ".", "it", "was", "happy", "dog", "ran", "fast"]) + "\n")
    out = _run(f"""
        import sys
        from keras_bert.cli import main
        assert main(["pretraining-data", "--input_file={corpus}", "--vocab_file={vocab}",
                     "--output_file={tmp_path}/out.tfrecord", "--dupe_factor=2",
                     "--max_seq_length=16", "--num_workers=2"]) == 0
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras")))
    """)
    assert out.strip() == "[]"
    assert (tmp_path / "out.tfrecord").stat().st_size > 0


@pytest.fixture(scope="module")
def saved_classifier(tmp_path_factory):
    """A BertClassifier with its preprocessor, saved as .keras."""
    path = tmp_path_factory.mktemp("lazy") / "classifier.keras"
    _run(f"""
        from keras_bert.models import BertClassifier, BertEncoder
        from keras_bert.tokenization.preprocessor import BertPreprocessor
        vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]
        encoder = BertEncoder(vocab_size=7, hidden_size=16, num_hidden_layers=1,
                              num_attention_heads=2, intermediate_size=32,
                              max_position_embeddings=16)
        classifier = BertClassifier(encoder, num_classes=2, preprocessor=BertPreprocessor(
            vocabulary=vocabulary, seq_length=8))
        classifier.save("{path}")
    """)
    return path


# However Keras gets loaded (directly, through TensorFlow, or by one of our modules), and
# whichever of our modules is imported, the classes are registered once both are done.
@pytest.mark.parametrize("imports", [
    "import keras_bert\nimport keras",
    "import keras\nimport keras_bert",
    "import keras_bert.models",
    "import keras_bert.layers",
    "import keras_bert.config",  # imports TensorFlow, which loads Keras mid-import
    "from keras_bert.models.encoder import BertEncoder",
    "import keras_bert.tokenization\nimport tensorflow",
])
@pytest.mark.slow
def test_keras_load_model_finds_the_classes(saved_classifier, imports):
    out = _run(imports + f"""
import keras
model = keras.saving.load_model("{saved_classifier}")
registered = keras.saving.get_custom_objects()
print(type(model).__name__, type(model.preprocessor).__name__,
      "keras_bert>BertAdamW" in registered, "keras_bert>WarmupPolynomialDecay" in registered)
""")
    assert out.strip().splitlines()[-1] == "BertClassifier BertPreprocessor True True"


def test_public_names_load_on_first_use():
    out = _run("""
        import sys
        import keras_bert
        assert "tensorflow" not in sys.modules
        assert "BertClassifier" in dir(keras_bert)
        from keras_bert import BertClassifier, BertTokenizer, run_pretraining
        print(BertClassifier.__module__, BertTokenizer.__module__, "tensorflow" in sys.modules)
        try:
            keras_bert.NoSuchThing
        except AttributeError as e:
            print("AttributeError", e)
    """)
    lines = out.strip().splitlines()
    assert lines[0] == "keras_bert.models.classifier keras_bert.tokenization.tokenizer True"
    assert lines[1].startswith("AttributeError") and "NoSuchThing" in lines[1]
