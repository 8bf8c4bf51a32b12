"""Task model exports: each serving_default takes raw text and returns the task's named outputs,
equal to the Keras model's; the classifier's classify/regress signatures serve TF Serving's
Classify and Regress APIs (checked in graph mode, and through the local server in slow tests)."""

import os
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.example import example_pb2
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import classification_pb2, regression_pb2

from keras_bert import BertEncoder, BertPreprocessor
from keras_bert.export import export_model
from keras_bert import (BertClassifier, BertEmbedder, BertMultipleChoice,
                               BertQuestionAnswerer, BertTokenClassifier)
from keras_bert.serving.tensors import serialized_examples
from tests.serving.graph_mode import GraphModeModel
from tests.serving.server_helpers import running_server, write_model_config

SEQ_LENGTH = 24
PAIRS = [("A man is playing a guitar.", "Someone plays music."),
         ("The cat sleeps.", "A dog barks loudly at the unbelievable mailman.")]
ATOL = 2e-5


@pytest.fixture(scope="module")
def preprocessor(minilm_dir):
    return BertPreprocessor(os.path.join(minilm_dir, "vocab.txt"), seq_length=SEQ_LENGTH)


def encoder():
    keras.utils.set_random_seed(3)
    return BertEncoder(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)


def exported(model, tmp_path, name, **kwargs):
    """The export of ``model``, loaded as TF Serving loads it (graph mode + session)."""
    return GraphModeModel(export_model(model, str(tmp_path), name, **kwargs))


def text_example(text, text_pair=None):
    example = example_pb2.Example()
    example.features.feature["text"].bytes_list.value.append(text.encode())
    if text_pair is not None:
        example.features.feature["text_pair"].bytes_list.value.append(text_pair.encode())
    return example


@pytest.fixture(scope="module")
def classifiers(preprocessor, tmp_path_factory):
    """A text-pair classifier (NLI-like) and a regression model, and their exports."""
    base = tmp_path_factory.mktemp("classifiers")
    nli = BertClassifier(encoder(), 3, preprocessor=preprocessor,
                         label_names=["contradiction", "entailment", "neutral"])
    sts = BertClassifier(encoder(), 1, preprocessor=preprocessor)
    paths = {"nli": export_model(nli, str(base), "nli", text_pair=True),
             "sts": export_model(sts, str(base), "sts")}
    return {"nli": nli, "sts": sts}, paths


@pytest.fixture(scope="module")
def loaded(classifiers):
    """Each of the classifiers' exports, loaded once as TF Serving loads it."""
    _, paths = classifiers
    return {name: GraphModeModel(path) for name, path in paths.items()}


@pytest.fixture(scope="module")
def stubs(classifiers):
    """The classifiers' exports served by the local server, for the slow tests of its Classify
    and Regress APIs."""
    _, paths = classifiers
    base = pathlib.Path(paths["nli"]).parent.parent
    with running_server("--model_config_file", write_model_config(base, paths)) as (_, stubs):
        yield stubs


def regress_request(texts):
    """A Regress request for ``texts`` on the sts model's regress signature."""
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "sts"
    request.model_spec.signature_name = "regress"
    request.input.example_list.examples.extend(text_example(t) for t in texts)
    return request


def packed(preprocessor, *texts):
    return {k: v.numpy() for k, v in preprocessor(
        [tf.constant(t) for t in texts] if len(texts) > 1 else tf.constant(texts[0])).items()}


@pytest.mark.slow
def test_pair_classifier_and_tf_serving_classify(preprocessor, classifiers, loaded, stubs):
    models, _ = classifiers
    model, graph = models["nli"], loaded["nli"]
    assert set(graph.signatures) == {"serving_default", "serve_ids", "classify"}
    texts, pairs = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    out = graph.signatures["serving_default"](text=tf.constant(texts),
                                              text_pair=tf.constant(pairs))
    expected = np.asarray(model(packed(preprocessor, texts, pairs)))
    np.testing.assert_allclose(out["probabilities"], expected, atol=ATOL)
    best = expected.argmax(-1)
    assert out["class_ids"].numpy().tolist() == best.tolist()
    assert [n.decode() for n in out["class_names"].numpy()] == [model.label_names[i] for i in best]

    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "nli"
    request.model_spec.signature_name = "classify"
    request.input.example_list.examples.extend(text_example(a, b) for a, b in PAIRS)
    result = stubs.prediction.Classify(request, timeout=60).result
    for row, classifications in enumerate(result.classifications):
        assert [c.label for c in classifications.classes] == model.label_names
        np.testing.assert_allclose([c.score for c in classifications.classes], expected[row],
                                   atol=ATOL)
    status, body = stubs.rest("/v1/models/nli:classify", {
        "signature_name": "classify",
        "examples": [{"text": a, "text_pair": b} for a, b in PAIRS]})
    assert status == 200
    np.testing.assert_allclose([[s for _, s in row] for row in body["result"]], expected,
                               atol=ATOL)


