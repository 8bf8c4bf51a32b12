"""`keras-bert distill` on a tiny fine-tuned classifier: the student and its report, texts without
labels from their own file, augmented copies, and bad input refused in one line with nothing
written."""

import json
import os

import pytest

from keras_bert import BertClassifier, BertEncoder, BertPreprocessor, save_checkpoint
from keras_bert.cli import main
from tests.helpers import cli_before_tensorflow, main_in_fresh_process
from tests.tasks.tiny_checkpoint import VOCAB

ROWS = [("the movie was good", "pos"), ("a terrible film", "neg"), ("good", "pos"),
        ("the meal was bad and the film awful", "neg"), ("a very nice city", "pos"),
        ("the poor old dog", "neg"), ("john visited paris", "pos"), ("really awful", "neg")]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import keras
    root = tmp_path_factory.mktemp("distill_cli")
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(vocab_size=len(VOCAB), hidden_size=64, num_hidden_layers=3,
                          num_attention_heads=4, intermediate_size=128,
                          max_position_embeddings=64)
    teacher = BertClassifier(encoder, 2, preprocessor=BertPreprocessor(vocabulary=VOCAB,
                                                                       seq_length=16),
                             label_names=["neg", "pos"])
    save_checkpoint(teacher, root / "teacher")
    (root / "train.csv").write_text("review,score\n" + "".join(f"{t},{l}\n" for t, l in ROWS))
    (root / "unlabeled.csv").write_text("review\n" + "".join(f"{t} really\n" for t, _ in ROWS))
    (root / "empty.csv").write_text("review,score\n")
    return root


def command(files, output, *more):
    return ["distill", "--teacher", str(files / "teacher"), "--train_file",
            str(files / "train.csv"), "--text_column", "review", "--label_column", "score",
            "--output_dir", str(output), "--epochs", "1", "--batch_size", "4", "--no_progress",
            *more]


def test_writes_the_student_and_a_report_beside_the_teacher(files, tmp_path, capsys):
    output = tmp_path / "small"
    assert main(command(files, output, "--num_layers", "1", "--unlabeled_file",
                        str(files / "unlabeled.csv"), "--dev_file",
                        str(files / "train.csv"), "--augment", "1")) == 0
    printed = json.loads(capsys.readouterr().out)
    report = json.loads((output / "distillation_report.json").read_text())
    assert printed == report
    assert report["texts"] == {"labelled": 8, "unlabeled": 8, "augmented": 16}
    assert report["student"]["augment"] == 1
    assert report["teacher"]["layers"] == 3 and report["student"]["layers"] == 1
    assert report["student"]["kept_layers"] == [2]
    assert report["student"]["teacher"] == str(files / "teacher")
    assert report["student"]["parameters"] < report["teacher"]["parameters"]
    for model in ("teacher", "student"):  # the same embeddings: the teacher's, copied
        assert 0 < report[model]["embedding_parameters"] < report[model]["parameters"]
    assert report["student"]["embedding_parameters"] == report["teacher"]["embedding_parameters"]
    share = report["student"]["parameters"] / report["teacher"]["parameters"]
    assert report["size"].startswith(
        f"the student keeps {share:.0%} of the teacher's parameters "
        f"({report['student']['parameters']:,} of {report['teacher']['parameters']:,})")
    assert "its speed follows the 1 of 3 layers it keeps" in report["size"]
    assert report["warning"] is None  # as many unlabelled texts as labelled, and copies
    assert set(report["dev"]) == {"teacher", "student", "majority"}
    assert report["dev"]["majority"]["accuracy"] == 0.5
    student = BertClassifier.from_pretrained(output / "student")
    assert student.label_names == ["neg", "pos"] and student.distillation["kept_layers"] == [2]
    assert student.distillation["teacher"] == str(files / "teacher")
    assert sorted(os.listdir(output)) == ["distillation_report.json", "student"]  # no backup left
    # A sample of the texts it learnt from, which its int8 export calibrates on.
    kept = (output / "student" / "calibration_texts.txt").read_text().splitlines()
    assert len(kept) == 32 and set(t for t, _ in ROWS) <= set(kept)
    # A finished student is kept unless --overwrite says otherwise.
    assert main(command(files, output, "--num_layers", "1")) == 2
    assert "already holds a student" in capsys.readouterr().err


