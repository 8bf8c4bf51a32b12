"""Importing keras_bert is cheap (no TensorFlow or Keras for the pure-Python tools), and the Keras
classes still register for loading saved models once Keras is loaded, whatever the import order
and whatever the import form.

"Keras is not loaded" means no keras module at all in sys.modules: `import keras_bert` only
registers a post-import hook for "keras" (wrapt's), which registers our classes once Keras'
own `__init__` has run. Every case runs in a fresh interpreter (three that only read what a
whole import gives share one, and so do the pure-Python names while none of them loads
TensorFlow or Keras); the saved model they load is written by the test process.
"""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Which Keras and TensorFlow modules the process has loaded.
KERAS_MODULES = """
import sys
def keras_modules():
    return sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras"))
"""


def _python(args: list, cwd: str = REPO) -> subprocess.CompletedProcess:
    """A fresh interpreter whose keras_bert is the one under `cwd`."""
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300,
                          env={**os.environ, "PYTHONPATH": cwd, "TF_CPP_MIN_LOG_LEVEL": "3"})


def _run(code: str, cwd: str = REPO) -> str:
    result = _python(["-c", KERAS_MODULES + textwrap.dedent(code)], cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_the_pretraining_data_writer_runs_without_tensorflow(tmp_path):
    corpus, vocab = tmp_path / "corpus.txt", tmp_path / "vocab.txt"
    corpus.write_text("the cat sat .\nit was happy .\n\nthe dog ran .\nit was fast .\n")
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat",
                                ".", "it", "was", "happy", "dog", "ran", "fast"]) + "\n")
    out = _run(f"""
        from keras_bert.cli import main
        assert main(["pretraining-data", "--input_file={corpus}", "--vocab_file={vocab}",
                     "--output_file={tmp_path}/out.tfrecord", "--dupe_factor=2",
                     "--max_seq_length=16", "--num_workers=2"]) == 0
        print(keras_modules())
    """)
    assert out.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "out.tfrecord").stat().st_size > 0


@pytest.fixture(scope="module")
def saved_classifier(tmp_path_factory):
    """A BertClassifier with its preprocessor, saved as .keras (float32, whatever dtype policy
    the tests before left: as a fresh process would write it)."""
    import keras

    from keras_bert import BertClassifier, BertEncoder
    from keras_bert.tokenization.preprocessor import BertPreprocessor
    path = tmp_path_factory.mktemp("lazy") / "classifier.keras"
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32")
    try:
        encoder = BertEncoder(vocab_size=7, hidden_size=16, num_hidden_layers=1,
                              num_attention_heads=2, intermediate_size=32,
                              max_position_embeddings=16)
        classifier = BertClassifier(encoder, num_classes=2, preprocessor=BertPreprocessor(
            vocabulary=vocabulary, seq_length=8))
        classifier.save(str(path))
    finally:
        keras.config.set_dtype_policy(previous)
    return path


# However Keras gets loaded (directly, through TensorFlow, or by one of our modules), whichever of
# our modules is imported, and however load_model is reached: (the imports, in order; the
# load_model they leave in scope).
LOAD_FORMS = [
    ("import keras_bert\nimport keras", "keras.saving.load_model"),
    ("import keras\nimport keras_bert", "keras.saving.load_model"),
    ("import keras_bert\nfrom keras.saving import load_model", "load_model"),
    ("import keras_bert\nfrom keras.models import load_model", "load_model"),
    ("import keras_bert\nimport keras.saving", "keras.saving.load_model"),
    ("from keras.saving import load_model\nimport keras_bert", "load_model"),
    ("import keras_bert\nimport tensorflow as tf", "tf.keras.models.load_model"),
    ("import keras_bert.models\nimport keras", "keras.saving.load_model"),
    ("import keras_bert.layers\nimport keras", "keras.saving.load_model"),
    # imports TensorFlow, which loads Keras mid-import
    ("import keras_bert.config\nimport keras", "keras.saving.load_model"),
    ("from keras_bert.models.encoder import BertEncoder\nimport keras", "keras.saving.load_model"),
    ("import keras_bert.tokenization\nimport tensorflow\nimport keras", "keras.saving.load_model"),
]


