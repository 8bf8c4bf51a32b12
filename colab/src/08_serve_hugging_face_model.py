# %% [markdown]
# # Serve a Hugging Face fine-tuned BERT on TF Serving
#
# Most fine-tuned BERT models live on the Hugging Face Hub. keras-bert loads one with its head
# (the number of labels, their names, single-label, multi-label or regression), exports it as a
# SavedModel that takes raw text, and TF Serving serves it as it is: the served probabilities are
# transformers' softmax of its logits. This notebook takes a sentiment classifier from the Hub,
# checks its head, exports it in float32 and int8, serves it, queries it with `keras-bert
# predict`, compares the answers with transformers' own, and writes the model back out as a
# Hugging Face folder. (In this repository's CI the model is a small folder that transformers
# saved, tests/fixtures/hf_heads/seq_cls, with the logits transformers recorded for it.)
#
# **Time.** On a CPU outside Colab, the default model takes about 7 minutes after its download
# (measured: 415 s on a shared 2-core CPU with a random-weight model of its shape: BERT-base,
# 167M parameters, 670 MB to download); Colab's install of TF Serving, the transformers
# reference and its GPU or TPU were not measured. For about 2 minutes (measured), point
# `HF_MODEL` at a smaller BertForSequenceClassification folder, as CI does with this
# repository's tests/fixtures/hf_heads/seq_cls (and `SEQ_LENGTH = 32`).

# %%
# Install keras-bert (on Colab only; locally, install the repo with pip install -e .).
import sys

IN_COLAB = "google.colab" in sys.modules
if IN_COLAB:
    !git clone -q https://github.com/keras-bert/keras-bert /content/keras-bert-src
    !pip install -q -e "/content/keras-bert-src[serving,notebooks]"

# %% tags=["parameters"]
WORK_DIR = "/content/keras-bert-hf" if IN_COLAB else "keras-bert-hf"
# A Hub id or a local folder of a BertForSequenceClassification (1 to 5 stars, 6 languages).
HF_MODEL = "nlptown/bert-base-multilingual-uncased-sentiment"
TEXTS = ["This product is wonderful, I use it every day.", "Arrived broken and late.",
         "It is okay, nothing special.", "Ce produit est excellent !"]
SEQ_LENGTH = 128

# %% [markdown]
# ## The folder and its head
# `keras-bert info` reads config.json (`architectures`, `id2label`, `problem_type`) and the
# weights (safetensors, or pytorch_model.bin read without torch); the tokenizer comes from
# vocab.txt or, as transformers 5 saves it, tokenizer.json.

# %%
import keras_bert

# Before anything imports TensorFlow: it starts without the lines its C++ side writes
# (CUDA and CPU notices, and a red "failed call to cuInit" on a machine without a GPU).
keras_bert.start_tensorflow_quietly()

import os
import subprocess

import numpy as np

if os.path.isdir(HF_MODEL):
    folder = HF_MODEL
else:
    from huggingface_hub import snapshot_download
    folder = snapshot_download(HF_MODEL, allow_patterns=["*.json", "*.txt", "*.safetensors",
                                                         "pytorch_model.bin"])
keras_bert_command = [sys.executable, "-m", "keras_bert.cli"]
print(subprocess.run(keras_bert_command + ["info", folder], capture_output=True, text=True,
                     check=True).stdout.split("parameters:")[0])

# %%
classifier = keras_bert.BertClassifier.from_pretrained(folder, seq_length=SEQ_LENGTH)
print(type(classifier).__name__, classifier.num_classes, "classes:", classifier.label_names)
for text, label in zip(TEXTS, classifier.predict_labels(TEXTS)):
    print(f"{label:>10}  {text}")

# %% [markdown]
# ## What transformers says
# The reference: transformers' own `AutoModelForSequenceClassification` on the same texts (on
# Colab, where torch and transformers are installed). Without them (this repository's CI), the
# logits transformers recorded when it saved the test folder.

# %%
def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)

try:
    import torch
    import transformers
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    reference_model = transformers.AutoModelForSequenceClassification.from_pretrained(folder)
    reference_model.eval()
    with torch.no_grad():
        logits = reference_model(**tokenizer(TEXTS, padding=True, truncation=True,
                                             max_length=SEQ_LENGTH, return_tensors="pt")).logits
    reference = softmax(logits.numpy())
    reference_source = f"transformers {transformers.__version__}"
except ImportError:
    recorded = np.load(os.path.join(folder, "expected.npz"), allow_pickle=True)
    TEXTS = [str(t) for t in recorded["texts"]]
    reference = softmax(recorded["logits"])
    reference_source = "the logits transformers recorded for this folder"
print("reference:", reference_source)

