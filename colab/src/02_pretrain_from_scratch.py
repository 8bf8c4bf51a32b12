# %% [markdown]
# # Pretrain BERT from scratch
#
# The whole pretraining path: learn a WordPiece vocabulary from a corpus, write pretraining
# TFRecords with the masking script (MLM 15% with 80/10/10, NSP 50/50; readable by Google's
# `run_pretraining.py` too), pretrain MLM + NSP under `tf.distribute` (TPUStrategy on a Colab
# TPU), and plot the loss. A rerun in the same output directory resumes exactly where the last
# checkpoint left off.
#
# **Time.** On a CPU the defaults take about 3 hours (estimated: 5.5 s a step over 40 steps of the
# default model and batch, measured on a shared 2-core CPU, times `TRAIN_STEPS = 2000`). On a Colab
# TPU or GPU: not measured (about 4x10^14 floating-point operations). For about a minute on a CPU
# (measured), set the values CI runs in the parameters cell: `CORPUS_DOCUMENTS = 30`,
# `VOCAB_SIZE = 1200`, `PRESET = "L-2_H-128_A-2"`, `MAX_SEQ_LENGTH = 64`,
# `MAX_PREDICTIONS_PER_SEQ = 10`, `DUPE_FACTOR = 1`, `BATCH_SIZE = 16`, `TRAIN_STEPS = 20`,
# `MIXED_PRECISION = None`.

# %%
# Install keras-bert (on Colab only; locally, install the repo with pip install -e .).
import sys

IN_COLAB = "google.colab" in sys.modules
if IN_COLAB:
    !pip install -q "keras-bert-tf[notebooks] @ git+https://github.com/keras-bert/keras-bert"

# %% tags=["parameters"]
# On a TPU, WORK_DIR must be gs://your-bucket/...: TPU workers read data and write checkpoints there.
WORK_DIR = "/content/keras-bert-pretraining" if IN_COLAB else "keras-bert-pretraining"
# Your corpus: one sentence per line, a blank line between documents. Empty: Python's docs.
CORPUS = ""
CORPUS_DOCUMENTS = 400
VOCAB_SIZE = 8000
PRESET = "L-4_H-256_A-4"
MAX_SEQ_LENGTH = 128
MAX_PREDICTIONS_PER_SEQ = 20
DUPE_FACTOR = 5
BATCH_SIZE = 64
TRAIN_STEPS = 2000
LEARNING_RATE = 5e-4
MIXED_PRECISION = "bf16"  # TPUs and recent GPUs/CPUs; None for float32

# %% [markdown]
# ## Accelerator

# %%
import keras_bert

# Before anything imports TensorFlow: it starts without the lines its C++ side writes
# (CUDA and CPU notices, and a red "failed call to cuInit" on a machine without a GPU).
keras_bert.start_tensorflow_quietly()

import os

import tensorflow as tf

from keras_bert.distribute import get_strategy

strategy = get_strategy()  # TPUStrategy must be made before other TensorFlow work
print(type(strategy).__name__, "with", strategy.num_replicas_in_sync, "replica(s)")
tf.io.gfile.makedirs(WORK_DIR)

# %% [markdown]
# ## 1. Corpus and vocabulary
# The vocabulary learner streams the corpus through tf.data, so corpora larger than memory work.

# %%
from keras_bert.quickstart import build_corpus
from keras_bert.tokenization.vocab import save_vocab
from keras_bert.tokenization.vocab_learning import learn_vocab

corpus = CORPUS or os.path.join(WORK_DIR, "corpus.txt")
if not CORPUS:
    print(build_corpus(corpus, CORPUS_DOCUMENTS), "documents of Python's reference docs")
vocab_file = os.path.join(WORK_DIR, "vocab.txt")
tokens = learn_vocab([corpus], VOCAB_SIZE, lower_case=True)
save_vocab(tokens, vocab_file)
print(len(tokens), "tokens, e.g.", tokens[1000:1010])

# %% [markdown]
# ## 2. Pretraining TFRecords
# The same as `python tfrecords/create_pretraining_data.py ...`: parallel, reproducible,
# memory-bounded, and atomic (no half-written file under a final name).

# %%
from keras_bert.pretraining_data.writer import PretrainingDataConfig, create_pretraining_data
from keras_bert.pretraining_data.worker import InstanceOptions

records_dir = os.path.join(WORK_DIR, "records")
summary = create_pretraining_data(PretrainingDataConfig(
    input_file=corpus, vocab_file=vocab_file, output_dir=records_dir, num_shards=4,
    instance=InstanceOptions(max_seq_length=MAX_SEQ_LENGTH,
                             max_predictions_per_seq=MAX_PREDICTIONS_PER_SEQ,
                             dupe_factor=DUPE_FACTOR)))
print(summary.instances, "instances in", len(summary.output_files), "files")

# %% [markdown]
# ## 3. Pretrain
# MLM + NSP with AdamW, linear warmup and decay, global-norm clipping; checkpoints hold the
# model, optimizer, step and input position. At the end the model is exported as a Google TF1
# checkpoint and a keras-bert save, both of which fine-tuning loads.

# %%
from keras_bert import BertConfig
from keras_bert.pretraining.run import PretrainingSettings, run_pretraining

output_dir = os.path.join(WORK_DIR, "pretraining")
result = run_pretraining(PretrainingSettings(
    input_files=os.path.join(records_dir, "*.tfrecord"), output_dir=output_dir,
    bert_config=BertConfig.preset(PRESET, vocab_size=VOCAB_SIZE),
    max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS_PER_SEQ,
    train_batch_size=BATCH_SIZE, num_train_steps=TRAIN_STEPS,
    num_warmup_steps=max(1, TRAIN_STEPS // 10), learning_rate=LEARNING_RATE,
    mixed_precision=MIXED_PRECISION, steps_per_loop=max(1, min(100, TRAIN_STEPS // 10)),
    save_checkpoints_steps=max(1, TRAIN_STEPS // 4), vocab_file=vocab_file),
    strategy=strategy)
final_loss = float(result.metrics["loss"])
print("step", result.step, {k: round(float(v), 3) for k, v in result.metrics.items()})
print("export:", result.export_dir)

# %% [markdown]
# ## 4. Loss curve
# The run writes TensorBoard summaries; here they are read back and plotted.

# %%
import matplotlib.pyplot as plt

losses = {}
for events in tf.io.gfile.glob(os.path.join(output_dir, "summaries", "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(events):
        for value in event.summary.value:
            if value.tag == "loss":
                losses[event.step] = float(tf.make_ndarray(value.tensor))
steps = sorted(losses)
plt.plot(steps, [losses[s] for s in steps], marker="o")
plt.xlabel("step")
plt.ylabel("MLM + NSP loss")
plt.title(f"Pretraining {PRESET}")
plt.show()