@pytest.mark.parametrize("imports, load_model", LOAD_FORMS, ids=lambda x: x.replace("\n", "; "))
@pytest.mark.slow
def test_keras_load_model_finds_the_classes(saved_classifier, imports, load_model):
    out = _run(imports + f"""
model = {load_model}("{saved_classifier}")
import keras
registered = keras.saving.get_custom_objects()
print(type(model).__name__, type(model.preprocessor).__name__,
      "keras_bert>BertAdamW" in registered, "keras_bert>WarmupPolynomialDecay" in registered)
""")
    assert out.strip().splitlines()[-1] == "BertClassifier BertPreprocessor True True"


@pytest.mark.parametrize("keras_first", [False, True], ids=["keras-after", "keras-before"])
@pytest.mark.slow
def test_reloading_keras_bert_keeps_loading(saved_classifier, keras_first):
    """IPython's autoreload and Colab users reload the package: no RecursionError, and saved
    models still load."""
    out = _run(f"""
        import importlib
        {"import keras" if keras_first else ""}
        import keras_bert
        keras_bert = importlib.reload(keras_bert)
        keras_bert = importlib.reload(keras_bert)
        print(keras_bert.BertTokenizer.__name__, keras_modules() != [])
        from keras.saving import load_model
        print(type(load_model("{saved_classifier}")).__name__)
    """)
    assert out.strip().splitlines() == [f"BertTokenizer {keras_first}", "BertClassifier"]


@pytest.mark.slow
def test_a_thread_importing_keras_while_another_loads_sees_all_of_it(saved_classifier):
    """Two threads start together, each with `import keras`: one loads a saved model, the other
    uses Keras. The second waits for the first's import, so neither sees a half-loaded keras, and
    Keras arrives with our classes registered. (Keras itself cannot import two of its submodules
    in two threads at once, with or without keras_bert: Python then imports the submodule while
    its parent package is still running, so each thread starts with `import keras`.)"""
    out = _run(f"""
        import json, threading
        import keras_bert
        start, results = threading.Barrier(2), {{}}
        def load():
            start.wait()
            import keras
            results["load"] = type(keras.saving.load_model("{saved_classifier}")).__name__
        def use():
            start.wait()
            import keras
            results["use"] = (type(keras.layers.Dense(1)).__name__,
                              "keras_bert>BertClassifier" in keras.saving.get_custom_objects())
        threads = [threading.Thread(target=load), threading.Thread(target=use)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(json.dumps(results, sort_keys=True))
    """)
    assert json.loads(out.strip().splitlines()[-1]) == {
        "load": "BertClassifier", "use": ["Dense", True]}


