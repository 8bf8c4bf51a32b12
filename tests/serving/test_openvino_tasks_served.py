"""`keras-bert serve` serves a tagger's, a multiple-choice model's and a question answerer's
OpenVINO IR (export_model(..., format="openvino")) as their SavedModel's serving_default answers:
a tagger's long text merged from its windows, a long context's answer from its windows, a
context beyond max_windows and questions without as many contexts refused as TF Serving
refuses them, and `keras-bert predict --server` printing the served rows.

Slow: three IR exports and a server. Their fast twins: tests/export/test_openvino.py (each IR
against its SavedModel, max_windows and unequal rows refused, in OpenVINO's runtime),
test_openvino_serving.py (an IR served: the classifier's, max_windows refused over gRPC) and
test_server_api.py (inputs of different row counts refused with TF Serving's message). Skipped
where the ``openvino`` extra is not installed."""

import json
import os

import grpc
import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("openvino")
pytest.importorskip("openvino_tokenizers")
pytest.importorskip("nncf")

from keras_bert import (BertMultipleChoice, BertPreprocessor,  # noqa: E402
                        BertQuestionAnswerer, BertTokenClassifier)
from keras_bert.cli import main  # noqa: E402
from keras_bert.export import export_model  # noqa: E402
from keras_bert.export.signatures import TEXT_SIGNATURE, build_signatures  # noqa: E402
from tests.serving.server_helpers import running_server, write_model_config  # noqa: E402
from tests.serving.test_openvino_serving import TEXTS, text_request, tiny_encoder  # noqa: E402

pytestmark = pytest.mark.slow

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@pytest.fixture(scope="module")
def served(minilm_dir, tmp_path_factory):
    preprocessor = BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), seq_length=32)
    encoder = tiny_encoder()
    tagger = BertTokenClassifier(encoder, TAGS, preprocessor=preprocessor)
    chooser = BertMultipleChoice(encoder, num_choices=2, preprocessor=preprocessor)
    answerer = BertQuestionAnswerer(encoder, preprocessor=preprocessor, doc_stride=8)
    base = tmp_path_factory.mktemp("models")
    export_model(tagger, str(base), "tagger_openvino", format="openvino")
    export_model(chooser, str(base), "choice_openvino", format="openvino")
    export_model(answerer, str(base), "answerer_openvino", format="openvino", max_windows=3)
    names = ["tagger_openvino", "choice_openvino", "answerer_openvino"]
    with running_server("--model_config_file", write_model_config(base, names)) as (server,
                                                                                   stubs):
        stubs.grpc_port = server.grpc_port
        stubs.tagger, stubs.chooser, stubs.answerer = tagger, chooser, answerer
        stubs.preprocessor = preprocessor
        yield stubs


def test_a_served_tagger_answers_as_its_serving_default(served, capsys):
    """The served IR against the SavedModel's serving_default (the function the export saves,
    run here), at every text position, a long text's windows merged: the SavedModel pads to
    a multiple of 8, the IR to the request's longest text."""
    texts = TEXTS + [" ".join(TEXTS[:3]) * 3]  # the last: 3 windows of whole words
    response = served.prediction.Predict(text_request("tagger_openvino", texts), timeout=30)
    got = {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}
    want = {name: value.numpy() for name, value in build_signatures(
        served.tagger, served.preprocessor)[TEXT_SIGNATURE](text=tf.constant(texts)).items()}
    assert got["input_mask"][-1].sum() > 32  # every piece of the long text tagged
    assert sorted(got) == sorted(want)
    width = got["input_mask"].shape[1]
    assert not want["input_mask"][:, width:].any()
    text = got["input_mask"] > 0
    for name in ("tokens", "labels", "input_mask"):
        np.testing.assert_array_equal(got[name], want[name][:, :width], name)
    np.testing.assert_array_equal(got["word_starts"][text], want["word_starts"][:, :width][text])
    np.testing.assert_allclose(got["probabilities"][text],
                               want["probabilities"][:, :width][text], atol=1e-5)
    rc = main(["predict", "--server", f"127.0.0.1:{served.grpc_port}", "--model",
               "tagger_openvino", *TEXTS[:3]])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [row["text"] for row in rows] == TEXTS[:3]
    for row, tokens, labels, mask in zip(rows, got["tokens"], got["labels"],
                                         got["input_mask"]):  # padded to another width
        length = mask.sum()
        assert row["tokens"][:length] == [t.decode() for t in tokens[:length]]
        assert row["labels"][:length] == [t.decode() for t in labels[:length]]
        assert not any(row["tokens"][length:])


