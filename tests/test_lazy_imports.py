"""Importing keras_bert is cheap (no TensorFlow or Keras for the pure-Python tools), and the Keras
classes still register for `keras.saving.load_model` once Keras is loaded, whatever the import
order.

"Keras is not loaded" means no Keras code ran: `import keras_bert` may leave a `keras` module
that has not run in sys.modules (keras_bert._KerasOnFirstUse), so that a later `import keras`
registers our classes; Keras runs only on that module's first use.
"""

import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Whether Keras' own code has run: its package sets keras.src when it executes.
KERAS_RAN = """
import sys
def keras_ran():
    return "keras.src" in sys.modules or "tensorflow" in sys.modules
"""


def _run(code: str) -> str:
    code = KERAS_RAN + textwrap.dedent(code)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO,
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
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras")
                     and m != "keras"), keras_ran())
    """)
    assert out.strip().splitlines()[-1] == "[] False"
    assert (tmp_path / "out.tfrecord").stat().st_size > 0


@pytest.fixture(scope="module")
def saved_classifier(tmp_path_factory):
    """A BertClassifier with its preprocessor, saved as .keras."""
    path = tmp_path_factory.mktemp("lazy") / "classifier.keras"
    _run(f"""
        from keras_bert import BertClassifier, BertEncoder
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
    assert lines[0] == "keras_bert.tasks.classification.model keras_bert.tokenization.tokenizer True"
    assert lines[1].startswith("AttributeError") and "NoSuchThing" in lines[1]


# The pure-Python public names, and the module each comes from.
PURE_PYTHON = [
    ("keras_bert", "BertTokenizer"),
    ("keras_bert.tokenization", "BertTokenizer"),
    ("keras_bert.tokenization", "load_vocab"),
    ("keras_bert.tokenization", "save_vocab"),
    ("keras_bert.pretraining_data.writer", "create_pretraining_data"),
    ("keras_bert.pretraining_data.writer", "PretrainingDataConfig"),
    ("keras_bert.pretraining_data.worker", "InstanceOptions"),
    ("keras_bert.cli", "main"),
]


@pytest.mark.parametrize("module, name", PURE_PYTHON, ids=lambda x: x)
def test_pure_python_names_import_no_tensorflow_or_keras(module, name):
    out = _run(f"""
        from {module} import {name}
        print(keras_ran(), sorted(m for m in sys.modules
                                  if m.split(".")[0] in ("tensorflow", "keras") and m != "keras"))
    """)
    assert out.strip().splitlines()[-1] == "False []"


def test_the_tokenizer_works_with_keras_installed_but_no_tensorflow(tmp_path):
    """A machine with Keras but no TensorFlow (simulated: importing tensorflow fails)."""
    out = _run("""
        sys.modules["tensorflow"] = None  # `import tensorflow` now raises ImportError
        from keras_bert import BertTokenizer
        tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                              "hello", "world", "!"])
        print(tokenizer.encode("Hello world!")["input_word_ids"])
        try:
            import keras
            keras.ops
        except ImportError as e:
            print("keras needs tensorflow:", type(e).__name__)
    """)
    lines = out.strip().splitlines()
    assert lines[0] == "[2, 5, 6, 7, 3]"
    assert lines[1] == "keras needs tensorflow: ModuleNotFoundError"


def test_the_registration_table_lists_every_registered_class():
    """keras_bert.KERAS_CLASSES (what the stand-ins are made from) is exactly the set of classes
    our modules register, each with the module that defines it."""
    out = _run("""
        import importlib, json, pkgutil
        import keras, keras_bert
        for info in pkgutil.walk_packages(keras_bert.__path__, "keras_bert."):
            importlib.import_module(info.name)
        registered = {key.split(">", 1)[1]: value.__module__
                      for key, value in keras.saving.get_custom_objects().items()
                      if key.startswith("keras_bert>")}
        print(json.dumps([registered, keras_bert.KERAS_CLASSES], sort_keys=True))
    """)
    import json
    registered, table = json.loads(out.strip().splitlines()[-1])
    assert registered == table


def test_loading_without_keras_bert_says_what_to_import(saved_classifier):
    """Keras' own error ("make sure they are all imported"), naming our module, and short: the
    vocabulary is an asset of the .keras file, not part of the config the message prints."""
    result = subprocess.run(
        [sys.executable, "-c", f"import keras; keras.saving.load_model({str(saved_classifier)!r})"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode != 0
    message = result.stderr.strip().splitlines()[-1]
    assert "Could not locate class 'BertClassifier'" in message
    assert "make sure they are all imported" in message
    assert "'module': 'keras_bert.tasks.classification.model'" in message
    assert len(message) < 4000, len(message)