@pytest.mark.parametrize("change, message", [
    (lambda args: args + ["--num_layers", "0"], "num_layers must be between 1 and 2"),
    (lambda args: args + ["--num_layers", "3"], "--num_layers 3: num_layers must be between 1 "
     "and 2 \\(the teacher has 3 layers\\)"),
    (lambda args: args + ["--num_layers", "1", "--augment", "-1"],
     "--augment -1: give 0 or more copies"),
    (lambda args: [a.replace("train.csv", "empty.csv") for a in args] + ["--num_layers", "1"],
     "empty.csv' holds no examples"),
    (lambda args: [a.replace("/teacher", "/no-such-teacher") for a in args]
     + ["--num_layers", "1"], "--teacher .*no-such-teacher' does not exist"),
])
def test_bad_input_fails_in_one_line_and_writes_nothing(files, tmp_path, capsys, change,
                                                        message):
    import re
    output = tmp_path / "small"
    assert main(change(command(files, output))) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(message, error), error
    assert not output.exists()


def test_few_unlabelled_texts_without_copies_are_reported(files, tmp_path, capsys):
    output = tmp_path / "small"
    assert main(command(files, output, "--num_layers", "2")) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["warning"].startswith("0 texts without labels beside 8 labelled ones, and no "
                                        "augmented copies")
    assert "--augment 2 adds changed copies" in report["warning"]
    assert f"WARNING: {report['warning']}" in captured.err
    assert f"size: {report['size']}" in captured.err


# What the teacher's and student's files decide, refused before TensorFlow loads: the flags added
# to `command`, and the start of the one-line error.
BEFORE_TENSORFLOW = [
    (["--num_layers", "3"], "--num_layers 3: num_layers must be between 1 and 2 (the teacher "
                            "has 3 layers), got 3"),
    (["--num_layers", "5"], "--num_layers 5: num_layers must be between 1 and 2 (the teacher "
                            "has 3 layers), got 5"),
    (["--num_layers", "1", "--teacher", "{roberta}"],
     "--teacher: {roberta}/config.json: model_type is 'roberta' (a roberta model), not 'bert'"),
    (["--student", "{roberta}"],
     "--student: {roberta}/config.json: model_type is 'roberta' (a roberta model), not 'bert'"),
]


@pytest.fixture(scope="module")
def before_tensorflow(files, tmp_path_factory):
    """BEFORE_TENSORFLOW's cases and a dev file with a label the teacher does not know ("dev"),
    each with its own output directory, run in one fresh process: {case: (exit code, stderr,
    whether TensorFlow was loaded, the output directory, the roberta folder, the dev file)}.
    If TensorFlow got loaded (after which the next cases cannot load it again), each case again
    in a process of its own, so that each test judges its own case."""
    root = tmp_path_factory.mktemp("before_tensorflow")
    roberta = root / "roberta"
    roberta.mkdir()
    (roberta / "config.json").write_text('{"model_type": "roberta"}')
    (roberta / "pytorch_model.bin").write_text("")
    dev = root / "dev.csv"
    dev.write_text("review,score\na good film,pos\na dull film,meh\n")
    flags = {str(i): [flag.format(roberta=roberta) for flag in case_flags]
             for i, (case_flags, _) in enumerate(BEFORE_TENSORFLOW)}
    flags["dev"] = ["--num_layers", "1", "--dev_file", str(dev)]
    for case in flags:
        (root / case).mkdir()
    argvs = {case: command(files, root / case / "small", *more) for case, more in flags.items()}
    outcomes, tensorflow = main_in_fresh_process(argvs)
    results = {case: (*outcome, False) for case, outcome in outcomes.items()}
    if tensorflow:
        results = {case: cli_before_tensorflow(argv) for case, argv in argvs.items()}
    return {case: (*results[case], root / case / "small", roberta, dev) for case in argvs}


@pytest.mark.parametrize("flags, message", BEFORE_TENSORFLOW)
def test_what_the_files_decide_fails_before_tensorflow(before_tensorflow, flags, message):
    case = str(BEFORE_TENSORFLOW.index((flags, message)))
    code, error, tensorflow, output, roberta, _ = before_tensorflow[case]
    assert code == 2 and not tensorflow, error
    assert error.startswith(f"keras-bert distill: error: {message.format(roberta=roberta)}"), \
        error
    assert error.count("\n") == 1 and not output.exists()


def test_a_dev_label_the_teacher_does_not_know_fails_before_tensorflow(before_tensorflow):
    code, error, tensorflow, output, _, dev = before_tensorflow["dev"]
    assert code == 2 and not tensorflow, error
    assert "label 'meh' is not one of the labels the model learns ('neg', 'pos')" in error
    assert f"{dev}" in error and error.count("\n") == 1 and not output.exists()
