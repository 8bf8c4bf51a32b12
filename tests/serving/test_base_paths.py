"""`keras-bert serve` given a checkpoint folder where a SavedModel base path belongs (or a
numbered folder in it holding one) fails at start, before TensorFlow loads, in one line that
says what the folder holds and the export command; TF Serving's valid layouts, versions that
have yet to appear included, still start."""

import os

import pytest

from keras_bert.serving.base_paths import check_base_paths
from keras_bert.serving.config_files import single_model_config
from tests.helpers import main_in_fresh_process
from tests.serving.server_helpers import write_model_config
from tests.tasks.tiny_checkpoint import tiny_checkpoint

def make(folder, *files: str) -> str:
    """``folder`` with each of ``files`` (empty; a name's folders made)."""
    for name in files:
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").close()
    return str(folder)


@pytest.mark.parametrize("files, holds", [
    (["model.keras", "bert_config.json", "vocab.txt"], "a keras-bert checkpoint (model.keras)"),
    (["config.json", "model.safetensors", "vocab.txt"],
     "a Hugging Face checkpoint (config.json + model.safetensors)"),
    (["config.json", "tf_model.h5"], "a Hugging Face checkpoint (config.json + tf_model.h5)"),
    (["bert_config.json", "vocab.txt", "bert_model.ckpt.index",
      "bert_model.ckpt.data-00000-of-00001"],
     "a Google TF1 checkpoint (bert_config.json + bert_model.ckpt.index)"),
])
def test_a_checkpoint_folder_is_refused_naming_it_and_the_export(tmp_path, files, holds):
    base = make(tmp_path / "ckpt", *files)
    with pytest.raises(ValueError) as error:
        check_base_paths(single_model_config("bert", base))
    assert str(error.value) == (
        f"model bert: {base} is {holds}, not a SavedModel base path (numbered version "
        f"directories each holding saved_model.pb); export it first: keras-bert export {base} "
        "EXPORT_BASE --model_name bert, then serve --model_base_path EXPORT_BASE/bert")


def test_a_checkpoint_in_a_version_folder_is_refused(tmp_path):
    base = make(tmp_path / "bert", "1/config.json", "1/model.safetensors")
    with pytest.raises(ValueError, match=(
            f"^model bert: {base}/1 is a Hugging Face checkpoint \\(config.json \\+ "
            f"model.safetensors\\), not a SavedModel version \\({base}/1/saved_model.pb\\); "
            f"export it first: keras-bert export {base}/1 EXPORT_BASE")):
        check_base_paths(single_model_config("bert", base))


@pytest.mark.parametrize("files", [
    [],  # empty: TF Serving waits for a version
    ["1/variables/variables.index"],  # a version being copied
    ["1/saved_model.pb"],
    # A version holding a SavedModel is served whatever else lies beside it.
    ["1/saved_model.pb", "model.keras", "2/config.json", "2/model.safetensors"],
    ["config.json", "vocab.txt"],  # no weights: no checkpoint
    ["bert_config.json", "vocab.txt"],  # no checkpoint index: no checkpoint
])
def test_tf_servings_layouts_pass(tmp_path, files):
    check_base_paths(single_model_config("bert", make(tmp_path / "bert", *files)))
    check_base_paths(single_model_config("bert", str(tmp_path / "missing")))


def test_serve_refuses_a_real_checkpoint_before_tensorflow_loads(tmp_path, free_ports):
    checkpoint = tiny_checkpoint(str(tmp_path / "models" / "tiny"), "keras")
    config = write_model_config(tmp_path / "models", ["tiny"])
    port, rest_port = free_ports(2)
    cases = {"base path": ["serve", "--port", str(port), "--model_base_path", checkpoint],
             "config file": ["serve", "--port", str(port), "--rest_api_port", str(rest_port),
                             "--model_config_file", config]}
    results, tensorflow_loaded = main_in_fresh_process(cases, timeout_s=120)
    for name, model in (("base path", "default"), ("config file", "tiny")):
        assert results[name] == (2, (
            f"model server: error: model {model}: {checkpoint} is a keras-bert checkpoint "
            "(model.keras), not a SavedModel base path (numbered version directories each "
            f"holding saved_model.pb); export it first: keras-bert export {checkpoint} "
            f"EXPORT_BASE --model_name {model}, then serve --model_base_path "
            f"EXPORT_BASE/{model}\n")), name
    assert not tensorflow_loaded, "the check loaded TensorFlow"
    # The server made in-process (python -m keras_bert.serving.server, tests) refuses it too.
    from keras_bert.serving.server import ModelServer, build_flag_parser
    with pytest.raises(ValueError, match=f"^model default: {checkpoint} is a keras-bert "):
        ModelServer(build_flag_parser().parse_args(["--model_base_path", checkpoint]))
