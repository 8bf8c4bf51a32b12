"""A pretraining run in process: it learns, logs, keeps K checkpoints, evaluates, exports."""

import json
import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertConfig, BertEncoder, BertPretrainer
from keras_bert import cli
from keras_bert.pretraining.run import PretrainingSettings, run_pretraining
from keras_bert.optimization.optimizers import create_optimizer
from keras_bert.pretraining.input import pretraining_dataset
from keras_bert.pretraining.step import make_pretraining_train_loop
from tests.pretraining.records import write_records


def _config(files, output_dir, **overrides):
    values = dict(
        input_files=files["pattern"], output_dir=str(output_dir),
        bert_config=BertConfig.from_json_file(files["config"][0.1]), max_seq_length=32,
        max_predictions_per_seq=5, train_batch_size=16, num_train_steps=80,
        num_warmup_steps=8, learning_rate=2e-3, steps_per_loop=20, save_checkpoints_steps=20,
        keep_checkpoint_max=2, vocab_file=files["vocab"], eval_input_files=files["pattern"],
        eval_batch_size=8, progress=False)
    values.update(overrides)
    return PretrainingSettings(**values)


def _scalars(summary_dir):
    """{tag: {step: value}} from the event files."""
    values = {}
    for path in tf.io.gfile.glob(os.path.join(summary_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                values.setdefault(value.tag, {})[event.step] = float(
                    tf.make_ndarray(value.tensor))
    return values


@pytest.fixture(scope="module")
def finished_run(pretraining_files, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("run")
    return output_dir, run_pretraining(_config(pretraining_files, output_dir))


def test_the_model_learns_and_the_summaries_show_it(finished_run):
    output_dir, result = finished_run
    scalars = _scalars(output_dir / "summaries")
    assert sorted(scalars["loss"]) == [20, 40, 60, 80]
    assert scalars["loss"][20] == pytest.approx(
        scalars["mlm_loss"][20] + scalars["nsp_loss"][20], rel=1e-5)
    # The MLM task (segments count upwards) is learnable: loss and accuracy move clearly.
    assert scalars["mlm_loss"][80] < scalars["mlm_loss"][20] - 0.5
    assert scalars["mlm_accuracy"][80] > scalars["mlm_accuracy"][20] + 0.1
    assert scalars["learning_rate"][20] == pytest.approx(2e-3 * (1 - 20 / 80))
    assert scalars["learning_rate"][80] == 0.0
    assert scalars["grad_norm"][20] > 0 and scalars["steps_per_second"][20] > 0
    assert result.step == 80 and result.metrics["loss"] == pytest.approx(scalars["loss"][80])


def test_keeps_the_last_checkpoints_and_writes_the_config(finished_run, pretraining_files):
    output_dir, result = finished_run
    assert result.checkpoint == str(output_dir / "checkpoints" / "ckpt-80")
    assert sorted(p for p in os.listdir(output_dir / "checkpoints") if p.endswith(".index")) == [
        "ckpt-60.index", "ckpt-80.index"]
    saved = json.loads((output_dir / "pretraining_config.json").read_text())
    assert saved["train_batch_size"] == 16 and saved["bert_config"]["hidden_size"] == 64


def test_evaluation_reads_every_record_once(finished_run):
    _, result = finished_run
    assert result.eval_metrics["num_examples"] == 128
    assert result.eval_metrics["mlm_loss"] < np.log(64) - 0.5  # uniform guessing is ln(64)


def test_exports_load_with_from_pretrained_and_give_the_trained_outputs(finished_run,
                                                                       pretraining_files):
    output_dir, result = finished_run
    inputs, _ = next(iter(pretraining_dataset(pretraining_files["pattern"], 4, 32, 5,
                                              is_training=False)))
    want = result.model(inputs, training=False)
    for fmt in ("google", "keras"):
        path = str(output_dir / "export" / fmt)
        assert os.path.exists(os.path.join(path, "vocab.txt"))
        got = BertPretrainer.from_pretrained(path)(inputs, training=False)
        np.testing.assert_allclose(got["mlm_logits"], want["mlm_logits"], atol=1e-5)
        np.testing.assert_allclose(got["nsp_logits"], want["nsp_logits"], atol=1e-5)
        encoder = BertEncoder.from_pretrained(path)
        encoder_inputs = {k: v for k, v in inputs.items() if k != "masked_lm_positions"}
        np.testing.assert_allclose(
            encoder(encoder_inputs)["pooled_output"],
            result.model.encoder(encoder_inputs)["pooled_output"], atol=1e-5)


@pytest.mark.slow
def test_init_checkpoint_and_float16_with_loss_scaling(finished_run, pretraining_files,
                                                      tmp_path):
    output_dir, trained = finished_run
    result = run_pretraining(_config(
        pretraining_files, tmp_path, bert_config=None,
        init_checkpoint=str(output_dir / "export" / "google"), num_train_steps=2,
        num_warmup_steps=0, learning_rate=1e-9, steps_per_loop=2, save_checkpoints_steps=2,
        eval_input_files=None, export=False, mixed_precision="fp16"))
    assert result.model.encoder.dtype_policy.name == "mixed_float16"
    assert all(v.dtype == "float32" for v in result.model.trainable_variables)
    np.testing.assert_allclose(result.model.encoder.word_embeddings.embeddings.numpy(),
                               trained.model.encoder.word_embeddings.embeddings.numpy(),
                               atol=1e-6)
    # Started from the trained weights (not from scratch), and float16 did not overflow.
    assert result.metrics["mlm_loss"] < np.log(64) - 0.5


@pytest.mark.slow
def test_distributed_input_without_iterator_state_resumes_to_more_steps(pretraining_files,
                                                                       tmp_path):
    settings = dict(num_warmup_steps=0, steps_per_loop=2, save_checkpoints_steps=2,
                    eval_input_files=None, export=False, checkpoint_input_pipeline=False)
    first = run_pretraining(_config(pretraining_files, tmp_path, num_train_steps=2, **settings))
    saved = [name for name, _ in tf.train.list_variables(first.checkpoint)]
    assert not any(name.startswith("iterator") for name in saved)
    more = run_pretraining(_config(pretraining_files, tmp_path, num_train_steps=4, **settings))
    assert (first.step, more.step) == (2, 4)
    assert more.checkpoint.endswith("ckpt-4") and np.isfinite(more.metrics["loss"])


def _train_three_steps(files, accumulation=1, jit_compile=False):
    """(mlm_loss_sum, grad_norm_sum, weights, loop) after 3 updates of batch 16, no dropout."""
    keras.utils.set_random_seed(3)
    model = BertPretrainer(BertEncoder.from_bert_config(
        BertConfig.from_json_file(files["config"][0.0])))
    optimizer = create_optimizer(1e-3, num_train_steps=3, num_warmup_steps=0)
    optimizer.build(model.trainable_variables)
    loop = make_pretraining_train_loop(model, optimizer, tf.distribute.get_strategy(),
                                       accumulation, split_worker_batch=True,
                                       jit_compile=jit_compile)
    iterator = iter(pretraining_dataset(files["pattern"], 16, 32, 5, seed=1))
    totals, grad_norm_sum = loop(iterator, tf.constant(3))
    return (float(totals["mlm_loss_sum"]), float(grad_norm_sum),
            [v.numpy() for v in model.trainable_variables], loop, iterator)


@pytest.fixture(scope="module")
def plain_runs(pretraining_files):
    """_train_three_steps without XLA, by accumulation steps."""
    return {steps: _train_three_steps(pretraining_files, steps) for steps in (1, 4)}


@pytest.mark.slow
def test_gradient_accumulation_equals_one_big_batch(plain_runs):
    (loss_1, norm_1, weights_1, *_), (loss_4, norm_4, weights_4, *_) = plain_runs.values()
    assert loss_4 == pytest.approx(loss_1, rel=1e-6) and norm_4 == pytest.approx(norm_1, rel=1e-5)
    for a, b in zip(weights_1, weights_4):
        np.testing.assert_allclose(b, a, atol=2e-6)


def _xla_compiled_calls(loop, iterator):
    """Names of the functions that the loop's graph calls with XLA compilation forced."""
    graph_def = loop.get_concrete_function(iterator, tf.constant(1)).graph.as_graph_def()
    nodes = [n for f in graph_def.library.function for n in f.node_def] + list(graph_def.node)
    return {n.attr["f"].func.name for n in nodes if n.attr["_XlaMustCompile"].b}


@pytest.mark.slow
def test_xla_compiled_step_trains_like_the_plain_one(pretraining_files, plain_runs):
    loss, norm, weights, loop, iterator = plain_runs[4]
    # The masked-LM loss is always compiled; with jit_compile the model's passes are too.
    assert not [name for name in _xla_compiled_calls(loop, iterator) if "forward_backward" in name]
    loss_xla, norm_xla, weights_xla, loop, iterator = _train_three_steps(
        pretraining_files, 4, jit_compile=True)
    assert [name for name in _xla_compiled_calls(loop, iterator) if "forward_backward" in name]
    assert loss_xla == pytest.approx(loss, rel=1e-5) and norm_xla == pytest.approx(norm, rel=1e-5)
    for a, b in zip(weights, weights_xla):
        np.testing.assert_allclose(b, a, atol=1e-5)


def test_settings_that_cannot_work_are_rejected_with_the_fix(pretraining_files, tmp_path,
                                                             finished_run):
    with pytest.raises(ValueError, match="train_batch_size=10 is not divisible by 1 replica"
                                         r"\(s\) x gradient_accumulation_steps=4"):
        run_pretraining(_config(pretraining_files, tmp_path, train_batch_size=10,
                                gradient_accumulation_steps=4))
    with pytest.raises(ValueError, match="give bert_config"):
        run_pretraining(_config(pretraining_files, tmp_path, bert_config=None))
    with pytest.raises(ValueError, match=r"holds checkpoints of another architecture "
                                         r"\(hidden_size: 64 -> 32; num_attention_heads: 4 -> 2"):
        run_pretraining(_config(pretraining_files, finished_run[0], bert_config=BertConfig(
            **{**BertConfig.from_json_file(pretraining_files["config"][0.1]).to_dict(),
               "hidden_size": 32, "num_attention_heads": 2})))
    with pytest.raises(ValueError, match="dynamic_masking needs vocab_file"):
        run_pretraining(_config(pretraining_files, tmp_path, dynamic_masking=True,
                                vocab_file=None))
    # Records of other lengths are refused before anything is built or written, including
    # evaluation records that would otherwise fail only after training.
    with pytest.raises(ValueError, match="written with max_seq_length=32 .* pass "
                                         "--max_seq_length 32"):
        run_pretraining(_config(pretraining_files, tmp_path / "long", max_seq_length=64))
    short = write_records(str(tmp_path / "short"), num_files=1, records_per_file=2,
                          max_seq_length=16)
    with pytest.raises(ValueError, match="short/part-00.tfrecord were written with "
                                         "max_seq_length=16 .* pass --max_seq_length 16"):
        run_pretraining(_config(pretraining_files, tmp_path / "eval", eval_input_files=short))
    assert not (tmp_path / "long").exists() and not (tmp_path / "eval").exists()


@pytest.mark.slow
def test_the_strategy_flag_forces_the_strategy(pretraining_files, tmp_path, monkeypatch, caplog,
                                              capsys):
    for name in ("TF_CONFIG", "TPU_NAME", "COLAB_TPU_ADDR"):  # what would choose another strategy
        monkeypatch.delenv(name, raising=False)
    caplog.set_level(logging.INFO, logger="keras_bert")
    assert cli.main([
        "pretrain", "--input_file", pretraining_files["pattern"], "--output_dir", str(tmp_path),
        "--bert_config_file", pretraining_files["config"][0.0], "--max_seq_length", "32",
        "--max_predictions_per_seq", "5", "--train_batch_size", "8", "--num_train_steps", "2",
        "--num_warmup_steps", "0", "--steps_per_loop", "2", "--no_export", "--no_progress",
        "--strategy", "one_device", "--jit_compile"]) == 0
    assert "using the one_device strategy (OneDeviceStrategy) with 1 replica(s)" in caplog.text
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["step"] == 2
    assert json.loads((tmp_path / "pretraining_config.json").read_text())["jit_compile"] is True
