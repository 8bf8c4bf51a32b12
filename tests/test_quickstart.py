"""`keras-bert quickstart` (the README's main command) runs every step, shrunk."""

import os
import shlex

import pytest

from keras_bert import cli
from keras_bert.quickstart import (QuickstartOptions, build_corpus, next_steps, run_quickstart,
                                   sentiment_examples)
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

    # The suggested next steps are real commands for this run: the export one runs.
    steps = {shlex.split(command)[1]: shlex.split(command)[2:]
             for command, _ in next_steps(options)}
    assert sorted(steps) == ["export", "finetune", "predict", "serve"]
    assert cli.main(["export", *steps["export"]]) == 0
    assert os.path.exists(os.path.join(out, "export", "sentiment", "2", "saved_model.pb"))
    flags = build_flag_parser().parse_args(steps["serve"])
    assert flags.model_base_path == os.path.join(os.path.abspath(out), "export", "sentiment")
    for command in ("predict", "finetune"):
        cli.build_parser(command).parse_args([command, *steps[command]])


def test_quickstart_refuses_a_foreign_directory(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    with pytest.raises(FileExistsError, match="not a quickstart directory"):
        run_quickstart(QuickstartOptions(output_dir=str(tmp_path / "mine")))
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"
