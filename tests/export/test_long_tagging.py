"""Exports of texts longer than the tagger (issue 52): its raw-text serving_default reads a long
text as ``predict_tags`` reads it (windows of whole words, run as one batch) and answers one
row per text of all its WordPieces, each word tagged from the window where it has the most
context, through TensorFlow's graph-mode loader (the path TF Serving takes)."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertPreprocessor, BertTokenClassifier
from keras_bert.export import export_model
from tests.serving.graph_mode import GraphModeModel
from tests.tasks.tiny_checkpoint import VOCAB, WORDS, tiny_encoder

SEQ_LENGTH = 10  # windows of 8 WordPieces
LONG = "john and mary visited cats in paris, the dogs ran home and the movies were nice"
TEXTS = [LONG, "mary lives in london", "", " ".join(WORDS[20:40])]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    preprocessor = BertPreprocessor(vocabulary=VOCAB, seq_length=SEQ_LENGTH)
    model = BertTokenClassifier(tiny_encoder(), ["O", "B-PER", "I-PER", "B-LOC"],
                                preprocessor=preprocessor, window_stride=3)
    path = export_model(model, str(tmp_path_factory.mktemp("long")), "ner", max_windows=6)
    return model, GraphModeModel(path)


def test_long_texts_are_tagged_as_predict_tags(served):
    model, graph = served
    assert [len(w) for w in model.align_windows(TEXTS)] == [5, 1, 1, 5]
    outputs = graph.run("serving_default", text=np.array(TEXTS, object))
    for row, (text, tags) in enumerate(zip(TEXTS, model.predict_tags(TEXTS))):
        pieces = model.tokenizer.tokenize(text)
        tokens = [t.decode() for t in outputs["tokens"][row]]
        assert tokens[:len(pieces) + 2] == ["[CLS]", *pieces, "[SEP]"]
        assert outputs["input_mask"][row].sum() == len(pieces) + 2
        starts = outputs["word_starts"][row]
        assert [t.decode() for t in outputs["labels"][row][starts]] == tags, row


def test_a_short_text_is_tagged_as_one_window(served):
    model, graph = served
    outputs = graph.run("serving_default", text=np.array(TEXTS[1:3], object))
    packed = {k: np.asarray(v) for k, v in model.preprocessor(TEXTS[1:3]).items()}
    one_window = graph.run("serve_ids", **packed)
    length = outputs["probabilities"].shape[1]
    text = outputs["input_mask"].astype(bool)  # padding positions are 0 here
    np.testing.assert_allclose(outputs["probabilities"][text],
                               one_window["probabilities"][:, :length][text], atol=1e-5)
    for name in ("labels", "tokens", "word_starts", "input_mask"):
        np.testing.assert_array_equal(outputs[name], one_window[name][:, :length])


def test_a_request_of_empty_texts_is_tagged_as_cls_sep(served):
    """No text of the request has a word (empty, whitespace, control characters)."""
    _, graph = served
    outputs = graph.run("serving_default", text=np.array(["", " \t\x00\x07 "], object))
    assert outputs["input_mask"].sum(1).tolist() == [2, 2]
    assert [[t.decode() for t in row[:2]] for row in outputs["tokens"]] == [["[CLS]", "[SEP]"]] * 2
    assert not outputs["word_starts"].any()


def test_a_text_past_max_windows_is_refused_naming_the_limit(served):
    _, graph = served
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_windows=6"):
        graph.run("serving_default", text=np.array(["mary", " ".join(WORDS[:40])], object))
