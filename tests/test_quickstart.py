"""`keras-bert quickstart` (the README's main command) runs every step, shrunk."""

import os
import shlex
import subprocess
import sys

import pytest

from keras_bert import cli
from keras_bert.quickstart import (QuickstartOptions, build_corpus, keras_bert_command,
                                   next_steps, run_quickstart, sentiment_examples)
from keras_bert.serving.server import build_flag_parser


def test_corpus_is_in_pretraining_format(tmp_path):
    path = str(tmp_path / "corpus.txt")
    documents = build_corpus(path, 5)
    text = open(path, encoding="utf-8").read()
    assert documents == 5 and text.count("\n\n") == 5
    assert all(len(line.split()) >= 3 for line in text.splitlines() if line)


def test_sentiment_examples_are_balanced_and_reproducible():
    texts, labels = sentiment_examples(40, seed=1)
    assert labels.count("positive") == labels.count("negative") == 20
    assert (texts, labels) == sentiment_examples(40, seed=1)


@pytest.mark.slow
def test_quickstart_runs_every_step_and_serves(tmp_path):
    out = str(tmp_path / "qs")
    options = QuickstartOptions(output_dir=out, corpus_documents=20, vocab_size=1000,
                                pretrain_steps=10, pretrain_batch_size=8, finetune_examples=48,
                                finetune_epochs=1, finetune_seq_length=16)
    results = run_quickstart(options)
    assert [r.name for r in results] == ["corpus", "vocabulary", "pretraining data",
                                         "pretraining", "fine-tuning", "export", "serving"]
    assert os.path.exists(os.path.join(out, "vocab.txt"))
    assert os.path.exists(os.path.join(out, "pretraining", "export", "google", "bert_model.ckpt.index"))
    assert os.path.exists(os.path.join(out, "export", "sentiment", "1", "saved_model.pb"))
    served = results[-1].detail
    assert served.startswith("gRPC Predict: ") and served.count(" -> ") == 2
    assert all(answer.split(" -> ")[1] in ("positive", "negative")
               for answer in served[len("gRPC Predict: "):].split("; "))

    # The suggested next steps are real commands for this run: the export one runs as printed,
    # from the shell.
    commands = {command.split()[1]: command for command, _ in next_steps(options)}
    steps = {name: shlex.split(command)[2:] for name, command in commands.items()}
    assert sorted(steps) == ["export", "finetune", "predict", "serve"]
    exported = subprocess.run(commands["export"], shell=True, capture_output=True, text=True,
                              timeout=600)
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert os.path.exists(os.path.join(out, "export", "sentiment", "2", "saved_model.pb"))
    flags = build_flag_parser().parse_args(steps["serve"])
    assert flags.model_base_path == os.path.join(os.path.abspath(out), "export", "sentiment")
    for command in ("predict", "finetune"):
        cli.build_parser(command).parse_args([command, *steps[command]])


def test_next_steps_run_as_printed_from_the_shell(tmp_path, monkeypatch):
    """Each printed command starts the right keras-bert command from a shell where nothing
    activated the virtual environment (README's set-up): its --help, run literally. (The
    quickstart itself runs from that shell too, so it sees the same PATH, also when the tests
    run in an activated environment.)"""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    env = dict(os.environ)
    for command, _ in next_steps(QuickstartOptions(output_dir=str(tmp_path / "qs"))):
        name = shlex.split(command)[len(shlex.split(keras_bert_command()))]
        result = subprocess.run(f"{command} --help", shell=True, env=env, capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, f"{command}: {result.stderr[-2000:]}"
        assert result.stdout.startswith(f"usage: keras-bert {name} "), result.stdout[:200]


def test_the_command_is_the_script_beside_the_interpreter(tmp_path, monkeypatch):
    script = os.path.join(os.path.dirname(sys.executable), "keras-bert")
    if not os.path.isfile(script):
        assert keras_bert_command() == f"{shlex.quote(sys.executable)} -m keras_bert.cli"
        return
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)  # not under the environment: the absolute path
    assert keras_bert_command() == shlex.quote(script)
    environment = os.path.dirname(os.path.dirname(script))
    monkeypatch.chdir(os.path.dirname(environment))  # README's set-up: .venv/bin/keras-bert
    assert keras_bert_command() == shlex.quote(
        os.path.join(os.path.basename(environment), "bin", "keras-bert"))
    monkeypatch.chdir(os.path.dirname(script))  # beside it: ./keras-bert, not a PATH lookup
    assert keras_bert_command() == "./keras-bert"
    monkeypatch.setenv("PATH", os.path.dirname(script) + os.pathsep + "/usr/bin:/bin")
    assert keras_bert_command() == "keras-bert"  # an activated environment


def test_quickstart_refuses_a_foreign_directory(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    with pytest.raises(FileExistsError, match="not a quickstart directory"):
        run_quickstart(QuickstartOptions(output_dir=str(tmp_path / "mine")))
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"
