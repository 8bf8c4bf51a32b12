"""Without the ``openvino`` extra, an OpenVINO export is refused in one line that says what to
install, before anything is written (the library and ``keras-bert export``). Runs everywhere:
the packages are hidden from ``importlib.util.find_spec``."""

import importlib.util

import pytest

from keras_bert.export import openvino_extra


@pytest.fixture
def without_openvino(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(openvino_extra.importlib.util, "find_spec",
                        lambda name, *args: None if name.split(".")[0] == "openvino"
                        else find_spec(name, *args))


def test_export_model_refuses_in_one_line(without_openvino, tmp_path):
    from keras_bert import BertEncoder
    from keras_bert.export import export_model
    encoder = BertEncoder(vocab_size=97, hidden_size=64, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=128)
    with pytest.raises(ImportError) as error:
        export_model(encoder, str(tmp_path), "encoder", format="openvino")
    message = str(error.value)
    assert "\n" not in message and "openvino" in message and "pip install" in message
    assert not (tmp_path / "encoder").exists()


def test_the_command_refuses_before_loading_the_checkpoint(without_openvino, tmp_path,
                                                           capsys):
    from keras_bert.cli import main
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    code = main(["export", str(checkpoint), str(tmp_path / "models"), "--model_name", "m",
                 "--format", "openvino"])
    error = capsys.readouterr().err.strip()
    assert code == 2
    assert len(error.splitlines()) == 1 and "pip install" in error, error
    assert not (tmp_path / "models").exists()
