"""`keras-bert predict --server` finds the signature that takes raw text from the model's
metadata: serving_default in a default export, serve_text in one made with
serving_default="transformers" (whose serving_default takes ids); a --signature that takes no
text, or a model without one, fails in one line naming the signatures.

The quick lane checks the same choice in tests/export/test_transformers_signature.py, on a
transformers-mode export's signatures as the metadata gives them, without a server."""

import json
import os

import keras
import numpy as np
import pytest

from keras_bert import BertClassifier, BertEncoder, BertPreprocessor
from keras_bert.cli import main
from keras_bert.export import export_model
from tests.export.test_transformers_signature import ids_only_model
from tests.serving.server_helpers import running_server, write_model_config

pytestmark = pytest.mark.slow  # an in-process server with three exports

TEXTS = ["What a great film!", "Angela Merkel visited Paris."]


@pytest.fixture(scope="module")
def served(minilm_dir, tmp_path_factory):
    keras.utils.set_random_seed(5)
    preprocessor = BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), seq_length=32)
    encoder = BertEncoder(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=64,
                          max_position_embeddings=64)
    model = BertClassifier(encoder, 2, preprocessor=preprocessor,
                           label_names=["negative", "positive"])
    base = tmp_path_factory.mktemp("models")
    export_model(model, str(base), "text", preprocessor=preprocessor)
    export_model(model, str(base), "transformers", preprocessor=preprocessor,
                 serving_default="transformers")
    ids_only_model(str(base / "ids" / "1"))
    with running_server("--model_config_file",
                        write_model_config(base, ["text", "transformers", "ids"])) as (server, _):
        yield server


def predict(server, protocol, capsys, *argv):
    port = server.grpc_port if protocol == "grpc" else server.rest_port
    rc = main(["predict", "--server", f"127.0.0.1:{port}", "--protocol", protocol, *argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_a_transformers_export_answers_text_as_the_default_export(served, protocol, capsys):
    rc, out, err = predict(served, protocol, capsys, "--model", "text", *TEXTS)
    assert rc == 0, err
    expected = [json.loads(line) for line in out.splitlines()]
    rc, out, err = predict(served, protocol, capsys, "--model", "transformers", *TEXTS)
    assert rc == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["text"] for line in lines] == TEXTS
    assert [line["class_names"] for line in lines] == [line["class_names"] for line in expected]
    np.testing.assert_allclose([line["probabilities"] for line in lines],
                               [line["probabilities"] for line in expected], atol=1e-6)
    # Named, it is used as it is.
    rc, out, err = predict(served, protocol, capsys, "--model", "transformers",
                           "--signature", "serve_text", *TEXTS)
    assert rc == 0 and [json.loads(line) for line in out.splitlines()] == lines, err


@pytest.mark.parametrize("protocol", ["grpc", "rest"])
def test_a_signature_or_model_without_text_fails_in_one_line(served, protocol, capsys):
    rc, out, err = predict(served, protocol, capsys, "--model", "transformers",
                           "--signature", "serving_default", "hi")
    assert rc == 2 and not out
    assert err == ("keras-bert predict: error: signature 'serving_default' of model "
                   "'transformers' takes attention_mask (int32), input_ids (int32), "
                   "token_type_ids (int32), not raw text; serve_text takes raw text\n")
    rc, _, err = predict(served, protocol, capsys, "--model", "text", "--signature", "nope",
                         "hi")
    assert rc == 2 and err.count("\n") == 1
    assert "model 'text' has no signature 'nope' (it has " in err
    assert err.endswith("; serving_default takes raw text\n")
    rc, out, err = predict(served, protocol, capsys, "--model", "ids", "hi")
    assert rc == 2 and not out
    assert err == ("keras-bert predict: error: no signature of model 'ids' takes raw text (a "
                   "string input 'text'): serving_default takes input_ids (int32)\n")
