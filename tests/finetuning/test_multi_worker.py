"""Fine-tuning under MultiWorkerMirroredStrategy: two worker processes on 127.0.0.1 run
`keras-bert finetune` in sync, and one step of the custom loop equals one `train_on_batch` on a
single device with the same global batch."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.cli.test_finetune import ROWS, write_jsonl
from tests.tasks.tiny_checkpoint import tiny_checkpoint

pytestmark = pytest.mark.slow  # minutes of real training, notebooks or subprocess workers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 300
# Longer texts fall in the second bucket (max_seq_length 16: buckets 8 and 16).
LONG_ROWS = [{"text": f"the {w} was really very {a} and the city was nice", "label": label}
             for w in ("movie", "film") for a, label in (("good", "pos"), ("awful", "neg"))]

# Runs `keras-bert finetune` ($2...) and saves the weights that each epoch's dev evaluation saw
# to $1/epoch<N>.npz.
FINETUNE = """
import sys
import numpy as np
from keras_bert.cli import main
from keras_bert.finetuning import finetune

evaluate = finetune.DevEvaluation.on_epoch_end

def on_epoch_end(self, epoch, logs=None):
    evaluate(self, epoch, logs)
    np.savez(f"{sys.argv[1]}/epoch{epoch + 1}.npz", *self.model.get_weights())

finetune.DevEvaluation.on_epoch_end = on_epoch_end
sys.exit(main(sys.argv[2:]))
"""

# One step of the multi-worker loop on step_batch(); saves the weights before and after to $1.
ONE_STEP = """
import json, sys
import numpy as np
import tensorflow as tf
from keras_bert.distribute import get_strategy
strategy = get_strategy("multi_worker_mirrored")
from keras_bert.finetuning.finetune_loop import distribute_global_batches, make_finetune_train_loop
from tests.finetuning.test_multi_worker import step_batch, step_model

with strategy.scope():
    model = step_model()
    dataset = distribute_global_batches(strategy, lambda: model.make_dataset(
        *step_batch(), batch_size=8, bucket_lengths=[16]))
before = [v.numpy() for v in model.trainable_variables]
sums, steps = make_finetune_train_loop(model, strategy)(iter(dataset), tf.constant(5))
after = [v.numpy() for v in model.trainable_variables]
np.savez(sys.argv[1], *before, *after)
print(json.dumps({"steps": int(steps), "loss": float(sums[0] / sums[1]),
                  "examples": float(sums[1])}))
