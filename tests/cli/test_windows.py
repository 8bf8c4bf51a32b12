"""Long texts on the command line (issue 52): `finetune`, `evaluate`, `predict` and `export` take
--window_stride and --window_combination; the runs say how many texts were read as windows; a
bad stride fails before TensorFlow loads."""

import csv
import json
import logging

import pytest

from keras_bert.cli import main
from keras_bert.tasks.checkpoint_models import model_of_checkpoint
from tests.helpers import main_in_fresh_process
from tests.tasks.tiny_checkpoint import WORDS, tiny_checkpoint

LONG = " ".join(WORDS[:30])  # 30 WordPieces: 9 windows of 6 at --max_seq_length 8, stride 3
ROWS = [{"review": f"the {w} was {a}", "stars": label} for w in ("movie", "film", "book")
        for a, label in (("good", "pos"), ("awful", "neg"))] + [{"review": LONG, "stars": "pos"}]


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, ("review", "stars"))
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
    work = tmp_path_factory.mktemp("run")
    checkpoint = tiny_checkpoint(str(work / "ckpt"), "google")
    data = write_csv(work / "train.csv", ROWS)
    out = work / "out"
    assert main(["finetune", "--task", "classification", "--init_checkpoint", checkpoint,
                 "--train_file", data, "--output_dir", str(out), "--text_column", "review",
                 "--label_column", "stars", "--epochs", "1", "--batch_size", "4",
                 "--max_seq_length", "8", "--window_stride", "3"]) == 0
    return out / "best_model", data


def test_finetune_keeps_the_stride_and_predict_reads_long_texts(finetuned, tmp_path, capsys,
                                                                caplog):
    model_dir, data = finetuned
    assert model_of_checkpoint(str(model_dir)).window_stride == 3
    columns = ["--text_column", "review", "--label_column", "stars"]
    caplog.set_level(logging.INFO)
    output = tmp_path / "mean.jsonl"
    assert main(["predict", "--model", str(model_dir), "--input_file", data, *columns,
                 "--output_file", str(output)]) == 0
    assert "1 of 7 texts are longer than one window: 15 windows in all" in caplog.text
    mean = [json.loads(line) for line in output.read_text().splitlines()]
    first = tmp_path / "first.jsonl"
    assert main(["predict", "--model", str(model_dir), "--input_file", data, *columns,
                 "--output_file", str(first), "--window_combination", "first"]) == 0
    cut = [json.loads(line) for line in first.read_text().splitlines()]
    assert [r["probabilities"] for r in mean[:6]] == [r["probabilities"] for r in cut[:6]]
    assert mean[6]["probabilities"] != cut[6]["probabilities"]
    assert main(["evaluate", "--model", str(model_dir), "--input_file", data, *columns]) == 0
    assert json.loads(capsys.readouterr().out)["examples"] == 7


@pytest.mark.slow
def test_export_limits_windows_by_default_and_0_lifts_the_limit(finetuned, tmp_path):
    import numpy as np
    import tensorflow as tf
    from keras_bert.config import DEFAULT_MAX_WINDOWS
    from tests.serving.graph_mode import GraphModeModel
    model_dir, _ = finetuned
    # One window more than the default allows: windows of 6 WordPieces, 3 apart.
    longest = " ".join((WORDS * 40)[:6 + 3 * DEFAULT_MAX_WINDOWS])
    base = str(tmp_path / "models")
    assert main(["export", str(model_dir), base, "--model_name", "limited"]) == 0
    assert main(["export", str(model_dir), base, "--model_name", "unlimited",
                 "--max_windows", "0"]) == 0
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=f"max_windows={DEFAULT_MAX_WINDOWS} windows"):
        GraphModeModel(f"{base}/limited/1").run("serving_default",
                                                text=np.array([longest], object))
    outputs = GraphModeModel(f"{base}/unlimited/1").run("serving_default",
                                                        text=np.array([longest], object))
    np.testing.assert_allclose(outputs["probabilities"], model_of_checkpoint(
        str(model_dir)).predict([longest], verbose=0), atol=1e-5)


def test_a_bad_stride_fails_before_tensorflow_loads(tmp_path):
    data = write_csv(tmp_path / "train.csv", ROWS)
    checkpoint = str(tmp_path / "ckpt")
    (tmp_path / "ckpt").mkdir()
    cases = {
        "zero": (["predict", "--model", data, "--window_stride", "0", "a text"],
                 "--window_stride must be a whole number of WordPieces, at least 1"),
        "export": (["export", data, str(tmp_path / "models"), "--model_name", "m",
                    "--max_windows", "-1"],
                   "--max_windows must be at least 1, or 0 for no limit"),
        "finetune": (["finetune", "--task", "classification", "--init_checkpoint", checkpoint,
                      "--train_file", data, "--output_dir", str(tmp_path / "out"),
                      "--max_seq_length", "8", "--window_stride", "6"],
                     "window_stride=6 is not less than the window of 6 WordPieces"),
    }
    results, tensorflow_loaded = main_in_fresh_process(
        {name: argv for name, (argv, _) in cases.items()})
    for name, (_, expected) in cases.items():
        rc, message = results[name]
        assert rc == 2 and expected in message, (name, message)
    assert not tensorflow_loaded
