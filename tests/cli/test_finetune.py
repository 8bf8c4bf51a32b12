"""`keras-bert finetune` and `keras-bert extract-features` end to end on a tiny random checkpoint:
MirroredStrategy over two CPU devices, SQuAD 2.0 outputs, bad input, and the JSONL layout."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_bert import BertClassifier, BertEncoder
from keras_bert.cli import main
from keras_bert.tokenization import BertTokenizer
from keras_bert.tasks.squad.metrics import squad_scores
from tests.helpers import cli_before_tensorflow
from tests.tasks.tiny_checkpoint import tiny_checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROWS = [{"text": f"the {w} was {a}", "label": label} for w in ("movie", "film", "book", "meal")
        for a, label in (("good", "pos"), ("awful", "neg"))]


def write_jsonl(path, rows):
    with open(path, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "uncased_tiny"), "google")


@pytest.mark.slow
def test_classification_under_mirrored_strategy(tmp_path, checkpoint):
    train = write_jsonl(tmp_path / "train.jsonl", ROWS * 4)
    dev = write_jsonl(tmp_path / "dev.jsonl", ROWS)
    out = tmp_path / "out"
    # Two logical CPU devices must be made before TensorFlow starts: a fresh process.
    result = subprocess.run(
        [sys.executable, "-m", "keras_bert.cli", "finetune", "--task", "classification",
         "--init_checkpoint", checkpoint, "--train_file", train, "--dev_file", dev,
         "--output_dir", str(out), "--epochs", "2", "--batch_size", "8", "--max_seq_length",
         "16", "--num_cpu_devices", "2", "--strategy", "mirrored", "--no_progress"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True,
        timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "(MirroredStrategy) with 2 replica(s)" in result.stderr
    results = json.loads((out / "eval_results.json").read_text())
    assert results["labels"] == ["neg", "pos"] and results["primary_metric"] == "accuracy"
    assert [e["epoch"] for e in results["epochs"]] == [1, 2]
    best = results["epochs"][results["best_epoch"] - 1]["dev"]
    assert results["best"] == best
    assert sorted(os.listdir(out / "best_model")) == [
        "bert_config.json", "calibration_texts.txt", "model.keras", "tokenizer_config.json",
        "vocab.txt"]
    # The kept model is the best epoch's: it scores what the results file says.
    model = BertClassifier.from_pretrained(str(out / "best_model"))
    predicted = model.predict_labels([r["text"] for r in ROWS])
    accuracy = np.mean([p == r["label"] for p, r in zip(predicted, ROWS)])
    assert accuracy == pytest.approx(best["accuracy"])


def squad_json(path, contexts):
    data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": contexts}]}
    path.write_text(json.dumps(data, indent=1))
    return str(path)


@pytest.mark.slow
def test_squad_v2_writes_predictions_and_official_scores(tmp_path, checkpoint):
    context = "john lives in paris . mary works in london ."
    qas = [{"id": "where", "question": "where does john live ?",
            "answers": [{"text": "paris", "answer_start": context.index("paris")}]},
           {"id": "who", "question": "who works in london ?",
            "answers": [{"text": "mary", "answer_start": context.index("mary")}]},
           {"id": "none", "question": "who is old ?", "answers": [], "is_impossible": True}]
    train = squad_json(tmp_path / "train.json", [{"context": context, "qas": qas}] * 4)
    dev = squad_json(tmp_path / "dev.json", [{"context": context, "qas": qas}])
    out = tmp_path / "out"
    assert main(["finetune", "--task", "squad", "--init_checkpoint", checkpoint,
                 "--train_file", train, "--dev_file", dev, "--output_dir", str(out),
                 "--epochs", "1", "--batch_size", "4", "--max_seq_length", "24",
                 "--max_query_length", "8", "--doc_stride", "8", "--no_progress"]) == 0
    results = json.loads((out / "eval_results.json").read_text())
    assert results["squad_version_2"] is True
    predictions = json.loads((out / "predictions.json").read_text())
    assert set(predictions) == {"where", "who", "none"}
    assert all(p == "" or p in context for p in predictions.values())
    gold = {q["id"]: [a["text"] for a in q["answers"]] for q in qas}
    assert results["best"] == squad_scores(gold, predictions, version_2=True)
    assert set(json.loads((out / "null_odds.json").read_text())) == set(predictions)
    nbest = json.loads((out / "nbest_predictions.json").read_text())
    assert abs(sum(c["probability"] for c in nbest["where"]) - 1.0) < 1e-6


def test_a_dev_label_unknown_to_training_fails_before_tensorflow(tmp_path, checkpoint):
    train = write_jsonl(tmp_path / "train.jsonl", ROWS)
    dev = write_jsonl(tmp_path / "dev.jsonl", ROWS[:2] + [{"text": "odd", "label": "meh"}])
    code, error, tensorflow = cli_before_tensorflow(
        ["finetune", "--task", "classification", "--init_checkpoint", checkpoint,
         "--train_file", train, "--dev_file", dev, "--output_dir", str(tmp_path / "out"),
         "--no_progress"])
    assert code == 2 and not tensorflow, error
    assert error == (f"keras-bert finetune: error: {dev}:3: label 'meh' is not one of the labels "
                     f"the model learns ('neg', 'pos'); fix it, or pass every label name with "
                     f"--labels\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("files, message", [
    ({"config.json": json.dumps({"model_type": "roberta",
                                 "architectures": ["RobertaForSequenceClassification"]}),
      "model.safetensors": ""},
     "--init_checkpoint: {path}/config.json: model_type is 'roberta' "
     "(RobertaForSequenceClassification), not 'bert'; keras-bert reads BERT checkpoints only: "
     "give a folder whose config.json says model_type 'bert'"),
    ({"README.md": "notes"},
     "--init_checkpoint: '{path}' is not a checkpoint directory: expected bert_config.json"),
])
def test_a_checkpoint_folder_that_holds_no_bert_fails_before_tensorflow(tmp_path, files,
                                                                          message):
    folder = tmp_path / "model"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    train = write_jsonl(tmp_path / "train.jsonl", ROWS)
    code, error, tensorflow = cli_before_tensorflow(
        ["finetune", "--task", "classification", "--init_checkpoint", str(folder),
         "--train_file", train, "--output_dir", str(tmp_path / "out")])
    assert code == 2 and not tensorflow, error
    assert error.startswith(f"keras-bert finetune: error: {message.format(path=folder)}"), error
    assert error.count("\n") == 1 and not (tmp_path / "out").exists()


def write_reviews_csv(path, rows, columns=("product", "review", "score")):
    """A CSV as Amazon Fine Food reviews export it: the text in "review", the label in "score",
    quoted fields with commas, doubled quotes and newlines."""
    def quoted(value):
        return '"' + str(value).replace('"', '""') + '"'
    lines = [",".join(columns)]
    for i, row in enumerate(rows):
        fields = {"product": f"B00{i}", "review": row["text"].replace(" was ", ', "was"\n'),
                  "score": 5 if row["label"] == "pos" else 1}
        lines.append(",".join(quoted(fields[c]) for c in columns))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.slow
def test_csv_columns_named_on_the_command_line(tmp_path, checkpoint):
    train = write_reviews_csv(tmp_path / "train.csv", ROWS * 2)
    # The dev file orders its columns differently: it is read by the same names.
    dev = write_reviews_csv(tmp_path / "dev.csv", ROWS, columns=("score", "review", "product"))
    out = tmp_path / "out"
    assert main(["finetune", "--task", "classification", "--init_checkpoint", checkpoint,
                 "--train_file", train, "--dev_file", dev, "--output_dir", str(out),
                 "--text_column", "review", "--label_column", "score", "--epochs", "1",
                 "--batch_size", "8", "--max_seq_length", "16", "--no_progress"]) == 0
    results = json.loads((out / "eval_results.json").read_text())
    assert results["labels"] == ["1", "5"]
    model = BertClassifier.from_pretrained(str(out / "best_model"))
    predicted = model.predict_labels([r["text"].replace(" was ", ', "was"\n') for r in ROWS])
    accuracy = np.mean([p == ("5" if r["label"] == "pos" else "1")
                        for p, r in zip(predicted, ROWS)])
    assert accuracy == pytest.approx(results["best"]["accuracy"])


@pytest.mark.parametrize("flags,message", [
    (["--text_column", "text", "--label_column", "score"],
     "{train}:1: missing text column 'text'; the header has 'product', 'review', 'score'"),
    (["--text_column", "review"],
     "{train}:1: missing label column 'label'; the header has 'product', 'review', 'score'"),
    (["--text_column", "review", "--text_pair_column", "summary", "--label_column", "score"],
     "{train}:1: missing text_pair column 'summary'; the header has 'product', 'review', "
     "'score'"),
    (["--text_column", "score", "--label_column", "score"],
     "text_column and label_column both name 'score'; a column is read for one role only"),
])
def test_bad_column_flags_fail_in_one_line_before_training(flags, message, tmp_path, checkpoint,
                                                           capsys):
    train = write_reviews_csv(tmp_path / "train.csv", ROWS)
    out = tmp_path / "out"
    assert main(["finetune", "--task", "classification", "--init_checkpoint", checkpoint,
                 "--train_file", train, "--output_dir", str(out), "--no_progress",
                 *flags]) == 2
    assert capsys.readouterr().err == (f"keras-bert finetune: error: "
                                       f"{message.format(train=train)}\n")
    assert not out.exists()


def test_extract_features_layout_and_values(tmp_path, checkpoint):
    inputs = tmp_path / "input.txt"
    inputs.write_text("The cat sat.\njohn lives in paris ||| mary works\n")
    output = tmp_path / "features.jsonl"
    assert main(["extract-features", "--init_checkpoint", checkpoint, "--input_file",
                 str(inputs), "--output_file", str(output), "--layers=-1,-2",
                 "--max_seq_length", "12", "--no_progress"]) == 0
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert [line["linex_index"] for line in lines] == [0, 1]
    assert list(lines[0]) == ["linex_index", "features"]
    assert [f["token"] for f in lines[0]["features"]] == ["[CLS]", "the", "cat", "sat", ".",
                                                        "[SEP]"]
    assert [f["token"] for f in lines[1]["features"]] == [
        "[CLS]", "john", "lives", "in", "paris", "[SEP]", "mary", "works", "[SEP]"]
    first = lines[0]["features"][1]
    assert [layer["index"] for layer in first["layers"]] == [-1, -2]
    tokenizer = BertTokenizer.from_pretrained(checkpoint)
    ids = np.array([tokenizer.encode("The cat sat.")["input_word_ids"]], dtype=np.int32)
    outputs = BertEncoder.from_pretrained(checkpoint)({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                                        "input_type_ids": np.zeros_like(ids)})
    expected = np.asarray(outputs["encoder_outputs"][-2])[0, 1]
    np.testing.assert_allclose(first["layers"][1]["values"], np.round(expected, 6), atol=2e-6)
    assert len(first["layers"][0]["values"]) == 64