@pytest.mark.slow
def test_a_spawned_child_process_loads_a_saved_model(saved_classifier, tmp_path):
    """multiprocessing's "spawn" start method: the child imports keras_bert afresh (with the
    parent's main module) and loads a model; the parent never loads Keras."""
    script = tmp_path / "spawn_load.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing
        import sys

        import keras_bert  # noqa: F401  (what a user's script does first)


        def load(path):
            from keras.saving import load_model
            return type(load_model(path)).__name__


        if __name__ == "__main__":
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                print(pool.apply(load, (sys.argv[1],)),
                      [m for m in sys.modules if m.split(".")[0] in ("keras", "tensorflow")])
    """))
    result = _python([str(script), str(saved_classifier)])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "BertClassifier []"


def test_assert_warns_in_a_tokenizer_only_process_loads_no_keras():
    """unittest's assertWarns looks at every module in sys.modules; with only the pure-Python
    tokenizer in use, that must not load Keras or TensorFlow."""
    out = _run("""
        import io, unittest, warnings
        from keras_bert import BertTokenizer

        class TokenizerWarnings(unittest.TestCase):
            def test_warns(self):
                tokenizer = BertTokenizer(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hi"])
                with self.assertWarns(UserWarning):
                    warnings.warn(str(tokenizer.encode("hi")["input_word_ids"]), UserWarning)

        suite = unittest.defaultTestLoader.loadTestsFromTestCase(TokenizerWarnings)
        result = unittest.TextTestRunner(stream=io.StringIO()).run(suite)
        print(result.wasSuccessful(), result.testsRun, keras_modules())
    """)
    assert out.strip().splitlines()[-1] == "True 1 []"


@pytest.fixture(scope="module")
def whole_package():
    """One fresh interpreter (TensorFlow starts once for three tests): what `import keras_bert`
    loads, then the public names on first use, then every module imported (each line of output
    a JSON value, in this order)."""
    out = _run("""
        import importlib, json, pkgutil
        import keras_bert
        print(json.dumps(keras_modules()))
        print(json.dumps("BertClassifier" in dir(keras_bert)))
        from keras_bert import BertClassifier, BertTokenizer, run_pretraining
        print(json.dumps([BertClassifier.__module__, BertTokenizer.__module__,
                          "tensorflow" in sys.modules]))
        try:
            keras_bert.NoSuchThing
            print(json.dumps(None))
        except AttributeError as e:
            print(json.dumps(str(e)))
        import keras, keras_bert.tasks
        table = keras_bert.keras_classes()
        for info in pkgutil.walk_packages(keras_bert.__path__, "keras_bert."):
            importlib.import_module(info.name)
        registered = {key.split(">", 1)[1]: value.__module__
                      for key, value in keras.saving.get_custom_objects().items()
                      if key.startswith("keras_bert>")}
        print(json.dumps([registered, table], sort_keys=True))
        public = {}
        for folder in pkgutil.iter_modules(keras_bert.tasks.__path__):
            if folder.ispkg:
                task = importlib.import_module(f"keras_bert.tasks.{folder.name}")
                public.update({name: getattr(task, name) is getattr(keras_bert, name)
                               for name in task.__all__})
        print(json.dumps([public, keras_bert.__all__]))
    """)
    return [json.loads(line) for line in out.strip().splitlines()[-6:]]


def test_public_names_load_on_first_use(whole_package):
    loaded, listed, modules, missing = whole_package[:4]
    assert loaded == [] and listed
    assert modules == ["keras_bert.tasks.classification.model",
                       "keras_bert.tokenization.tokenizer", True]
    assert missing is not None and "NoSuchThing" in missing


# The pure-Python public names, and the module each comes from.
PURE_PYTHON = [
    ("keras_bert", "BertTokenizer"),
    ("keras_bert.tokenization", "BertTokenizer"),
    ("keras_bert.tokenization", "load_vocab"),
    ("keras_bert.tokenization", "save_vocab"),
    ("keras_bert.tokenization.hf_tokenizer_files", "read_tokenizer_json"),
    ("keras_bert.tokenization.hf_tokenizer_files", "write_hf_tokenizer_files"),
    ("keras_bert.pretraining_data.writer", "create_pretraining_data"),
    ("keras_bert.pretraining_data.writer", "PretrainingDataConfig"),
    ("keras_bert.pretraining_data.worker", "InstanceOptions"),
    ("keras_bert.cli", "main"),
    ("keras_bert.checkpoints.formats", "stored_config"),  # the command line's checks read it
]


# Imports each (module, name) of the JSON list in argv[1] in turn, in one process; prints the
# Keras and TensorFlow modules loaded after each (so far), one JSON line per name.
NAMES_IN_ONE_PROCESS = """
import json
for module, name in json.loads(sys.argv[1]):
    exec(f"from {module} import {name}")
    print(json.dumps(keras_modules()))
"""


def _loaded_after(names: list) -> list[tuple]:
    """(the process's exit status, its stderr, what was loaded after the name) for each of
    ``names``, imported in one fresh process."""
    result = _python(["-c", KERAS_MODULES + NAMES_IN_ONE_PROCESS, json.dumps(names)])
    lines = result.stdout.strip().splitlines()[-len(names):] if result.returncode == 0 else \
        ["null"] * len(names)
    return [(result.returncode, result.stderr, json.loads(line)) for line in lines]


@pytest.fixture(scope="module")
def pure_python_imports() -> dict:
    """What each of PURE_PYTHON loads: all imported in one fresh process, one after the other;
    if that failed or any Keras or TensorFlow module got loaded (after which the next names
    cannot load it again), each name again in a process of its own, so that each test judges
    its own name."""
    loaded = _loaded_after(PURE_PYTHON)
    if any(code or modules for code, _, modules in loaded):
        loaded = [_loaded_after([pair])[0] for pair in PURE_PYTHON]
    return dict(zip(PURE_PYTHON, loaded))


@pytest.mark.parametrize("module, name", PURE_PYTHON, ids=lambda x: x)
def test_pure_python_names_import_no_tensorflow_or_keras(pure_python_imports, module, name):
    code, stderr, loaded = pure_python_imports[module, name]
    assert code == 0, stderr[-3000:]
    assert loaded == []


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
        print(tokenizer.encode("world")["input_word_ids"])
    """)
    lines = out.strip().splitlines()
    assert lines[0] == "[2, 5, 6, 7, 3]"
    assert lines[1] == "keras needs tensorflow: ModuleNotFoundError"
    assert lines[2] == "[2, 6, 3]"


def test_import_keras_bert_needs_only_declared_packages():
    """What `import keras_bert` imports beyond the standard library (wrapt, for the hook) is in
    setup.py's install_requires: a Keras-only machine has no TensorFlow to bring it along."""
    with open(os.path.join(REPO, "keras_bert", "__init__.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    imported = {alias.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in tree.body
                 if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    third_party = imported - set(sys.stdlib_module_names) - {"__future__"}
    with open(os.path.join(REPO, "setup.py"), encoding="utf-8") as f:
        setup_call = next(node for node in ast.walk(ast.parse(f.read()))
                          if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup")
    requires = ast.literal_eval(next(k.value for k in setup_call.keywords
                                     if k.arg == "install_requires"))
    declared = {re.match(r"[\w.-]+", requirement).group() for requirement in requires}
    assert "wrapt" in third_party
    assert third_party <= declared, f"not in install_requires: {third_party - declared}"


def test_the_registration_table_lists_every_registered_class(whole_package):
    """keras_bert.keras_classes() (what the stand-ins are made from, read from the source) is
    exactly the set of classes our modules register, each with the module that defines it."""
    registered, table = whole_package[4]
    assert registered == table
    assert {"BertClassifier", "BertEncoder", "BertAdamW", "FirstPieceAccuracy"} <= set(table)


def test_every_task_folders_public_names_are_public_names_of_the_package(whole_package):
    public, package_all = whole_package[5]
    assert set(public) >= {"BertClassifier", "BertTokenClassifier", "BertQuestionAnswerer",
                           "BertMultipleChoice", "BertEmbedder"}
    assert all(public.values()), public
    assert set(public) <= set(package_all)


TOY_TASK = {
    "__init__.py": '''
        """A toy task folder: one layer, no TensorFlow of its own."""
        from keras_bert.tasks.toy.model import ToyDoubler

        __all__ = ["ToyDoubler"]
    ''',
    "model.py": '''
        import keras


        @keras.saving.register_keras_serializable(package="keras_bert")
        class ToyDoubler(keras.layers.Layer):
            def call(self, inputs):
                return 2 * inputs
    ''',
}


@pytest.mark.slow
def test_a_new_task_folder_is_enough(tmp_path):
    """Adding tasks/toy/ to a copy of the package, and nothing else: keras_bert.ToyDoubler is a
    public name, and a saved model with it loads after `import keras_bert` in a fresh process."""
    shutil.copytree(os.path.join(REPO, "keras_bert"), tmp_path / "keras_bert",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "keras_bert" / "tasks" / "toy").mkdir()
    for name, source in TOY_TASK.items():
        (tmp_path / "keras_bert" / "tasks" / "toy" / name).write_text(textwrap.dedent(source))
    path = tmp_path / "toy.keras"
    out = _run(f"""
        import keras_bert
        print("ToyDoubler" in keras_bert.__all__, keras_modules())
        import keras
        print(keras.saving.get_custom_objects()["keras_bert>ToyDoubler"])
        model = keras.Sequential([keras.Input((2,)), keras_bert.ToyDoubler()])
        model.save("{path}")
    """, cwd=str(tmp_path))
    assert out.strip().splitlines() == [
        "True []", "<keras_bert.tasks.toy.model.ToyDoubler, imported on first use>"]
    out = _run(f"""
        import numpy as np
        import keras_bert
        from keras.saving import load_model
        model = load_model("{path}")
        print(keras_bert.__file__.startswith("{tmp_path}"), type(model.layers[0]).__name__,
              model(np.ones((1, 2))).numpy().tolist())
    """, cwd=str(tmp_path))
    assert out.strip().splitlines()[-1] == "True ToyDoubler [[2.0, 2.0]]"


def test_loading_without_keras_bert_says_what_to_import(saved_classifier):
    """Keras' own error ("make sure they are all imported"), naming our module, and short: the
    vocabulary is an asset of the .keras file, not part of the config the message prints."""
    result = _python(["-c", f"import keras; keras.saving.load_model({str(saved_classifier)!r})"])
    assert result.returncode != 0
    message = result.stderr.strip().splitlines()[-1]
    assert "Could not locate class 'BertClassifier'" in message
    assert "make sure they are all imported" in message
    assert "'module': 'keras_bert.tasks.classification.model'" in message
    assert len(message) < 4000, len(message)