"""


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "uncased_tiny"), "google")


def _start(script, args, tf_config, log_path):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "TPU_NAME",
                                                           "COLAB_TPU_ADDR")}
    env.update(PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", TF_CONFIG=json.dumps(tf_config))
    log = open(log_path, "w")
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)


def _run_two_workers(script, args_of, tmp_path, free_ports):
    """Starts ``script`` as worker 0 and 1 of a two-worker cluster; returns their logs."""
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    processes = [_start(script, args_of(index), {"cluster": {"worker": workers},
                                                 "task": {"type": "worker", "index": index}},
                        tmp_path / f"worker{index}.log") for index in range(2)]
    logs = []
    for index, process in enumerate(processes):
        try:
            code = process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for p in processes:
                p.kill()
            code = "killed after a timeout (a hang in a collective op?)"
        log = (tmp_path / f"worker{index}.log").read_text()
        assert code == 0, f"worker {index}: {code}\n{log[-3000:]}"
        logs.append(log)
    return logs


def _weights(path):
    with np.load(path) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


def _finetune_two_workers(tmp_path, free_ports, args, epochs):
    """Runs `keras-bert finetune ARGS --epochs EPOCHS` as two workers; checks that both run
    under MultiWorkerMirroredStrategy, that their weights are identical after every epoch and
    that only the chief wrote to its output_dir. Returns (logs, the chief's output_dir)."""
    outputs = [tmp_path / "out0", tmp_path / "out1"]
    for index in range(2):
        (tmp_path / f"weights{index}").mkdir()

    def args_of(index):
        return [str(tmp_path / f"weights{index}"), "finetune", *args,
                "--output_dir", str(outputs[index]), "--epochs", str(epochs),
                "--strategy", "multi_worker_mirrored", "--no_progress"]

    logs = _run_two_workers(FINETUNE, args_of, tmp_path, free_ports)
    for log in logs:
        assert "(CollectiveAllReduceStrategy) with 2 replica(s)" in log
    # The all-reduced updates keep both workers' weights identical after every epoch.
    for epoch in range(1, epochs + 1):
        chief, other = (_weights(tmp_path / f"weights{i}" / f"epoch{epoch}.npz")
                        for i in range(2))
        assert len(chief) > 30
        for a, b in zip(chief, other):
            np.testing.assert_array_equal(a, b)
    assert not outputs[1].exists()  # only the chief writes
    return logs, outputs[0]


def test_two_workers_finetune_in_sync_and_only_the_chief_writes(tmp_path, checkpoint,
                                                                free_ports):
    train = write_jsonl(tmp_path / "train.jsonl", ROWS * 4 + LONG_ROWS)  # 36 rows
    dev = write_jsonl(tmp_path / "dev.jsonl", ROWS + LONG_ROWS)
    logs, output = _finetune_two_workers(
        tmp_path, free_ports, ["--task", "classification", "--init_checkpoint", checkpoint,
                               "--train_file", train, "--dev_file", dev, "--batch_size", "8",
                               "--max_seq_length", "16", "--learning_rate", "1e-2"], epochs=8)
    for log in logs:
        # Every epoch covers the 36 rows once between the two workers, in ceil(36 / 8) = 5
        # global batches (the last one partial). The learning-rate schedule spans exactly these
        # 40 steps; this tiny model needs about 6 epochs of them to separate the classes.
        for epoch in range(1, 9):
            assert f"epoch {epoch}/8: 5 steps, 36 examples" in log
    printed = [json.loads(log[log.rindex("\n{\n"):]) for log in logs]
    assert printed[0]["best"] == printed[1]["best"]
    assert printed[0]["best_epoch"] == printed[1]["best_epoch"]

    # The chief wrote the results and the best model.
    results = json.loads((output / "eval_results.json").read_text())
    losses = [e["loss"] for e in results["epochs"]]
    assert [e["epoch"] for e in results["epochs"]] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert losses[-1] < losses[0] - 0.2, losses
    assert results["best"]["accuracy"] >= 0.8, results["epochs"]
    assert results["best"] == results["epochs"][results["best_epoch"] - 1]["dev"]
    assert sorted(os.listdir(output / "best_model")) == [
        "bert_config.json", "calibration_texts.txt", "model.keras", "tokenizer_config.json",
        "vocab.txt"]
    from keras_bert import BertClassifier
    kept = BertClassifier.from_pretrained(str(output / "best_model")).get_weights()
    best = _weights(tmp_path / "weights0" / f"epoch{results['best_epoch']}.npz")
    for a, b in zip(kept, best):
        np.testing.assert_array_equal(a, b)


def step_model():
    """A tiny classifier without dropout and its optimizer (learning rate 1e-3 at step 1)."""
    import keras

    from keras_bert import BertClassifier, BertEncoder
    from keras_bert.optimization.optimizers import create_optimizer
    keras.utils.set_random_seed(1)
    encoder = BertEncoder(vocab_size=60, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertClassifier(encoder, num_classes=3, dropout=0.0)
    model.compile(optimizer=create_optimizer(1e-3, num_train_steps=10, num_warmup_steps=0))
    return model


def step_batch():
    """Seven packed examples of lengths 5 to 16 (padded to 16) and their labels: one partial
    global batch of 8, so the workers take 3 and 4 rows."""
    rng = np.random.RandomState(0)
    lengths = np.array([5, 16, 9, 12, 7, 16, 10])
    mask = (np.arange(16)[None, :] < lengths[:, None]).astype("int32")
    ids = rng.randint(5, 60, size=(7, 16)).astype("int32") * mask
    x = {"input_word_ids": ids, "input_mask": mask,
         "input_type_ids": (np.arange(16)[None, :] >= lengths[:, None] // 2) * mask}
    return x, np.array([0, 1, 2, 1, 0, 2, 2], dtype="int32")


def test_one_multi_worker_step_equals_one_device_step(tmp_path, free_ports):
    logs = _run_two_workers(ONE_STEP, lambda index: [str(tmp_path / f"step{index}.npz")],
                            tmp_path, free_ports)
    # (A worker may log a lost heartbeat after its result, when the other one exits first.)
    results = [json.loads(next(line for line in log.splitlines() if line.startswith('{"steps"')))
               for log in logs]
    assert results[0] == results[1]
    assert results[0]["steps"] == 1 and results[0]["examples"] == 7

    # The same step on one device: Keras' own train step on the whole global batch.
    model = step_model()
    saved = _weights(tmp_path / "step0.npz")
    count = len(model.trainable_variables)
    before, after = saved[:count], saved[count:]
    for variable, value in zip(model.trainable_variables, before):
        variable.assign(value)
    x, y = step_batch()
    loss = model.train_on_batch(x, y, return_dict=True)["loss"]
    assert results[0]["loss"] == pytest.approx(loss, rel=1e-5)
    other = _weights(tmp_path / "step1.npz")[count:]
    moved = 0
    for variable, value, old, value_other in zip(model.trainable_variables, after, before, other):
        np.testing.assert_array_equal(value, value_other)
        # One AdamW step at lr 1e-3 moves a weight by up to ~1e-3: 1e-6 is rounding.
        np.testing.assert_allclose(value, variable.numpy(), rtol=0, atol=1e-6,
                                   err_msg=variable.path)
        moved += int(np.any(np.abs(value - old) > 1e-4))
    assert moved > count // 2


CONLL_SENTENCES = [
    [("john", "B-PER"), ("lives", "O"), ("in", "O"), ("paris", "B-LOC"), (".", "O")],
    [("mary", "B-PER"), ("went", "O"), ("to", "O"), ("london", "B-LOC"), (".", "O")],
    [("john", "B-PER"), ("visited", "O"), ("berlin", "B-LOC"), ("city", "I-LOC")],
    # Longer than max_seq_length 12: trained and predicted through windows.
    [("mary", "B-PER"), ("works", "O"), ("in", "O"), ("france", "B-LOC"), ("and", "O"),
     ("john", "B-PER"), ("was", "O"), ("born", "O"), ("in", "O"), ("germany", "B-LOC"),
     ("and", "O"), ("he", "O"), ("lives", "O"), ("in", "O"), ("london", "B-LOC"), (".", "O")],
]


def _write_conll(path, sentences):
    with open(path, "w", encoding="utf-8") as f:
        for sentence in sentences:
            f.write("".join(f"{word} NN O {tag}\n" for word, tag in sentence) + "\n")
    return str(path)


def test_two_workers_finetune_ner_in_sync(tmp_path, checkpoint, free_ports):
    train = _write_conll(tmp_path / "train.txt", CONLL_SENTENCES * 3)
    dev = _write_conll(tmp_path / "dev.txt", CONLL_SENTENCES)
    _, output = _finetune_two_workers(
        tmp_path, free_ports, ["--task", "ner", "--init_checkpoint", checkpoint, "--train_file",
                               train, "--dev_file", dev, "--batch_size", "4",
                               "--max_seq_length", "12", "--learning_rate", "1e-2"], epochs=2)
    results = json.loads((output / "eval_results.json").read_text())
    assert results["primary_metric"] in results["epochs"][-1]["dev"]
    assert results["epochs"][-1]["loss"] < results["epochs"][0]["loss"]
    # 12 sentences, the long one in 3 windows each time: 4 * 3 + 2 * 3 = 18 training rows.
    assert results["train_rows"] == 18
    assert (output / "dev_predictions.conll").exists()


def test_two_workers_finetune_squad_in_sync(tmp_path, checkpoint, free_ports):
    from tests.cli.test_finetune import squad_json

    context = "john lives in paris . mary works in london . the dog sat down . the cat ran away ."
    qas = [{"id": "where", "question": "where does john live ?",
            "answers": [{"text": "paris", "answer_start": context.index("paris")}]},
           {"id": "who", "question": "who works in london ?",
            "answers": [{"text": "mary", "answer_start": context.index("mary")}]},
           {"id": "none", "question": "who is old ?", "answers": [], "is_impossible": True}]
    train = squad_json(tmp_path / "train.json", [{"context": context, "qas": qas}] * 3)
    dev = squad_json(tmp_path / "dev.json", [{"context": context, "qas": qas}])
    # 20 context tokens, windows of at most 16: two features per question.
    _, output = _finetune_two_workers(
        tmp_path, free_ports, ["--task", "squad", "--init_checkpoint", checkpoint,
                               "--train_file", train, "--dev_file", dev, "--batch_size", "4",
                               "--max_seq_length", "24", "--max_query_length", "8",
                               "--doc_stride", "8"], epochs=2)
    results = json.loads((output / "eval_results.json").read_text())
    assert results["squad_version_2"] is True and results["train_rows"] > 9
    predictions = json.loads((output / "predictions.json").read_text())
    assert set(predictions) == {"where", "who", "none"}
