"""`keras-bert finetune`'s end (the summary, the baselines, the curves, the dev predictions),
`keras-bert evaluate` and the offline `keras-bert predict`, on a tiny random checkpoint; and the
inputs checked before TensorFlow loads."""

import csv
import json
import os
import sys

import numpy as np
import pytest

from keras_bert import BertClassifier, BertTokenClassifier
from keras_bert.checkpoints.saving import save_checkpoint
from keras_bert.cli import main
from tests.helpers import main_in_fresh_process
from tests.tasks.tiny_checkpoint import tiny_checkpoint

ROWS = [{"review": f"the {w} was {a}", "stars": label} for w in ("movie", "film", "book", "meal")
        for a, label in (("good", "pos"), ("awful", "neg"))]


def write_csv(path, rows, columns=("review", "stars")):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
    return str(path)


def set_head_bias(model, bias):
    """Makes the head's bias dominate, so that the model predicts one class everywhere."""
    head_bias = [v for v in model.weights if v.path.endswith("bias") and v.shape == (len(bias),)]
    head_bias[-1].assign(np.asarray(bias, np.float32))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "uncased_tiny"), "google")


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory, checkpoint):
    """A finished `keras-bert finetune` run: (its directory, stdout, stderr, the dev file)."""
    work = tmp_path_factory.mktemp("run")
    train = write_csv(work / "train.csv", ROWS * 4)
    dev = write_csv(work / "dev.csv", ROWS)
    out = work / "out"
    capture = pytest.MonkeyPatch()
    stdout, stderr = work / "stdout.txt", work / "stderr.txt"
    with open(stdout, "w") as out_file, open(stderr, "w") as err_file:
        capture.setattr(sys, "stdout", out_file)
        capture.setattr(sys, "stderr", err_file)
        try:
            rc = main(["finetune", "--task", "classification", "--init_checkpoint", checkpoint,
                       "--train_file", train, "--dev_file", dev, "--output_dir", str(out),
                       "--text_column", "review", "--label_column", "stars", "--epochs", "2",
                       "--batch_size", "8", "--max_seq_length", "16", "--learning_rate", "1e-3",
                       "--pooling", "mean"])
        finally:
            capture.undo()
    assert rc == 0, stderr.read_text()[-3000:]
    return out, stdout.read_text(), stderr.read_text(), dev


def test_finetune_reports_baselines_per_class_counts_and_next_commands(finetuned):
    out, stdout, stderr, dev = finetuned
    result = json.loads(stdout)  # stdout holds the result alone: progress went to stderr
    results = json.loads((out / "eval_results.json").read_text())
    best = results["best"]
    assert result["best"] == best
    assert best["majority_rate"] == 0.5 and best["majority_label"] in ("neg", "pos")
    assert {name: counts["rows"] for name, counts in best["per_class"].items()} == \
        {"neg": 4, "pos": 4}
    assert sum(counts["predicted"] for counts in best["per_class"].values()) == 8
    summary = stderr[stderr.index("keras-bert finetune: classification on 32 training rows"):]
    assert "2 epochs, in " in summary
    assert f"accuracy {best['accuracy']:.4f} (always {best['majority_label']!r}: 0.5000)" \
        in summary
    assert "label  precision  recall" in summary
    best_model = os.path.join(str(out), "best_model")
    assert (f"keras-bert evaluate --model {best_model} --input_file {dev} --text_column review "
            f"--label_column stars") in summary
    assert f"keras-bert export {best_model} " in summary and "keras-bert serve " in summary
    assert ("WARNING:" in summary) == (results.get("warning") is not None)
    assert "1/4" in stderr or "4/4" in stderr  # Keras' progress bar, on stderr
    # --pooling reached the model.
    assert BertClassifier.from_pretrained(best_model).pooling == "mean"