# %% [markdown]
# ## Export for TF Serving, float32 and int8
# `<export_base>/<model_name>/<version>/`, with `serving_default` on raw text. The int8 export
# runs the encoder's dense layers on oneDNN's int8 matmul (x86-64 CPUs), at a third of the
# size.

# %%
export_base = os.path.join(WORK_DIR, "models")
float_dir = keras_bert.export_model(classifier, export_base, "hf_sentiment")
int8_dir = keras_bert.export_model(classifier, export_base, "hf_sentiment_int8",
                                   quantize="int8")
print(float_dir, int8_dir)

# %% [markdown]
# ## Serve and ask
# On Colab: TensorFlow Serving itself (TF Serving's apt repository, as its own Colab tutorial
# installs it). Elsewhere: `keras-bert serve`, which takes tensorflow_model_server's flags and
# loads models the same way. The question goes through `keras-bert predict` (gRPC).

# %%
if IN_COLAB:
    !echo "deb http://storage.googleapis.com/tensorflow-serving-apt stable tensorflow-model-server tensorflow-model-server-universal" > /etc/apt/sources.list.d/tensorflow-serving.list
    !curl -s https://storage.googleapis.com/tensorflow-serving-apt/tensorflow-serving.release.pub.gpg | apt-key add -
    !apt-get -qq update && apt-get -qq install tensorflow-model-server

# %%
import json
import socket
import time

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

config_path = os.path.join(WORK_DIR, "models.config")
with open(config_path, "w") as f:
    f.write("model_config_list {\n" + "".join(
        f'  config {{ name: "{name}" base_path: "{os.path.abspath(os.path.join(export_base, name))}" '
        f'model_platform: "tensorflow" }}\n' for name in ("hf_sentiment", "hf_sentiment_int8"))
        + "}\n")
grpc_port, rest_port = free_port(), free_port()
server_command = ["tensorflow_model_server"] if IN_COLAB else keras_bert_command + ["serve"]
server = subprocess.Popen(server_command + [f"--port={grpc_port}", f"--rest_api_port={rest_port}",
                                            f"--model_config_file={config_path}"])

import urllib.request

def wait_until_available(model_name, timeout=300):
    """Polls TF Serving's REST model status until the model's version is AVAILABLE."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{rest_port}/v1/models/{model_name}", timeout=5) as reply:
                states = [v["state"] for v in json.loads(reply.read())["model_version_status"]]
            if "AVAILABLE" in states:
                return
        except OSError:
            pass  # the server is still starting
        time.sleep(1)
    raise RuntimeError(f"{model_name} was not served within {timeout} s")

def ask(model_name):
    """keras-bert predict's JSON lines for TEXTS, once the model is loaded."""
    wait_until_available(model_name)
    result = subprocess.run(keras_bert_command + [
        "predict", "--server", f"127.0.0.1:{grpc_port}", "--model", model_name, *TEXTS],
        capture_output=True, text=True, check=True)
    return [json.loads(line) for line in result.stdout.splitlines()]

served = ask("hf_sentiment")
served_int8 = ask("hf_sentiment_int8")
for row in served:
    print(f"{row['class_names']:>10}  {row['text']}")

# %% [markdown]
# ## Served against transformers
# float32: the same probabilities within 1e-4. int8: the same labels, probabilities close.

# %%
served_probabilities = np.array([row["probabilities"] for row in served])
int8_probabilities = np.array([row["probabilities"] for row in served_int8])
max_difference = float(np.abs(served_probabilities - reference).max())
int8_difference = float(np.abs(int8_probabilities - reference).max())
same_labels = bool((int8_probabilities.argmax(-1) == reference.argmax(-1)).all())
print(f"float32: max |served - {reference_source}| = {max_difference:.2e}")
print(f"int8:    max |served - {reference_source}| = {int8_difference:.2e}, "
      f"same labels: {same_labels}")
server.terminate()
server.wait(timeout=60)

# %% [markdown]
# ## And back out
# The same model as a Hugging Face folder (what `AutoModelForSequenceClassification` and
# `AutoTokenizer` load, `id2label` included) and as Google's run_classifier.py checkpoint.

# %%
hf_out = keras_bert.save_checkpoint(classifier, os.path.join(WORK_DIR, "classifier-hf"), "hf",
                                    overwrite=True)
print(sorted(os.listdir(hf_out)))
with open(os.path.join(hf_out, "config.json")) as f:
    print(json.load(f)["id2label"])
round_trip = keras_bert.BertClassifier.from_pretrained(hf_out, seq_length=SEQ_LENGTH)
round_trip_difference = float(np.abs(round_trip.predict(TEXTS, verbose=0)
                                     - classifier.predict(TEXTS, verbose=0)).max())
print("back in from the Hugging Face folder: max difference", round_trip_difference)
