"""Pretraining as the paper ran it, from the command line, shrunk: a first phase at a short
length, then a second phase on longer records that starts from the first's checkpoint, with the
schedule going on (or starting again), the positions past the first length trained, and
Google's end-of-run evaluation (eval_results.txt) plus periodic evaluation for TensorBoard."""

import json

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import cli
from tests.pretraining.records import VOCAB_SIZE, write_records
from tests.pretraining.test_pretrain import _scalars

pytestmark = pytest.mark.slow  # minutes of real training, notebooks or subprocess workers

POSITIONS = 48  # phase 1 trains positions < 16, phase 2 positions < 32; 32..47 stay untrained


@pytest.fixture(scope="module")
def phases(tmp_path_factory):
    root = tmp_path_factory.mktemp("phases")
    config = root / "bert_config.json"
    config.write_text(json.dumps(dict(
        vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=POSITIONS, type_vocab_size=2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)))
    short = write_records(str(root / "r16"), 1, 32, max_seq_length=16, max_predictions_per_seq=3)
    long = write_records(str(root / "r32"), 1, 32, max_seq_length=32, max_predictions_per_seq=5,
                         seed=1)

    def pretrain(output_dir, records, length, predictions, steps, *extra):
        assert cli.main([
            "pretrain", "--input_file", records, "--output_dir", str(root / output_dir),
            "--max_seq_length", str(length), "--max_predictions_per_seq", str(predictions),
            "--train_batch_size", "8", "--num_train_steps", str(steps),
            "--num_warmup_steps", "2", "--learning_rate", "1e-3", "--steps_per_loop", "6",
            "--save_checkpoints_steps", "6", "--no_progress", *extra]) == 0
        return root / output_dir

    phase1 = pretrain("phase1", short, 16, 3, 18, "--bert_config_file", str(config),
                      "--eval_input_file", short, "--eval_every_steps", "6")
    phase2 = pretrain("phase2", long, 32, 5, 24, "--init_checkpoint", str(phase1),
                      "--init_optimizer_state", "--do_eval")
    restart = pretrain("restart", long, 32, 5, 6, "--init_checkpoint", str(phase1))
    return phase1, phase2, restart


def _positions(run_dir):
    reader = tf.train.load_checkpoint(str(run_dir / "export" / "google" / "bert_model.ckpt"))
    return reader.get_tensor("bert/embeddings/position_embeddings")


def _eval_results(run_dir):
    lines = (run_dir / "eval_results.txt").read_text().splitlines()
    return {key: float(value) for key, value in (line.split(" = ") for line in lines)}


def test_evaluation_as_google_writes_it_and_periodically_for_tensorboard(phases):
    phase1, phase2, _ = phases
    results = _eval_results(phase1)
    assert sorted(results) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                               "next_sentence_accuracy", "next_sentence_loss"]
    assert results["global_step"] == 18
    assert results["loss"] == pytest.approx(results["masked_lm_loss"]
                                            + results["next_sentence_loss"], rel=1e-5)
    evaluated = _scalars(phase1 / "summaries" / "eval")
    training = _scalars(phase1 / "summaries")
    # Same names as the training curves, so TensorBoard draws both on one chart.
    assert sorted(evaluated["loss"]) == [6, 12, 18] and sorted(training["loss"]) == [6, 12, 18]
    assert evaluated["mlm_loss"][18] == pytest.approx(results["masked_lm_loss"])
    # --do_eval without --eval_input_file evaluates on --input_file (Google's behaviour).
    assert _eval_results(phase2)["global_step"] == 24


def test_the_second_phase_goes_on_with_the_schedule_and_trains_the_longer_positions(phases):
    phase1, phase2, _ = phases
    assert sorted(p.name for p in (phase2 / "checkpoints").glob("*.index")) == ["ckpt-24.index"]
    rates = _scalars(phase2 / "summaries")["learning_rate"]
    assert sorted(rates) == [24]  # steps 18 -> 24 of one schedule of 24: it ends at 0
    assert rates[24] == 0.0
    before, after = _positions(phase1), _positions(phase2)
    # A row without gradients only shrinks by weight decay: the same factor for every value.
    # Rows 16..31 are trained only in phase 2; rows 32..47 never.
    ratio = after / before
    assert np.ptp(ratio[32:]) < 1e-4
    assert all(np.ptp(ratio[row]) > 1e-3 for row in range(16, 32))


def test_a_second_phase_with_weights_only_starts_the_schedule_again(phases):
    phase1, _, restart = phases
    rates = _scalars(restart / "summaries")["learning_rate"]
    assert sorted(rates) == [6] and rates[6] == 0.0  # a fresh 6-step schedule
    saved = json.loads((restart / "pretraining_config.json").read_text())
    assert saved["init_optimizer_state"] is False
    assert sorted(p.name for p in (restart / "checkpoints").glob("*.index")) == ["ckpt-6.index"]


def test_continuing_needs_an_earlier_run_and_steps_left(phases, tmp_path, capsys, minilm_dir):
    phase1, _, _ = phases
    records = json.loads((phase1 / "pretraining_config.json").read_text())["input_files"]
    base = ["pretrain", "--input_file", records, "--max_seq_length", "16",
            "--max_predictions_per_seq", "3", "--no_progress", "--init_optimizer_state",
            "--num_warmup_steps", "1"]
    code = cli.main([*base, "--output_dir", str(tmp_path / "a"), "--num_train_steps", "10",
                     "--init_checkpoint", str(phase1)])
    assert code == 2
    assert "ended at step 18; num_train_steps=10 leaves nothing to train" in \
        capsys.readouterr().err
    code = cli.main([*base, "--output_dir", str(tmp_path / "b"), "--init_checkpoint",
                     minilm_dir])
    assert code == 2
    assert "needs an earlier pretraining run as init_checkpoint" in capsys.readouterr().err