def test_finetune_writes_curves_and_dev_predictions(finetuned):
    out, _, _, _ = finetuned
    assert (out / "training_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = [json.loads(line) for line in (out / "dev_predictions.jsonl").read_text()
               .splitlines()]
    assert [r["text"] for r in records] == [r["review"] for r in ROWS]
    assert [r["true_label"] for r in records] == [r["stars"] for r in ROWS]
    for record in records:
        assert set(record["probabilities"]) == {"neg", "pos"}
        assert sum(record["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
        assert record["label"] == max(record["probabilities"], key=record["probabilities"].get)
    best = json.loads((out / "eval_results.json").read_text())["best"]
    correct = np.mean([r["label"] == r["true_label"] for r in records])
    assert correct == pytest.approx(best["accuracy"])
    # The curves' data: the loss after every step, kept with the epochs.
    results = json.loads((out / "eval_results.json").read_text())
    assert [e["epoch"] for e in results["epochs"]] == [1, 2]


def test_best_model_keeps_no_optimizer_state_and_predicts_as_the_run_did(finetuned, tmp_path):
    import io
    import zipfile

    import h5py
    import keras

    out, _, _, dev = finetuned
    with zipfile.ZipFile(out / "best_model" / "model.keras") as archive:
        config = json.loads(archive.read("config.json"))
        with h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r") as weights:
            entries = []
            weights.visit(entries.append)
    assert any(entry.startswith("layers/bert_encoder") for entry in entries)
    assert not [entry for entry in entries if "optimizer" in entry]
    assert not config.get("compile_config")
    # It loads with plain Keras, uncompiled, and predicts what the run's model predicted.
    model = keras.saving.load_model(str(out / "best_model" / "model.keras"))
    assert not model.compiled
    kept = [json.loads(line) for line in (out / "dev_predictions.jsonl").read_text()
            .splitlines()]
    probabilities = model.predict([row["review"] for row in ROWS], verbose=0)
    np.testing.assert_allclose(
        probabilities, [[r["probabilities"][name] for name in ("neg", "pos")] for r in kept],
        atol=1e-5)
    # And it is fine-tuned again as any checkpoint is (the dev predictions carrying the ids).
    again = tmp_path / "again"
    with_ids = write_csv(tmp_path / "with_ids.csv", [{"id": f"r{i}", **row}
                                                     for i, row in enumerate(ROWS)],
                         columns=("id", "review", "stars"))
    assert main(["finetune", "--task", "classification", "--init_checkpoint",
                 str(out / "best_model"), "--train_file", with_ids, "--dev_file", with_ids,
                 "--output_dir", str(again), "--text_column", "review", "--label_column",
                 "stars", "--keep_columns", "id", "--epochs", "1", "--batch_size", "8",
                 "--max_seq_length", "16", "--no_progress"]) == 0
    assert (again / "best_model" / "model.keras").exists()
    assert [json.loads(line)["id"] for line in
            (again / "dev_predictions.jsonl").read_text().splitlines()] == \
        [f"r{i}" for i in range(len(ROWS))]


def test_evaluate_and_predict_offline_agree_with_the_run(finetuned, tmp_path, capsys):
    out, _, _, dev = finetuned
    model_dir = str(out / "best_model")
    columns = ["--text_column", "review", "--label_column", "stars"]
    # evaluate: the dev rows with an id column, which its predictions file keeps.
    with_ids = write_csv(tmp_path / "with_ids.csv", [{"id": f"r{i}", **row}
                                                     for i, row in enumerate(ROWS)],
                         columns=("id", "review", "stars"))
    assert main(["evaluate", "--model", model_dir, "--input_file", with_ids, *columns,
                 "--keep_columns", "id", "--predictions_file", str(tmp_path / "dev.csv")]) == 0
    captured = capsys.readouterr()
    scores = json.loads(captured.out)
    best = json.loads((out / "eval_results.json").read_text())["best"]
    assert scores["accuracy"] == pytest.approx(best["accuracy"])
    assert scores["majority_rate"] == 0.5 and scores["examples"] == 8
    assert "(always " in captured.err and "label  precision  recall" in captured.err
    with open(tmp_path / "dev.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["id", "text", "label", "probabilities_neg", "probabilities_pos",
                             "true_label"]
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(len(ROWS))]
    assert [r["true_label"] for r in rows] == [row["stars"] for row in ROWS]
    kept = [json.loads(line) for line in (out / "dev_predictions.jsonl").read_text()
            .splitlines()]
    assert [r["label"] for r in rows] == [r["label"] for r in kept]

    # predict: a file (its label column ignored) to JSON Lines, and texts to stdout.
    output = tmp_path / "predictions.jsonl"
    assert main(["predict", "--model", model_dir, "--input_file", dev, *columns,
                 "--output_file", str(output)]) == 0
    predicted = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["label"] for r in predicted] == [r["label"] for r in kept]
    assert all("true_label" not in r for r in predicted)
    for mine, theirs in zip(predicted, kept):
        for name in ("neg", "pos"):
            assert mine["probabilities"][name] == pytest.approx(theirs["probabilities"][name],
                                                                abs=1e-5)
    assert main(["predict", "--model", model_dir, ROWS[0]["review"], "a meal"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in lines] == [ROWS[0]["review"], "a meal"]
    assert lines[0]["label"] == kept[0]["label"]


def test_predict_says_where_it_wrote_and_keeps_the_columns_named(finetuned, tmp_path, capsys):
    out, _, _, _ = finetuned
    model_dir = str(out / "best_model")
    rows = [{"id": f"r{i}", **row} for i, row in enumerate(ROWS)]
    csv_input = write_csv(tmp_path / "test.csv", rows, columns=("id", "review", "stars"))
    jsonl_input = tmp_path / "test.jsonl"
    jsonl_input.write_text("".join(json.dumps({"id": i, "text": row["review"]}) + "\n"
                                   for i, row in enumerate(ROWS)))
    for source, columns in ((csv_input, ["--text_column", "review"]),
                            (str(jsonl_input), [])):
        for suffix in (".jsonl", ".csv"):
            output = tmp_path / f"from_{os.path.basename(source)}{suffix}"
            assert main(["predict", "--model", model_dir, "--input_file", source, *columns,
                         "--keep_columns", "id", "--output_file", str(output)]) == 0
            captured = capsys.readouterr()
            assert captured.out == ""
            assert captured.err.strip().splitlines()[-1] == \
                f"wrote {len(ROWS):,} predictions to {output}"
            if suffix == ".csv":
                with open(output) as f:
                    records = list(csv.DictReader(f))
                ids = [str(i) if source.endswith(".jsonl") else f"r{i}"
                       for i in range(len(ROWS))]
            else:
                records = [json.loads(line) for line in output.read_text().splitlines()]
                ids = list(range(len(ROWS))) if source.endswith(".jsonl") else \
                    [f"r{i}" for i in range(len(ROWS))]
            assert list(records[0])[:3] == ["id", "text", "label"], (source, suffix)
            assert [r["id"] for r in records] == ids, (source, suffix)
            assert [r["text"] for r in records] == [row["review"] for row in ROWS]
    # evaluate's predictions file keeps them too: the test above evaluates such an id CSV.


def test_evaluate_warns_about_a_model_that_predicts_one_class(finetuned, tmp_path, capsys):
    out, _, _, dev = finetuned
    model = BertClassifier.from_pretrained(str(out / "best_model"))
    set_head_bias(model, [0.0, 50.0])  # "pos" for every row
    save_checkpoint(model, str(tmp_path / "always_pos"))
    assert main(["evaluate", "--model", str(tmp_path / "always_pos"), "--input_file", dev,
                 "--text_column", "review", "--label_column", "stars"]) == 0
    captured = capsys.readouterr()
    scores = json.loads(captured.out)
    assert scores["per_class"]["pos"]["predicted"] == 8 and scores["accuracy"] == 0.5
    assert scores["warning"].startswith("the model predicted 'pos' for all 8 rows")
    assert "WARNING: the model predicted 'pos' for all 8 rows" in captured.err


def test_predict_gives_a_taggers_entities_with_offsets(checkpoint, tmp_path, capsys):
    tagger = BertTokenClassifier.from_pretrained(checkpoint, ["O", "B-PER", "I-PER"], 16)
    set_head_bias(tagger, [0.0, 50.0, 0.0])  # every word starts a PER entity
    save_checkpoint(tagger, str(tmp_path / "tagger"))
    text = "Grace  Hopper wrote"
    assert main(["predict", "--model", str(tmp_path / "tagger"), text]) == 0
    record = json.loads(capsys.readouterr().out)
    assert [(e["type"], e["text"], text[e["start"]:e["end"]]) for e in record["entities"]] == \
        [("PER", w, w) for w in ("Grace", "Hopper", "wrote")]
    conll = tmp_path / "dev.conll"
    conll.write_text("Grace B-PER\nHopper I-PER\n\nOslo O\n")
    assert main(["predict", "--model", str(tmp_path / "tagger"), "--input_file", str(conll),
                 "--output_file", str(tmp_path / "tags.jsonl")]) == 0
    records = [json.loads(line) for line in (tmp_path / "tags.jsonl").read_text().splitlines()]
    assert records[0]["words"] == ["Grace", "Hopper"] and records[0]["tags"] == ["B-PER"] * 2
    assert records[0]["entities"] == [{"type": "PER", "text": "Grace", "start": 0, "end": 1},
                                      {"type": "PER", "text": "Hopper", "start": 1, "end": 2}]
    assert "true_tags" not in records[0]
    # Column flags are classification's: a tagger refuses them.
    assert main(["predict", "--model", str(tmp_path / "tagger"), "--text_column", "x",
                 text]) == 2
    assert "apply to classification and regression models" in capsys.readouterr().err


def test_bad_inputs_fail_before_tensorflow_loads_and_leave_nothing(checkpoint, tmp_path):
    train = write_csv(tmp_path / "train.csv", ROWS * 2)
    header_only = write_csv(tmp_path / "header_only.csv", [])
    out = str(tmp_path / "out")
    common = ["finetune", "--task", "classification", "--init_checkpoint", checkpoint,
              "--output_dir", out, "--text_column", "review", "--label_column", "stars"]
    cases = {
        "missing checkpoint": (["finetune", "--task", "classification", "--init_checkpoint",
                                str(tmp_path / "nope"), "--train_file", train, "--output_dir",
                                out], "--init_checkpoint"),
        "header-only train": ([*common, "--train_file", header_only],
                              f"{header_only}: holds no examples"),
        "header-only dev": ([*common, "--train_file", train, "--dev_file", header_only],
                            f"{header_only}: holds no examples"),
        "missing column": ([*common[:-4], "--train_file", train],
                           "missing text column 'text'"),
        "missing model": (["evaluate", "--model", str(tmp_path / "nope"), "--input_file",
                           train], "--model"),
        "missing input": (["predict", "--model", checkpoint, "--input_file",
                           str(tmp_path / "nope.csv")], "--input_file"),
        "missing kept column": (["predict", "--model", checkpoint, "--input_file", train,
                                 "--text_column", "review", "--keep_columns", "id"],
                                f"{train}:1: missing kept column 'id'; the header has "
                                f"'review', 'stars'"),
        "kept column named as a field": (["predict", "--model", checkpoint, "--input_file",
                                          train, "--text_column", "review", "--keep_columns",
                                          "label"], "--keep_columns label: a prediction record "
                                                    "has a field 'label' of its own"),
        "kept column of texts": (["predict", "--model", checkpoint, "--keep_columns", "id",
                                  "some text"], "--keep_columns copies columns of "
                                                "--input_file"),
        "export": (["export", str(tmp_path / "nope"), str(tmp_path / "models"),
                    "--model_name", "m"], "does not exist"),
        "extract-features": (["extract-features", "--init_checkpoint", checkpoint,
                              "--input_file", str(tmp_path / "nope.txt"), "--output_file",
                              str(tmp_path / "features.jsonl")], "--input_file"),
    }
    results, tensorflow_loaded = main_in_fresh_process(
        {name: argv for name, (argv, _) in cases.items()})
    for name, (_, expected) in cases.items():
        rc, message = results[name]
        assert rc == 2 and expected in message, (name, message)
    assert not tensorflow_loaded, "a bad input loaded TensorFlow before failing"
    assert not os.path.exists(out)


@pytest.mark.parametrize("command, files", [("evaluate", "--input_file"),
                                            ("predict", "--input_file"),
                                            ("finetune", "the training and dev files")])
def test_column_flags_help_names_the_files_the_command_reads(command, files, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"the header name (JSONL key) of the text in {files} " in text
    if command != "finetune":
        assert "training and dev files" not in text