def test_an_empty_text_pair_is_a_single_text_and_empty_text_is_valid(preprocessor, classifiers,
                                                                      loaded):
    """Served and in-process agree: text_pair "" packs as a single text (Google's
    run_classifier.py), and "" itself is a valid text ([CLS] [SEP]) for predict as when served."""
    models, _ = classifiers
    model = models["nli"]
    texts = ["The cat sleeps.", "", "A man is playing a guitar."]
    served = loaded["nli"].signatures["serving_default"](text=tf.constant(texts),
                                                         text_pair=tf.constant(["", "", ""]))
    single = np.asarray(model(packed(preprocessor, texts)))
    np.testing.assert_allclose(served["probabilities"], single, atol=ATOL)
    np.testing.assert_allclose(model.predict(list(zip(texts, ["", "", ""])), verbose=0),
                               single, atol=ATOL)
    out = loaded["sts"].signatures["serving_default"](text=tf.constant([""]))
    np.testing.assert_allclose(models["sts"].predict([""], verbose=0), np.asarray(out["score"])
                               .reshape(1, -1), atol=ATOL)


def test_regression_and_the_regress_signature(preprocessor, classifiers, loaded):
    """serving_default's score is the model's; the regress signature answers a Regress request's
    tf.Examples (serialized as the server passes them) with the same values, in the layout TF
    Serving's Regress API needs (test_tf_serving_regress sends the request to the server)."""
    models, _ = classifiers
    texts = [p[0] for p in PAIRS]
    expected = np.asarray(models["sts"](packed(preprocessor, texts)))[:, 0]
    out = loaded["sts"].signatures["serving_default"](text=tf.constant(texts))
    assert set(out) == {"score"}
    np.testing.assert_allclose(out["score"], expected, atol=ATOL)
    regress = loaded["sts"].signature_defs["regress"]
    assert set(regress.inputs) == {"inputs"} and set(regress.outputs) == {"outputs"}
    assert regress.inputs["inputs"].dtype == types_pb2.DT_STRING
    examples = serialized_examples(regress_request(texts).input)
    values = loaded["sts"].run("regress", inputs=np.array(examples, object))["outputs"]
    assert values.dtype == np.float32 and values.shape == (len(texts),)
    np.testing.assert_allclose(values, expected, atol=ATOL)


@pytest.mark.slow
def test_tf_serving_regress(preprocessor, classifiers, stubs):
    models, _ = classifiers
    texts = [p[0] for p in PAIRS]
    expected = np.asarray(models["sts"](packed(preprocessor, texts)))[:, 0]
    response = stubs.prediction.Regress(regress_request(texts), timeout=60)
    np.testing.assert_allclose([r.value for r in response.result.regressions], expected,
                               atol=ATOL)


