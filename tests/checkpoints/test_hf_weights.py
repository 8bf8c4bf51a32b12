"""The torch-free reader of Hugging Face weight folders, against folders that transformers 5.23
and torch 2.13 wrote (tests/fixtures/hf_heads/, made by make_hf_fixtures.py): the same model as
model.safetensors, sharded safetensors, pytorch_model.bin and sharded .bin reads the same; every
dtype and view torch.save writes reads as torch holds it; bad files fail with the file's name,
and a .bin that asks for any other Python global is refused without running it."""

import doctest
import importlib.util
import io
import json
import os
import pathlib
import pickle
import shutil
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "hf_heads"
MODULE_FILE = REPO / "keras_bert" / "checkpoints" / "hf_weights.py"


def _load_hf_weights():
    """keras_bert/checkpoints/hf_weights.py, loaded from its file: the package's __init__ imports
    loader.py, which imports TensorFlow, and this module needs none."""
    spec = importlib.util.spec_from_file_location("hf_weights_under_test", MODULE_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


hf_weights = _load_hf_weights()
read_hf_weights = hf_weights.read_hf_weights


def _expected(folder: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / folder / "expected.npz") as data:
        return {k: data[k] for k in data.files}


def test_the_module_imports_no_tensorflow_keras_or_torch():
    code = (f"import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('m', {str(MODULE_FILE)!r})\n"
            f"module = importlib.util.module_from_spec(spec); sys.modules['m'] = module\n"
            f"spec.loader.exec_module(module)\n"
            f"values = module.read_hf_weights({str(FIXTURES / 'seq_cls_bin')!r})\n"
            f"print(len(values), sorted(m for m in sys.modules "
            f"if m.split('.')[0] in ('tensorflow', 'keras', 'torch')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["41", "[]"]


def test_weight_files_in_order_of_preference():
    assert hf_weights.WEIGHT_FILES == ("model.safetensors", "model.safetensors.index.json",
                                       "pytorch_model.bin", "pytorch_model.bin.index.json")


@pytest.mark.parametrize("folder", ["seq_cls", "seq_cls_sharded", "seq_cls_bin",
                                    "seq_cls_bin_sharded", "sentence_transformers", "qa"])
def test_has_hf_weights(folder, tmp_path):
    assert hf_weights.has_hf_weights(FIXTURES / folder)
    shutil.copy(FIXTURES / folder / "tokenizer.json", tmp_path)
    shutil.copy(FIXTURES / folder / "config.json", tmp_path)
    assert not hf_weights.has_hf_weights(tmp_path)
    with pytest.raises(FileNotFoundError, match="has no Hugging Face weights.*model.safetensors"):
        read_hf_weights(tmp_path)


def test_one_classifier_in_four_formats_reads_the_same():
    reference = read_hf_weights(FIXTURES / "seq_cls")
    assert len(reference) == 41
    np.testing.assert_array_equal(reference["classifier.bias"], [1.0, 2.0, 3.0])
    assert reference["classifier.weight"].shape == (3, 32)
    assert reference["bert.embeddings.word_embeddings.weight"].shape == (164, 32)
    for folder in ("seq_cls_sharded", "seq_cls_bin", "seq_cls_bin_sharded"):
        values = read_hf_weights(FIXTURES / folder)
        assert sorted(values) == sorted(reference), folder
        for key, value in reference.items():
            assert values[key].dtype == value.dtype == np.float32
            np.testing.assert_array_equal(values[key], value, err_msg=f"{folder}: {key}")
            assert values[key].flags.c_contiguous and values[key].flags.writeable


def test_shards_each_hold_part_of_the_model():
    index = json.loads((FIXTURES / "seq_cls_sharded" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) == 6
    index = json.loads((FIXTURES / "seq_cls_bin_sharded" / "pytorch_model.bin.index.json")
                       .read_text())
    assert len(set(index["weight_map"].values())) == 2


def test_key_names_transformers_5_writes():
    """Task models keep the bert. prefix; BertModel has none; the tied decoder weight is left
    out; token, span and masked-LM models have no pooler."""
    pooler = "bert.pooler.dense.weight"
    keys = {folder: set(read_hf_weights(FIXTURES / folder)) for folder in (
        "bert_model", "for_pretraining", "for_masked_lm", "token_cls", "qa", "multiple_choice",
        "sentence_transformers")}
    assert "pooler.dense.weight" in keys["bert_model"]
    assert not any(k.startswith("bert.") for k in keys["bert_model"])
    assert keys["sentence_transformers"] == keys["bert_model"]
    heads = {k for k in keys["for_pretraining"] if k.startswith("cls.")}
    assert heads == {"cls.predictions.bias", "cls.predictions.transform.dense.weight",
                     "cls.predictions.transform.dense.bias",
                     "cls.predictions.transform.LayerNorm.weight",
                     "cls.predictions.transform.LayerNorm.bias",
                     "cls.seq_relationship.weight", "cls.seq_relationship.bias"}
    assert pooler in keys["for_pretraining"] and pooler in keys["multiple_choice"]
    for folder in ("for_masked_lm", "token_cls", "qa"):
        assert pooler not in keys[folder], folder
    assert {k for k in keys["qa"] if not k.startswith("bert.")} == {"qa_outputs.weight",
                                                                    "qa_outputs.bias"}
    assert {k for k in keys["token_cls"] if not k.startswith("bert.")} == {"classifier.weight",
                                                                           "classifier.bias"}


@pytest.mark.parametrize("folder", ["dtypes_bin", "dtypes_safetensors"])
def test_every_dtype_and_view_reads_as_torch_holds_it(folder):
    values, expected = read_hf_weights(FIXTURES / folder), _expected(folder)
    assert sorted(values) == sorted(expected)
    for key, value in expected.items():
        assert values[key].dtype == value.dtype, key
        assert values[key].shape == value.shape, key
        np.testing.assert_array_equal(values[key], value, err_msg=key)
    assert values["bfloat16"].dtype == np.float32  # widened exactly
    assert not np.array_equal(values["bfloat16"], expected["float32"] * 3.3)  # it was rounded


def test_views_of_one_storage():
    values = read_hf_weights(FIXTURES / "dtypes_bin")
    base = values["float32"]
    np.testing.assert_array_equal(values["transposed"], base.T)
    np.testing.assert_array_equal(values["row"], base[2])
    np.testing.assert_array_equal(values["column"], base[:, 3])
    np.testing.assert_array_equal(values["strided"], base[::2, 1::2])
    np.testing.assert_array_equal(values["bfloat16_row"], values["bfloat16"][1])
    assert values["empty"].shape == (0, 3) and values["scalar"].shape == ()


def test_safetensors_is_preferred_to_bin(tmp_path):
    shutil.copy(FIXTURES / "seq_cls" / "model.safetensors", tmp_path)
    shutil.copy(FIXTURES / "dtypes_bin" / "pytorch_model.bin", tmp_path)
    assert "classifier.bias" in read_hf_weights(tmp_path)


def test_big_endian_bin(tmp_path):
    """A .bin written on a big-endian machine (byteorder 'big', storages byte-swapped)."""
    source = zipfile.ZipFile(FIXTURES / "seq_cls_bin" / "pytorch_model.bin")
    with zipfile.ZipFile(tmp_path / "pytorch_model.bin", "w") as target:
        for name in source.namelist():
            data = source.read(name)
            if name.endswith("/byteorder"):
                data = b"big"
            elif "/data/" in name:  # every storage of this classifier is float32
                data = np.frombuffer(data, "<f4").astype(">f4").tobytes()
            target.writestr(name, data)
    values, reference = read_hf_weights(tmp_path), read_hf_weights(FIXTURES / "seq_cls")
    for key, value in reference.items():
        np.testing.assert_array_equal(values[key], value)
        assert values[key].dtype.isnative


# ---------------------------------------------------------------------------------- bad input
def test_truncated_safetensors(tmp_path):
    data = (FIXTURES / "seq_cls" / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=r"model.safetensors' is truncated or not a safetensors "
                                         r"file: the bytes \[\d+, \d+\) of tensor '.*' run "
                                         r"past the end"):
        read_hf_weights(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(data[:100])
    with pytest.raises(ValueError, match="is truncated or not a safetensors file: the header "
                                         "says it is"):
        read_hf_weights(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(data[:5])
    with pytest.raises(ValueError, match="fewer than the 8-byte header size"):
        read_hf_weights(tmp_path)


def test_not_a_safetensors_file(tmp_path):
    (tmp_path / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\n")
    with pytest.raises(ValueError, match="model.safetensors' is truncated or not a safetensors"):
        read_hf_weights(tmp_path)


def test_safetensors_entry_whose_offsets_do_not_fit_its_shape(tmp_path):
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})
    (tmp_path / "model.safetensors").write_bytes(
        struct.pack("<Q", len(header)) + header.encode() + bytes(16))
    with pytest.raises(ValueError, match=r"tensor 'w' of dtype F32 and shape \[2, 2\] has "
                                         r"data_offsets \[0, 12\]"):
        read_hf_weights(tmp_path)


def test_index_naming_a_missing_shard(tmp_path):
    folder = tmp_path / "sharded"
    shutil.copytree(FIXTURES / "seq_cls_sharded", folder)
    (folder / "model-00004-of-00006.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="index.json' names the shard "
                                                "'model-00004-of-00006.safetensors'"):
        read_hf_weights(folder)


def test_index_naming_a_key_its_shard_lacks(tmp_path):
    folder = tmp_path / "sharded"
    shutil.copytree(FIXTURES / "seq_cls_bin_sharded", folder)
    index_path = folder / "pytorch_model.bin.index.json"
    index = json.loads(index_path.read_text())
    index["weight_map"]["classifier.weight"] = "pytorch_model-00001-of-00002.bin"
    index_path.write_text(json.dumps(index))
    with pytest.raises(ValueError, match=r"says 'pytorch_model-00001-of-00002.bin' holds "
                                         r"\['classifier.weight'\], but it does not"):
        read_hf_weights(folder)


def test_index_naming_a_file_outside_its_folder(tmp_path):
    folder = tmp_path / "sharded"
    shutil.copytree(FIXTURES / "seq_cls_sharded", folder)
    index_path = folder / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    index["weight_map"]["classifier.bias"] = "../seq_cls/model.safetensors"
    index_path.write_text(json.dumps(index))
    with pytest.raises(ValueError, match="'weight_map' must map each key to the name of a shard "
                                         "file in the same folder"):
        read_hf_weights(folder)


def _torch_zip(path: pathlib.Path, pickled: bytes) -> None:
    """A file laid out as torch.save's zip format, holding ``pickled`` as its data.pkl."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickled)
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/version", "3\n")


class _RunsACommand:
    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def test_a_bin_with_a_forbidden_global_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "the_payload_ran"
    payload = pickle.dumps({"bert.pooler.dense.weight": _RunsACommand(f"touch {marker}")},
                           protocol=2)
    _torch_zip(tmp_path / "pytorch_model.bin", payload)
    with pytest.raises(ValueError, match=r"pytorch_model.bin' needs the Python global "
                                         r"(posix|os|nt)\.system, .* it was refused, not run"):
        read_hf_weights(tmp_path)
    assert not marker.exists()
    pickle.loads(payload)  # what an unrestricted unpickler would have done
    assert marker.exists()


def test_a_bin_that_is_not_a_state_dict(tmp_path):
    _torch_zip(tmp_path / "pytorch_model.bin", pickle.dumps([1, 2, 3], protocol=2))
    with pytest.raises(ValueError, match="holds a list, not a state dict"):
        read_hf_weights(tmp_path)
    _torch_zip(tmp_path / "pytorch_model.bin", pickle.dumps([1, 2, 3], protocol=2)[:-3])
    with pytest.raises(ValueError, match="pytorch_model.bin': its data.pkl is not a readable "
                                         "state dict"):
        read_hf_weights(tmp_path)


def test_legacy_and_truncated_bin_files(tmp_path):
    legacy = io.BytesIO()
    pickle.dump(0x1950A86A20F9469CFC6C, legacy, protocol=2)  # the legacy format's magic number
    (tmp_path / "pytorch_model.bin").write_bytes(legacy.getvalue())
    with pytest.raises(ValueError, match="pytorch_model.bin' is not a PyTorch zip checkpoint "
                                         ".*legacy.*re-save it with safetensors"):
        read_hf_weights(tmp_path)
    data = (FIXTURES / "seq_cls_bin" / "pytorch_model.bin").read_bytes()
    (tmp_path / "pytorch_model.bin").write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match="not a PyTorch zip checkpoint"):
        read_hf_weights(tmp_path)


def test_a_bin_whose_storage_is_cut_short(tmp_path):
    source = zipfile.ZipFile(FIXTURES / "seq_cls_bin" / "pytorch_model.bin")
    with zipfile.ZipFile(tmp_path / "pytorch_model.bin", "w") as target:
        for name in source.namelist():
            data = source.read(name)
            if "/data/" in name:
                data = data[:len(data) // 2]
            target.writestr(name, data)
    with pytest.raises(ValueError, match=r"pytorch_model.bin': storage '\d+' should hold \d+ "
                                         r"elements"):
        read_hf_weights(tmp_path)


def test_docstring_example_runs():
    assert doctest.testmod(hf_weights).failed == 0