def test_a_served_multiple_choice_ir_answers_as_its_serving_default(served):
    texts, choices = TEXTS[:3], [["yes", "no"], ["Berlin", "Paris"], ["中文", "wörld"]]
    request = text_request("choice_openvino", texts)
    request.inputs["choices"].CopyFrom(tf.make_tensor_proto(np.array(choices, dtype=object),
                                                            dtype=tf.string))
    response = served.prediction.Predict(request, timeout=30)
    got = {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}
    want = build_signatures(served.chooser, served.preprocessor)[TEXT_SIGNATURE](
        text=tf.constant(texts), choices=tf.constant(choices))
    assert sorted(got) == sorted(want)
    np.testing.assert_allclose(got["probabilities"], want["probabilities"].numpy(), atol=1e-5)
    np.testing.assert_array_equal(got["choice_text"], want["choice_text"].numpy())


def test_a_served_question_answerer_ir_answers_as_its_serving_default(served, capsys):
    """A long context read as windows (3 of them at seq_length 32); beyond max_windows=3,
    refused naming the limit, and the next request answered; ``keras-bert predict --server``
    prints the answer."""
    questions = ["Who visited Paris?", "Where?", "What?"]
    contexts = [" ".join(TEXTS[:3]) * 2, TEXTS[1], ""]
    request = text_request("answerer_openvino", questions)
    request.inputs["text_pair"].CopyFrom(tf.make_tensor_proto(np.array(contexts, dtype=object),
                                                              dtype=tf.string))
    response = served.prediction.Predict(request, timeout=30)
    got = {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}
    want = {name: value.numpy() for name, value in build_signatures(
        served.answerer, served.preprocessor)[TEXT_SIGNATURE](
        text=tf.constant(questions), text_pair=tf.constant(contexts)).items()}
    assert sorted(got) == sorted(want)
    np.testing.assert_array_equal(got["answer_text"], want["answer_text"])
    for name in ("answer_start", "answer_end"):
        np.testing.assert_array_equal(got[name], want[name], name)
    np.testing.assert_allclose(got["answer_score"], want["answer_score"], rtol=1e-5)
    assert got["answer_text"][0] and got["answer_text"][2] == b""
    request.inputs["text_pair"].CopyFrom(tf.make_tensor_proto(
        np.array([contexts[0] * 3] + contexts[1:], dtype=object), dtype=tf.string))
    code, message = served.grpc_error(served.prediction.Predict, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT, message
    assert message == ("a text is longer than max_windows=3 windows; send shorter texts, or "
                       "export with a larger --max_windows (0: no limit)")
    request = text_request("answerer_openvino", questions)  # three questions, one context
    request.inputs["text_pair"].CopyFrom(tf.make_tensor_proto(np.array(contexts[:1],
                                                                       dtype=object)))
    code, message = served.grpc_error(served.prediction.Predict, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT, message
    assert message == ("Batching session Run() input tensors must have equal 0th-dimension "
                       "size; got text: 3, text_pair: 1")  # TF Serving's words
    rc = main(["predict", "--server", f"127.0.0.1:{served.grpc_port}", "--model",
               "answerer_openvino", questions[1], "--text_pair", contexts[1]])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert json.loads(captured.out)["answer_text"] == got["answer_text"][1].decode()
