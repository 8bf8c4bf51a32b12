"""Small SavedModels for the server tests: fast to write and load, outputs known exactly."""

import os

import tensorflow as tf


class ToyModel(tf.Module):
    """Signatures: serving_default (x float32 [batch, 3] -> y = 2x + version, total = sum(x)),
    echo (text [batch] -> length, upper), pair (a, b float32 [batch] -> sum), classify and
    regress over serialized tf.Examples."""

    def __init__(self, version: int):
        super().__init__()
        self.offset = tf.Variable(float(version), trainable=False)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def predict(self, x):
        return {"y": 2.0 * x + self.offset, "total": tf.reduce_sum(x, axis=1)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def echo(self, text):
        return {"length": tf.strings.length(text), "upper": tf.strings.upper(text)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="a"),
                                  tf.TensorSpec([None], tf.float32, name="b")])
    def pair(self, a, b):
        return {"sum": a + b}

    def _parse(self, serialized):
        features = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([], tf.float32)})
        return features["x"]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def classify(self, inputs):
        x = self._parse(inputs)
        scores = tf.stack([tf.sigmoid(-x), tf.sigmoid(x)], axis=1)
        classes = tf.tile(tf.constant([["neg", "pos"]]), [tf.shape(x)[0], 1])
        return {"scores": scores, "classes": classes}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def regress(self, inputs):
        return {"outputs": 3.0 * self._parse(inputs) + self.offset}


def write_toy_version(base_path: str, version: int) -> str:
    """Writes version ``version`` under ``base_path`` (via a temporary name, then a rename)."""
    model = ToyModel(version)
    target = os.path.join(base_path, str(version))
    scratch = os.path.join(base_path, f".tmp-{version}")
    tf.saved_model.save(model, scratch, signatures={
        "serving_default": model.predict, "echo": model.echo, "pair": model.pair,
        "classify": model.classify, "regress": model.regress})
    os.replace(scratch, target)
    return target