def test_token_classifier_gives_per_token_labels(preprocessor, tmp_path):
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    model = BertTokenClassifier(encoder(), labels, preprocessor=preprocessor)
    loaded = exported(model, tmp_path, "ner")
    text = "Angela Merkel visited Ouagadougou"
    out = loaded.signatures["serving_default"](text=tf.constant([text]))
    ids = packed(preprocessor, [text])
    length = int(ids["input_mask"].sum())
    served = out["probabilities"].shape[1]  # padded to the text's length, a multiple of 8
    assert served == -(-length // 8) * 8 < SEQ_LENGTH
    np.testing.assert_array_equal(out["input_mask"], ids["input_mask"][:, :served])
    expected = np.asarray(model(ids))
    # The text's positions; padding positions carry no label (the model's values there depend on
    # how far a chunk was padded, and positions past the chunk are 0).
    np.testing.assert_allclose(out["probabilities"][:, :length], expected[:, :length], atol=ATOL)
    tokens = [t.decode() for t in out["tokens"].numpy()[0]]
    assert tokens[0] == "[CLS]" and tokens[length - 1] == "[SEP]" and tokens[length] == ""
    assert tokens[1:length - 1] == model.tokenizer.tokenize(text)
    starts = out["word_starts"].numpy()[0]
    assert [t for t, s in zip(tokens, starts) if s] == [
        t for t in tokens[1:length - 1] if not t.startswith("##")]
    tags = [t.decode() for t in out["labels"].numpy()[0]]
    assert tags[1:length - 1] == [labels[i] for i in expected[0].argmax(-1)[1:length - 1]]
    assert tags[0] == tags[length - 1] == tags[length] == ""


@pytest.mark.slow
def test_question_answerer_gives_logits_and_the_best_span(preprocessor, tmp_path):
    model = BertQuestionAnswerer(encoder(), preprocessor=preprocessor, max_query_length=8)
    loaded = exported(model, tmp_path, "qa")
    questions = ["Where is the tower?", "Who wrote Hamlet?"]
    contexts = ["The Eiffel tower stands in Paris, France.", "Shakespeare wrote it in 1600."]
    out = loaded.signatures["serving_default"](text=tf.constant(questions),
                                               text_pair=tf.constant(contexts))
    ids = packed(preprocessor, questions, contexts)
    expected = {k: np.asarray(v) for k, v in model(ids).items()}
    served = out["start_logits"].shape[1]
    np.testing.assert_array_equal(out["input_mask"], ids["input_mask"][:, :served])
    assert not ids["input_mask"][:, served:].any()
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(out[name], expected[name][:, :served], atol=ATOL)
    answers, _, _ = model.predict_answers(list(zip(questions, contexts)))
    for row in range(2):
        start, end = expected["start_logits"][row], expected["end_logits"][row]
        length = ids["input_mask"][row].sum()
        context = [i for i in range(SEQ_LENGTH)
                   if ids["input_type_ids"][row][i] == 1 and i < length - 1]
        score, first, last = max((start[i] + end[j], i, j) for i in context for j in context
                                 if i <= j < i + 30)
        assert (int(out["answer_start"][row]), int(out["answer_end"][row])) == (first, last)
        assert float(out["answer_score"][row]) == pytest.approx(float(score), abs=1e-4)
        # The span's characters in the context, with their case and spacing, as predict_answers
        # gives them.
        offsets = model.tokenizer.tokenize_with_offsets(contexts[row]).offsets
        text = contexts[row][offsets[first - context[0]][0]:offsets[last - context[0]][1]]
        assert out["answer_text"].numpy()[row].decode() == text == answers[str(row)]


@pytest.mark.slow
def test_multiple_choice_and_embedder(preprocessor, tmp_path):
    model = BertMultipleChoice(encoder(), num_choices=3, preprocessor=preprocessor)
    loaded = exported(model, tmp_path, "swag")
    contexts = ["She opened the door", "He ate"]
    choices = [["and left.", "then slept.", "with a key."], ["food", "a car", "nothing"]]
    out = loaded.signatures["serving_default"](text=tf.constant(contexts),
                                               choices=tf.constant(choices))
    expected = model.predict(list(zip(contexts, choices)), verbose=0)
    np.testing.assert_allclose(out["probabilities"], expected, atol=ATOL)
    best = expected.argmax(-1)
    assert [c.decode() for c in out["choice_text"].numpy()] == [
        choices[row][i] for row, i in enumerate(best)]
    ids_inputs = loaded.signature_defs["serve_ids"].inputs
    assert [d.size for d in ids_inputs["input_word_ids"].tensor_shape.dim] == [-1, 3, -1]

    embedder = BertEmbedder(encoder(), preprocessor=preprocessor, pooling="mean",
                            normalize=True, feature_layers=(-1,))
    loaded = exported(embedder, tmp_path, "embed")
    texts = [p[1] for p in PAIRS]
    out = loaded.signatures["serving_default"](text=tf.constant(texts))
    assert set(out) == {"embedding"}
    np.testing.assert_allclose(out["embedding"],
                               np.asarray(embedder(packed(preprocessor, texts))["embedding"]),
                               atol=ATOL)
    np.testing.assert_allclose(np.linalg.norm(out["embedding"], axis=1), [1, 1], atol=1e-5)


@pytest.mark.slow
def test_mixed_length_batches_run_sorted_in_chunks_and_match_keras(preprocessor, tmp_path):
    """A served batch of 11 texts of different lengths runs sorted in chunks of 8 rows (each
    padded to its own longest); every row, sequence outputs included, equals the Keras model's,
    in the request's order."""
    model = BertTokenClassifier(encoder(), ["O", "B-PER", "I-PER"], preprocessor=preprocessor)
    loaded = exported(model, tmp_path, "ner")
    texts = ["word " * n + "end" for n in (9, 1, 15, 3, 0, 12, 5, 2, 18, 7, 4)]
    out = loaded.signatures["serving_default"](text=tf.constant(texts))
    ids = packed(preprocessor, texts)
    lengths = ids["input_mask"].sum(1)
    served = out["probabilities"].shape[1]
    assert served == min(-(-lengths.max() // 8) * 8, SEQ_LENGTH)
    np.testing.assert_array_equal(out["input_mask"], ids["input_mask"][:, :served])
    expected = np.asarray(model(ids))[:, :served]
    text = ids["input_mask"][:, :served].astype(bool)
    np.testing.assert_allclose(np.asarray(out["probabilities"])[text], expected[text], atol=ATOL)
    tokens = out["tokens"].numpy()
    for row, length in enumerate(lengths):
        assert tokens[row, length - 1] == b"[SEP]" and not tokens[row, length:].any()

    classifier = BertClassifier(encoder(), 3, preprocessor=preprocessor)
    out = exported(classifier, tmp_path, "cls").signatures["serving_default"](
        text=tf.constant(texts))
    np.testing.assert_allclose(out["probabilities"], np.asarray(classifier(ids)), atol=ATOL)
    empty = exported(classifier, tmp_path, "cls").signatures["serving_default"](
        text=tf.constant([], tf.string))
    assert empty["probabilities"].shape == (0, 3)
