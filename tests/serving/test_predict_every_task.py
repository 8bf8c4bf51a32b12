"""`keras-bert predict` against an export of every task type, over gRPC and REST: each prints
one JSON line per text whose values are the Keras model's."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

from keras_bert import BertEncoder, BertPreprocessor
from keras_bert.cli import main
from keras_bert.export import export_model
from keras_bert import (BertClassifier, BertEmbedder, BertMultipleChoice,
                               BertQuestionAnswerer, BertTokenClassifier)
from tests.serving.server_helpers import running_server, write_model_config

TEXTS = ["What a great film!", "Angela Merkel visited Paris."]
PAIRS = ["It was wonderful.", "Merkel went to France."]
CHOICES = [["and left.", "then slept."], ["by train", "by boat"]]
ATOL = 2e-5


def encoder():
    keras.utils.set_random_seed(5)
    return BertEncoder(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)


@pytest.fixture(scope="module")
def served(minilm_dir, tmp_path_factory):
    preprocessor = BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), seq_length=32)
    models = {
        "sentiment": BertClassifier(encoder(), 2, preprocessor=preprocessor,
                                    label_names=["negative", "positive"]),
        "sts": BertClassifier(encoder(), 1, preprocessor=preprocessor),
        "ner": BertTokenClassifier(encoder(), ["O", "B-PER", "B-LOC"],
                                   preprocessor=preprocessor),
        "qa": BertQuestionAnswerer(encoder(), preprocessor=preprocessor),
        "swag": BertMultipleChoice(encoder(), num_choices=2, preprocessor=preprocessor),
        "embed": BertEmbedder(encoder(), preprocessor=preprocessor, pooling="mean",
                             feature_layers=(-1,)),
        "encoder": encoder(),
    }
    base = tmp_path_factory.mktemp("tasks")
    for name, model in models.items():
        export_model(model, str(base), name, preprocessor=preprocessor)
    config = write_model_config(base, models)
    with running_server("--model_config_file", config) as (server, _):
        yield models, preprocessor, server


def run_predict(server, protocol, capsys, model, *extra):
    port = server.grpc_port if protocol == "grpc" else server.rest_port
    assert main(["predict", "--server", f"127.0.0.1:{port}", "--protocol", protocol,
                 "--model", model, *extra]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def packed(preprocessor, texts, pairs=None):
    inputs = tf.constant(texts) if pairs is None else [tf.constant(texts), tf.constant(pairs)]
    return {k: v.numpy() for k, v in preprocessor(inputs).items()}


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_predict_prints_every_task(served, protocol, capsys):
    models, preprocessor, server = served

    lines = run_predict(server, protocol, capsys, "sentiment", *TEXTS)
    expected = np.asarray(models["sentiment"](packed(preprocessor, TEXTS)))
    assert [line["text"] for line in lines] == TEXTS
    assert [line["class_names"] for line in lines] == [
        ["negative", "positive"][i] for i in expected.argmax(-1)]
    np.testing.assert_allclose([line["probabilities"] for line in lines], expected, atol=ATOL)

    lines = run_predict(server, protocol, capsys, "sts", *TEXTS)
    expected = np.asarray(models["sts"](packed(preprocessor, TEXTS)))[:, 0]
    np.testing.assert_allclose([line["score"] for line in lines], expected, atol=ATOL)

    lines = run_predict(server, protocol, capsys, "ner", TEXTS[1])
    ids = packed(preprocessor, TEXTS[1:])
    tags = np.asarray(models["ner"](ids))[0].argmax(-1)
    length = int(ids["input_mask"].sum())
    labels = ["O", "B-PER", "B-LOC"]
    assert lines[0]["labels"][1:length - 1] == [labels[i] for i in tags[1:length - 1]]
    assert lines[0]["tokens"][1:length - 1] == models["ner"].tokenizer.tokenize(TEXTS[1])

    extra = [a for pair in zip(["--text_pair"] * 2, PAIRS) for a in pair]
    lines = run_predict(server, protocol, capsys, "qa", TEXTS[0], TEXTS[1], *extra)
    assert [line["text_pair"] for line in lines] == PAIRS
    expected = models["qa"](packed(preprocessor, TEXTS, PAIRS))
    for row, line in enumerate(lines):
        width = len(line["start_logits"])
        np.testing.assert_allclose(line["start_logits"],
                                   np.asarray(expected["start_logits"])[row, :width], atol=ATOL)
        assert isinstance(line["answer_text"], str)

    extra = [a for choices in CHOICES for a in ("--choices", json.dumps(choices))]
    lines = run_predict(server, protocol, capsys, "swag", *TEXTS, *extra)
    expected = models["swag"].predict(list(zip(TEXTS, CHOICES)), verbose=0)
    np.testing.assert_allclose([line["probabilities"] for line in lines], expected, atol=ATOL)
    assert [line["choice_text"] for line in lines] == [
        CHOICES[row][i] for row, i in enumerate(expected.argmax(-1))]

    lines = run_predict(server, protocol, capsys, "embed", *TEXTS)
    expected = np.asarray(models["embed"](packed(preprocessor, TEXTS))["embedding"])
    np.testing.assert_allclose([line["embedding"] for line in lines], expected, atol=ATOL)

    lines = run_predict(server, protocol, capsys, "encoder", "--outputs",
                        "pooled_output,input_mask", *TEXTS)
    expected = models["encoder"](packed(preprocessor, TEXTS))
    np.testing.assert_allclose([line["pooled_output"] for line in lines],
                               np.asarray(expected["pooled_output"]), atol=ATOL)
    assert [sum(line["input_mask"]) for line in lines] == packed(
        preprocessor, TEXTS)["input_mask"].sum(1).tolist()



@pytest.mark.slow
def test_every_export_has_warmup_requests_the_server_replayed(served):
    from tensorflow_serving.apis import prediction_log_pb2
    from keras_bert.export.warmup import WARMUP_FILE
    models, _, server = served
    kinds = {}
    for name in models:
        # Loaded, so its warm-up ran without error (a failing one fails the load).
        servable = server.manager.servable(predict_pb2.PredictRequest(
            model_spec={"name": name}).model_spec)
        logs = [prediction_log_pb2.PredictionLog.FromString(record.numpy()) for record in
                tf.data.TFRecordDataset(os.path.join(servable.path, WARMUP_FILE))]
        kinds[name] = {log.WhichOneof("log_type") for log in logs}
        covered = {getattr(log, log.WhichOneof("log_type")).request.model_spec.signature_name
                   for log in logs}
        assert covered == {key for key, signature in servable.signature_defs.items()
                           if signature.inputs}, name
    assert kinds["sentiment"] == {"predict_log", "classify_log"}
    assert kinds["sts"] == {"predict_log", "regress_log"}
