"""Exports of contexts longer than the question answerer (issue 52): its raw-text
serving_default reads a long context as ``predict_answers`` reads it (windows ``doc_stride``
WordPieces apart, each after the whole question, run as one batch) and answers each question
with its best span over all the windows, through TensorFlow's graph-mode loader (the path TF
Serving takes); ``max_windows`` refuses a longer context naming the limit. The answer text is the
context's own characters, as ``predict_answers`` cuts them, for an uncased and a cased model."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertEncoder, BertPreprocessor, BertQuestionAnswerer
from keras_bert.export import export_model
from keras_bert.tasks.squad.reader import SquadExample
from tests.serving.graph_mode import GraphModeModel
from tests.tasks.tiny_checkpoint import VOCAB, WORDS, tiny_encoder

SEQ_LENGTH = 16
QUESTION = "where does john live"  # 4 WordPieces: windows of 16 - 4 - 3 = 9 context pieces
LONG = " ".join(WORDS[10:27])  # 17 pieces at stride 3: 4 windows
LONGER = " ".join(WORDS[30:45])  # 15 pieces: 3 windows
SHORT = "john lives in paris"
PAIRS = [(QUESTION, LONG), ("who", SHORT), (QUESTION, LONGER), ("who", "")]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    preprocessor = BertPreprocessor(vocabulary=VOCAB, seq_length=SEQ_LENGTH)
    model = BertQuestionAnswerer(tiny_encoder(), preprocessor=preprocessor, doc_stride=3,
                                 max_query_length=6)
    path = export_model(model, str(tmp_path_factory.mktemp("long")), "qa", max_windows=4)
    return model, GraphModeModel(path)


def serve(graph, pairs):
    questions, contexts = zip(*pairs)
    return graph.run("serving_default", text=np.array(questions, object),
                     text_pair=np.array(contexts, object))


def test_long_contexts_answer_as_predict_answers(served):
    model, graph = served
    features = model.make_features([SquadExample(str(i), q, c)
                                     for i, (q, c) in enumerate(PAIRS)])
    assert [sum(f.example_index == i for f in features) for i in range(4)] == [4, 1, 3, 1]
    _, nbest, _ = model.predict_answers(PAIRS)
    logits = model.predict(model.to_arrays(PAIRS)[0], verbose=0)
    outputs = serve(graph, PAIRS)
    for row in range(3):
        best = nbest[str(row)][0]
        assert outputs["answer_text"][row].decode() == best.text
        assert outputs["answer_score"][row] == pytest.approx(best.score, abs=1e-5)
        # The served positions and logits are those of the window the answer was cut from.
        start, end = int(outputs["answer_start"][row]), int(outputs["answer_end"][row])
        window = [k for k, f in enumerate(features) if f.example_index == row
                  and f.token_spans[start] is not None and f.token_spans[end] is not None
                  and (f.token_spans[start][0], f.token_spans[end][1]) == (best.start, best.end)
                  and f.token_is_max_context[start]]
        assert window, (row, start, end, best)
        served_length = outputs["start_logits"].shape[1]
        np.testing.assert_allclose(outputs["start_logits"][row],
                                   logits["start_logits"][window[0]][:served_length], atol=1e-5)
        np.testing.assert_array_equal(outputs["input_mask"][row],
                                      features[window[0]].input_mask[:served_length])
    # An empty context: the empty span, no answer.
    assert outputs["answer_text"][3] == b"" and outputs["answer_score"][3] == -np.inf


def test_a_long_context_alone_answers_as_in_a_batch(served):
    _, graph = served
    batch, alone = serve(graph, PAIRS), serve(graph, PAIRS[2:3])
    assert alone["answer_text"][0] == batch["answer_text"][2]
    assert alone["answer_score"][0] == pytest.approx(batch["answer_score"][2], abs=1e-5)


def test_a_short_context_answers_as_one_window(served):
    """A context that fits gives what a single packed window gives (serve_ids). serve_ids'
    answer_text joins the span's WordPieces (its ids carry no context), which here are the
    context's own words: lower case, one space apart."""
    model, graph = served
    outputs = serve(graph, PAIRS[1:2])
    packed = {k: np.asarray(v) for k, v in model.preprocessor([["who"], [SHORT]]).items()}
    one_window = graph.run("serve_ids", **packed)
    for name in ("answer_text", "answer_start", "answer_end"):
        assert outputs[name][0] == one_window[name][0], name
    assert outputs["answer_score"][0] == pytest.approx(one_window["answer_score"][0], abs=1e-5)


def test_a_context_past_max_windows_is_refused_naming_the_limit(served):
    _, graph = served
    too_long = " ".join(WORDS[:20])  # 20 pieces: 5 windows of 9 at stride 3
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_windows=4"):
        serve(graph, [("who", SHORT), (QUESTION, too_long)])


# The served answer text is the context's own characters, as predict_answers cuts them: a
# tiny answerer points at one span of each context (its first and last WordPiece spike the
# start and end units the span head reads), whose text keeps capitals, accents, spacing,
# punctuation inside words, CJK characters and, in a long context, stands in a late window.
FILLER = "the dog sat in the city and the cat ran away home".split()
STARTS = {"uncased": ["new", "cafe", "u", "東", "dr"], "cased": ["New", "Café", "U", "東", "Dr"]}
ENDS = {"uncased": ["based", "naive", "steel", "都", "smith"],
        "cased": ["based", "Naïve", "Steel", "都", "Smith"]}
SPAN_PIECES = {"uncased": ["york", "-", ".", "s", "emile", "zola", "京"],
               "cased": ["York", "-", ".", "S", "Émile", "Zola", "京"]}
QUESTION_TEXT = "who is it ?"
LATE = " ".join(FILLER * 6)  # 76 words before the answer, 27 after: answered in a late window
CONTEXTS = [
    ("the firm is New York-based and old", "New York-based"),
    ("they sat in the Café   Naïve in the city", "Café   Naïve"),
    ("he ran to U.S.\tSteel and home", "U.S.\tSteel"),
    ("我住在東京都。", "東京都"),
    (f"{LATE} the cat ran to Dr.  Émile Zola-Smith in the city {' '.join(FILLER * 2)}",
     "Dr.  Émile Zola-Smith"),
    ("", ""),
]


def pointing_answerer(casing: str) -> BertQuestionAnswerer:
    """A tiny answerer (random weights, ``casing``'s vocabulary) whose best span runs from a
    STARTS piece to an ENDS piece: their embeddings spike the hidden units the span head's
    start and end read."""
    keras.utils.set_random_seed(0)
    vocabulary = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "is", "it", "?",
                   "old", "firm", "he", "to", "they", "我", "住", "在", "。"]
                  + sorted(set(FILLER)) + STARTS[casing] + ENDS[casing] + SPAN_PIECES[casing])
    preprocessor = BertPreprocessor(vocabulary=vocabulary, lower_case=casing == "uncased",
                                    seq_length=24)
    encoder = BertEncoder(vocab_size=len(vocabulary), hidden_size=32, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=64)
    model = BertQuestionAnswerer(encoder, preprocessor=preprocessor, doc_stride=6,
                                 max_query_length=8)
    table = model.encoder.word_embeddings.embeddings.numpy()
    for unit, words in enumerate((STARTS[casing], ENDS[casing])):
        for word in words:
            table[vocabulary.index(word)] = 0.0
            table[vocabulary.index(word), unit] = 3.0
    model.encoder.word_embeddings.embeddings.assign(table)
    kernel = np.zeros(model.head.dense.kernel.shape, np.float32)
    kernel[0, 0] = kernel[1, 1] = 1.0
    model.head.dense.kernel.assign(kernel)
    return model


@pytest.fixture(scope="module", params=["uncased", "cased"])
def pointing(request, tmp_path_factory):
    model = pointing_answerer(request.param)
    path = export_model(model, str(tmp_path_factory.mktemp(request.param)), "qa",
                        max_windows=0)
    return model, GraphModeModel(path)


def test_the_answer_text_is_the_contexts_own_characters_as_predict_answers_cuts_them(pointing):
    model, graph = pointing
    pairs = [(QUESTION_TEXT, context) for context, _ in CONTEXTS]
    answers, nbest, _ = model.predict_answers(pairs)
    outputs = serve(graph, pairs)
    for row, (context, expected) in enumerate(CONTEXTS):
        assert answers[str(row)] == expected, row  # what the pointing model answers
        assert outputs["answer_text"][row].decode() == expected, row
    # The long context is read as windows, and answered from a late one.
    assert len(model.make_features([SquadExample("4", *pairs[4])])) >= 10
    assert nbest["4"][0].start > 0.6 * len(CONTEXTS[4][0])
    assert outputs["answer_score"][5] == -np.inf


def test_a_context_with_invalid_utf8_answers_as_its_decoded_text(pointing):
    """Invalid bytes read as U+FFFD, as BertTokenizer decodes bytes: the answer holds one."""
    model, graph = pointing
    context = "the firm is New York-\ufffdbased and old"
    answers, _, _ = model.predict_answers([(QUESTION_TEXT, context)])
    outputs = serve(graph, [(QUESTION_TEXT, context.replace("\ufffd", "\udcff").encode(
        "utf-8", "surrogateescape"))])
    assert answers["0"] == "New York-\ufffdbased"
    assert outputs["answer_text"][0].decode() == answers["0"]
