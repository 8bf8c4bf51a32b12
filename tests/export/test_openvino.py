"""OpenVINO exports (``export_model(..., format="openvino")``): the version directory holds
OpenVINO Model Server's model.xml and model.bin, the IR takes raw text with the SavedModel's
input and output names, float32 gives the Keras model's outputs, int8 (NNCF) stays close, and
the tokenizer inside gives our Python tokenizer's ids on random text. Every task's IR answers
as its SavedModel's serving_default, long texts included: a classifier's, a tagger's and a
question answerer's windows, cut as the SavedModel cuts them (a context's pieces with their
bytes, a tagger's windows of whole words). Skipped where the ``openvino`` extra is not
installed."""

import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings, strategies as st

pytest.importorskip("openvino")
pytest.importorskip("openvino_tokenizers")
pytest.importorskip("nncf")

import openvino as ov  # noqa: E402

from keras_bert import (BertClassifier, BertEmbedder, BertEncoder,  # noqa: E402
                        BertMultipleChoice, BertTokenClassifier)
from keras_bert.export import export_model  # noqa: E402
from keras_bert.export.openvino_answers import context_pieces  # noqa: E402
from keras_bert.export.openvino_tagger import word_windows_tokenizer  # noqa: E402
from keras_bert.export.openvino_tokenizer import (UNEQUAL_ROWS_NODE,  # noqa: E402
                                                  max_windows_node_name, tokenizer_model)
from keras_bert.export.signatures import (TEXT_SIGNATURE, build_signatures,  # noqa: E402
                                          logits_model)
from keras_bert.tasks.ner.alignment import window_word_ranges  # noqa: E402
from keras_bert.tokenization import BertPreprocessor, BertTokenizer  # noqa: E402
from keras_bert.tokenization.graph_normalizer import build_tables  # noqa: E402
from keras_bert.tokenization.preprocessor import trim_to_longest  # noqa: E402
from keras_bert.tokenization.tokenizer_layer import BertTokenizerLayer  # noqa: E402
from tests.export.test_long_contexts import (CONTEXTS, LATE, QUESTION_TEXT,  # noqa: E402
                                             pointing_answerer)
from tests.tokenization.test_properties import TRICKY  # noqa: E402

SEQ_LENGTH = 32
LABELS = ["negative", "neutral", "positive"]
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "I loved this film; the acting was superb!",
    "Terrible service, cold food and a rude waiter.",
    "Héllo, wörld! Ünïcode and CJK 中文 côte d'Ivoire",
    "short",
    "",
    "Prices rose 3.5% in March, the fastest rise since 2008.",
    "Is this the right way to the station?",
    "A very long sentence that goes on and on, well past the packed length of thirty-two "
    "word pieces, so that the tokenizer inside the model has to cut it exactly where ours does.",
    "naïve café owners' résumés",
]
CALIBRATION_TEXTS = SENTENCES * 3 + [s.upper() for s in SENTENCES]
# The bound int8 (NNCF, per-tensor activations) keeps on this tiny random model's
# probabilities; the argmax agrees on at least 8 of the 10 sentences.
INT8_PROBABILITY_BOUND = 0.05


def compiled(version_dir: str):
    return ov.Core().compile_model(os.path.join(version_dir, "model.xml"), "CPU",
                                   {"INFERENCE_PRECISION_HINT": "f32"})


def run(model, **texts) -> dict:
    request = {name: np.array([t.encode("utf-8") for t in values], dtype=np.bytes_)
               for name, values in texts.items()}
    return {port.get_any_name(): value for port, value in model(request).items()}


@pytest.fixture(scope="module")
def preprocessor(minilm_dir):
    return BertPreprocessor.from_pretrained(minilm_dir, seq_length=SEQ_LENGTH)


def tiny_encoder(vocab_size: int) -> BertEncoder:
    return BertEncoder(vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=128,
                       max_position_embeddings=64)


@pytest.fixture(scope="module")
def classifier(preprocessor):
    keras.utils.set_random_seed(7)
    model = BertClassifier(tiny_encoder(len(preprocessor.vocabulary)), 3,
                           preprocessor=preprocessor, label_names=LABELS)
    # Large logits, centred on these sentences: they get different classes, and int8's error
    # is measured where it could change an answer.
    head = model.get_layer("classifier")
    kernel, bias = head.get_weights()
    head.set_weights([np.random.default_rng(0).normal(0, 20, kernel.shape).astype("float32"),
                      bias])
    logits = logits_model(model)(preprocessor(tf.constant(SENTENCES)), training=False)
    head.set_weights([head.get_weights()[0], bias - np.mean(logits, axis=0)])
    return model


@pytest.fixture(scope="module")
def exports(classifier, preprocessor, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("openvino_exports"))
    keras.utils.set_random_seed(8)
    embedder = BertEmbedder(tiny_encoder(len(preprocessor.vocabulary)),
                            preprocessor=preprocessor)
    float32 = export_model(classifier, base, "classifier", format="openvino")
    # int8 without calibration_texts: calibrated on the texts the model keeps, as fit,
    # finetune and distill leave them (explicit texts: the question answerer's int8 below).
    classifier.calibration_texts = CALIBRATION_TEXTS
    try:
        int8 = export_model(classifier, base, "classifier", format="openvino", quantize="int8")
    finally:
        classifier.calibration_texts = None
    paths = {"float32": float32, "int8": int8,
             "embedding": export_model(embedder, base, "embedder", format="openvino")}
    return {"base": base, "embedder": embedder, **paths,
            "compiled": {key: compiled(path) for key, path in paths.items()}}


def test_version_directories_are_openvino_model_servers_layout(exports):
    assert exports["float32"] == os.path.join(exports["base"], "classifier", "1")
    assert exports["int8"] == os.path.join(exports["base"], "classifier", "2")
    for key in ("float32", "int8", "embedding"):
        assert sorted(os.listdir(exports[key])) == ["model.bin", "model.xml"]
    # int8 weights: about a quarter of float32's (the embeddings stay float32)
    assert (os.path.getsize(os.path.join(exports["int8"], "model.bin"))
            < 0.9 * os.path.getsize(os.path.join(exports["float32"], "model.bin")))


def test_inputs_and_outputs_are_the_saved_models_serving_default(exports, classifier,
                                                                 preprocessor):
    for key, model in (("float32", classifier), ("embedding", exports["embedder"])):
        ir = ov.Core().read_model(os.path.join(exports[key], "model.xml"))
        saved = build_signatures(model, preprocessor)[TEXT_SIGNATURE].get_concrete_function()
        assert [port.get_any_name() for port in ir.inputs] == ["text"]
        assert ir.inputs[0].get_element_type() == ov.Type.string
        assert sorted(port.get_any_name() for port in ir.outputs) == sorted(
            saved.structured_outputs)


def test_the_ir_is_in_the_forms_openvino_fuses(exports):
    # Each LayerNorm is one MVN (embeddings + 2 per layer: 5): not Keras' formula (reductions
    # and elementwise kernels), nor the Session's FusedBatchNormV3 form (an MVN over a reshaped
    # [1, rows, H, 1] tensor). And no reshape to [batch * seq, hidden] rows (TensorFlow's form),
    # which would stand between each MVN and the int8 quantization NNCF puts after it.
    for key in ("float32", "int8"):
        ir = ov.Core().read_model(os.path.join(exports[key], "model.xml"))
        types = [op.get_type_name() for op in ir.get_ops()]
        assert types.count("MVN") == 5, key
        assert not {"SquaredDifference", "BatchNormInference"} & set(types), key
        to_rows = [op.get_friendly_name() for op in ir.get_ops() if op.get_type_name() ==
                   "Reshape" and op.get_output_partial_shape(0).rank.get_length() == 2
                   and str(op.get_output_partial_shape(0)[1]) in ("64", "128")]  # hidden, FFN
        assert to_rows == [], key


def test_float32_gives_the_keras_models_outputs(exports, classifier):
    got = run(exports["compiled"]["float32"], text=SENTENCES)
    want = classifier.predict(SENTENCES, verbose=0)  # a long text read as windows, as here
    np.testing.assert_allclose(got["probabilities"], want, atol=1e-5)
    assert len(set(got["class_ids"].tolist())) > 1, "every sentence got the same class"
    np.testing.assert_array_equal(got["class_ids"], want.argmax(-1))
    assert got["class_names"].tolist() == [LABELS[i] for i in want.argmax(-1)]


def test_a_long_text_is_read_as_windows_one_answer_each(exports, classifier, preprocessor):
    """The IR's tokenizer cuts a text into the windows predict reads (stride and all), and the
    text's answer combines them; a 3,000-word text is one row too."""
    long_text = " ".join(SENTENCES) * 3
    words = " ".join([SENTENCES[1]] * 330)  # ~3,000 words
    texts = [long_text, SENTENCES[4], words]
    for key, bound in (("float32", 1e-5), ("int8", INT8_PROBABILITY_BOUND)):
        got = run(exports["compiled"][key], text=texts)
        assert got["probabilities"].shape == (3, 3)
        want = classifier.predict(texts, verbose=0)
        np.testing.assert_allclose(got["probabilities"], want, atol=bound)
    classifier.set_windows("first")
    try:
        first = classifier.predict([long_text], verbose=0)
    finally:
        classifier.set_windows("mean")
    assert np.abs(first[0] - got["probabilities"][0]).max() > 1e-3, "read as its first window"


def test_a_text_beyond_max_windows_fails_the_request_naming_the_limit(classifier, exports,
                                                                       tmp_path):
    path = export_model(classifier, str(tmp_path), "capped", format="openvino", max_windows=2)
    model = compiled(path)
    # Windows of 30 WordPieces, 15 apart: 39 pieces are two windows, 50 three.
    three_windows = SENTENCES[8] + " " + SENTENCES[0]
    with pytest.raises(RuntimeError, match="a_text_is_longer_than_max_windows_2"):
        run(model, text=[SENTENCES[0], three_windows])
    two_windows = SENTENCES[8]
    got = run(model, text=[two_windows, SENTENCES[0]])  # the model runs on as before
    np.testing.assert_allclose(got["probabilities"],
                               classifier.predict([two_windows, SENTENCES[0]], verbose=0),
                               atol=1e-5)
    with pytest.raises(ValueError, match="reads every text as one window"):
        export_model(exports["embedder"], str(tmp_path), "embedder", format="openvino",
                     max_windows=4)
    assert not os.path.exists(tmp_path / "embedder")


def test_a_pair_ir_reads_a_long_second_text_as_windows_as_predict(classifier, tmp_path,
                                                                   caplog):
    first, second = SENTENCES[:4], [SENTENCES[8]] * 2 + SENTENCES[4:6]  # long and short pairs
    with caplog.at_level(logging.WARNING, logger="keras_bert.export.openvino"):
        path = export_model(classifier, str(tmp_path), "nli", format="openvino", text_pair=True)
    assert "reads" not in caplog.text  # nothing read otherwise than predict reads it
    got = run(compiled(path), text=first, text_pair=second)
    pairs = list(zip(first, second))
    want = classifier.predict(pairs, verbose=0)
    np.testing.assert_allclose(got["probabilities"], want, atol=1e-5)
    classifier.set_windows("first")  # Google's cut: the long pairs answer otherwise
    try:
        cut = classifier.predict(pairs[:2], verbose=0)
    finally:
        classifier.set_windows("mean")
    assert not np.allclose(want[:2], cut, atol=1e-4)


@pytest.mark.parametrize("pairs", [False, True], ids=["texts", "pairs"])
@pytest.mark.parametrize("stride", [None, 4], ids=["default_stride", "stride_4"])
def test_the_tokenizer_cuts_predicts_windows(preprocessor, pairs, stride):
    """The IR's windows are pack_windows' (the rows, in order, and each one's text), however
    long the texts, with the default stride or a given one, single texts and pairs."""
    from keras_bert.tasks.classification.windows import pack_windows
    texts = SENTENCES + [" ".join(SENTENCES)]
    seconds = list(reversed(texts)) if pairs else None
    model = ov.Core().compile_model(tokenizer_model(
        list(preprocessor.vocabulary), True, SEQ_LENGTH, pairs, windows=True,
        window_stride=stride), "CPU")
    inputs = {"text": texts, **({"text_pair": seconds} if pairs else {})}
    got = run(model, **inputs)
    packed, text_index = pack_windows(preprocessor, tf.constant(texts), stride,
                                      text_pairs=tf.constant(seconds) if pairs else None)
    want = trim_to_longest(packed, 1)
    np.testing.assert_array_equal(got["text_index"], text_index.numpy())
    assert len(set(got["text_index"].tolist())) == len(texts) < len(got["text_index"])
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(got[name], want[name].numpy(), name)


def test_float32_embedder_gives_the_keras_models_embeddings(exports):
    got = run(exports["compiled"]["embedding"], text=SENTENCES)["embedding"]
    want = exports["embedder"].predict(SENTENCES, verbose=0)
    want = want["embedding"] if isinstance(want, dict) else want
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_int8_stays_within_its_bound(exports):
    float32 = run(exports["compiled"]["float32"], text=SENTENCES)
    int8 = run(exports["compiled"]["int8"], text=SENTENCES)
    assert np.abs(int8["probabilities"] - float32["probabilities"]).max() < \
        INT8_PROBABILITY_BOUND
    assert (int8["class_ids"] == float32["class_ids"]).sum() >= 8


def assert_tagged_as(got: dict, want: dict, labels) -> None:
    """The IR's tagger outputs are the SavedModel's at every text position: the IR pads to
    the longest text, the SavedModel to a multiple of 8."""
    assert sorted(got) == sorted(want)
    width = got["input_mask"].shape[1]
    assert not want["input_mask"][:, width:].any()
    text = got["input_mask"] > 0
    np.testing.assert_array_equal(got["input_mask"], want["input_mask"][:, :width])
    np.testing.assert_allclose(got["probabilities"][text],
                               want["probabilities"][:, :width][text], atol=1e-5)
    for name in ("label_ids", "word_starts"):
        np.testing.assert_array_equal(got[name][text], want[name][:, :width][text], name)
    for name in ("tokens", "labels"):  # strings everywhere, "" at padding
        decoded = np.vectorize(lambda b: b.decode("utf-8"), otypes=[str])(want[name])
        np.testing.assert_array_equal(got[name], decoded[:, :width], name)
    assert set(got["labels"][got["word_starts"]].tolist()) <= set(labels)


def test_a_tagger_gives_the_saved_models_tokens_tags_and_probabilities(preprocessor, tmp_path):
    keras.utils.set_random_seed(7)
    labels = ["O", "B-PER", "I-PER"]
    tagger = BertTokenClassifier(tiny_encoder(len(preprocessor.vocabulary)), labels,
                                 preprocessor=preprocessor)
    path = export_model(tagger, str(tmp_path), "tagger", format="openvino")
    got = run(compiled(path), text=SENTENCES)
    want = {name: value.numpy() for name, value in build_signatures(tagger, preprocessor)[
        TEXT_SIGNATURE](text=tf.constant(SENTENCES)).items()}
    assert_tagged_as(got, want, labels)
    assert got["input_mask"].shape[1] > SEQ_LENGTH  # the long sentence: every piece tagged
    assert got["tokens"][SENTENCES.index("naïve café owners' résumés"), :3].tolist() == [
        "[CLS]", "naive", "cafe"]


@pytest.fixture(scope="module")
def long_tagger(tmp_path_factory):
    """(a tagger of windows of 8 WordPieces, stride 3, its compiled IR with max_windows=5)."""
    from tests.export.test_long_tagging import SEQ_LENGTH as WINDOW_LENGTH
    from tests.tasks.tiny_checkpoint import VOCAB, tiny_encoder as tiny_vocab_encoder
    keras.utils.set_random_seed(3)
    tagger = BertTokenClassifier(
        tiny_vocab_encoder(), ["O", "B-PER", "I-PER", "B-LOC"], window_stride=3,
        preprocessor=BertPreprocessor(vocabulary=VOCAB, seq_length=WINDOW_LENGTH))
    path = export_model(tagger, str(tmp_path_factory.mktemp("tagger")), "ner",
                        format="openvino", max_windows=5)
    return tagger, compiled(path)


def test_a_tagger_reads_long_texts_as_its_saved_model(long_tagger):
    """Windows of whole words, each word from the window where it has the most context, one
    row per text (five windows, one, an empty text's, five), as serving_default reads them;
    beyond max_windows the request fails naming the limit, and the next is answered."""
    from tests.export.test_long_tagging import TEXTS as LONG_TEXTS
    tagger, ir = long_tagger
    assert [len(w) for w in tagger.align_windows(LONG_TEXTS)] == [5, 1, 1, 5]
    saved = build_signatures(tagger, tagger.preprocessor)[TEXT_SIGNATURE]
    for texts in (LONG_TEXTS, LONG_TEXTS[::-1], ["", ""]):
        got = run(ir, text=texts)
        want = {name: value.numpy() for name, value in saved(text=tf.constant(texts)).items()}
        assert_tagged_as(got, want, tagger.label_names)
    with pytest.raises(RuntimeError, match=max_windows_node_name(5)):
        run(ir, text=[LONG_TEXTS[1], LONG_TEXTS[0] + " " + LONG_TEXTS[3]])
    assert run(ir, text=LONG_TEXTS[:1])["tokens"][0, 0] == "[CLS]"


def test_multiple_choice_gives_the_saved_models_choice(preprocessor, tmp_path):
    keras.utils.set_random_seed(7)
    chooser = BertMultipleChoice(tiny_encoder(len(preprocessor.vocabulary)), num_choices=3,
                                 preprocessor=preprocessor)
    kernel, bias = chooser.head.get_weights()  # large scores: the choices differ
    chooser.head.set_weights([np.random.default_rng(0).normal(0, 20, kernel.shape)
                              .astype("float32"), bias])
    texts = SENTENCES[:4]
    choices = [SENTENCES[4:7], SENTENCES[7:10], ["a", "b", "c"], SENTENCES[1:4]]
    path = export_model(chooser, str(tmp_path), "choice", format="openvino")
    ir = ov.Core().read_model(os.path.join(path, "model.xml"))
    assert [port.get_any_name() for port in ir.inputs] == ["text", "choices"]
    got = compiled(path)({"text": np.array([t.encode() for t in texts], np.bytes_),
                          "choices": np.array([[c.encode() for c in row] for row in choices],
                                              np.bytes_)})
    got = {port.get_any_name(): value for port, value in got.items()}
    want = {name: value.numpy() for name, value in build_signatures(chooser, preprocessor)[
        TEXT_SIGNATURE](text=tf.constant(texts), choices=tf.constant(choices)).items()}
    assert sorted(got) == sorted(want) == ["choice_ids", "choice_text", "probabilities"]
    np.testing.assert_allclose(got["probabilities"], want["probabilities"], atol=1e-5)
    np.testing.assert_array_equal(got["choice_ids"], want["choice_ids"])
    assert len(set(got["choice_ids"].tolist())) > 1, "every example got the same choice"
    assert got["choice_text"].tolist() == [c.decode() for c in want["choice_text"]]


# The question answerer's IR: the tests below share one export, whose max_windows the long
# context (17 windows of 24 at doc_stride 6) fits in and CAPPED_CONTEXT (72 words more: 29
# windows) does not.
QA_MAX_WINDOWS = 20
CAPPED_CONTEXT = f"{CONTEXTS[4][0]} {LATE}"


@pytest.fixture(scope="module")
def answerer(tmp_path_factory):
    """(an uncased pointing answerer's serving_default as its SavedModel runs it, one
    tf.function the tests share, its compiled IR with max_windows=QA_MAX_WINDOWS)."""
    model = pointing_answerer("uncased")
    path = export_model(model, str(tmp_path_factory.mktemp("qa")), "qa", format="openvino",
                        max_windows=QA_MAX_WINDOWS)
    return build_signatures(model, model.preprocessor)[TEXT_SIGNATURE], compiled(path)


def test_a_question_answerer_answers_as_its_saved_model(answerer):
    """Every output of serving_default, a late window's answer and an empty context's
    included; answer_text is the context's own characters, as predict_answers cuts them
    (cased offsets: ``test_context_pieces_and_bytes_equal_the_saved_models``)."""
    saved, ir = answerer
    questions = [QUESTION_TEXT] * len(CONTEXTS)
    contexts = [context for context, _ in CONTEXTS]
    got = run(ir, text=questions, text_pair=contexts)
    want = {name: value.numpy() for name, value in saved(
        text=tf.constant(questions), text_pair=tf.constant(contexts)).items()}
    assert sorted(got) == sorted(want)
    assert got["answer_text"].tolist() == [answer for _, answer in CONTEXTS]
    assert got["answer_text"].tolist() == [answer.decode() for answer in want["answer_text"]]
    for name in ("answer_start", "answer_end"):
        np.testing.assert_array_equal(got[name], want[name], name)
    np.testing.assert_allclose(got["answer_score"], want["answer_score"], rtol=1e-5)
    assert got["answer_score"][-1] == -np.inf  # the empty context: no span
    width = got["input_mask"].shape[1]  # the chosen windows, padded to the longest
    np.testing.assert_array_equal(got["input_mask"], want["input_mask"][:, :width])
    text = got["input_mask"] > 0
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(got[name][text], want[name][:, :width][text], atol=1e-5)


def test_a_context_beyond_max_windows_fails_the_request_naming_the_limit(answerer):
    _, ir = answerer
    with pytest.raises(RuntimeError, match=max_windows_node_name(QA_MAX_WINDOWS)):
        run(ir, text=[QUESTION_TEXT] * 2, text_pair=[CONTEXTS[0][0], CAPPED_CONTEXT])
    assert run(ir, text=[QUESTION_TEXT], text_pair=[CONTEXTS[0][0]])["answer_text"].tolist() \
        == [CONTEXTS[0][1]]  # and it answers the next request


def test_questions_and_contexts_of_different_counts_fail_the_request(answerer):
    """Not a crash in a later op: the request fails naming the check, and the next is
    answered."""
    _, ir = answerer
    for questions, contexts in (([QUESTION_TEXT] * 3, [CONTEXTS[0][0]]),
                                ([QUESTION_TEXT], [CONTEXTS[0][0]] * 2)):
        with pytest.raises(RuntimeError, match=UNEQUAL_ROWS_NODE):
            run(ir, text=questions, text_pair=contexts)
    assert run(ir, text=[QUESTION_TEXT], text_pair=[CONTEXTS[0][0]])["answer_text"].tolist() \
        == [CONTEXTS[0][1]]


def test_a_context_with_invalid_utf8_answers_as_the_saved_model(answerer):
    """The answer holds the invalid byte, which OpenVINO's Python API (and so keras-bert
    serve) reads as U+FFFD, as the SavedModel writes it."""
    saved, ir = answerer
    contexts = [b"the firm is New York-\xffbased and old", b"\xff\xfe", "Café".encode()]
    request = {"text": np.array([QUESTION_TEXT.encode()] * 3, np.bytes_),
               "text_pair": np.array(contexts, np.bytes_)}
    got = {port.get_any_name(): value for port, value in ir(request).items()}
    want = saved(text=tf.constant(request["text"]), text_pair=tf.constant(contexts))
    assert got["answer_text"].tolist() == [
        answer.decode() for answer in want["answer_text"].numpy()] == [
        "New York-\ufffdbased", "", "Café"]
    np.testing.assert_array_equal(got["answer_start"], want["answer_start"])


def test_int8_question_answerer_keeps_the_answers(tmp_path):
    model = pointing_answerer("uncased")
    contexts = [context for context, _ in CONTEXTS]
    path = export_model(model, str(tmp_path), "qa", format="openvino", quantize="int8",
                        calibration_texts=contexts[:-1] * 4)
    got = run(compiled(path), text=[QUESTION_TEXT] * len(contexts), text_pair=contexts)
    assert got["answer_text"].tolist() == [answer for _, answer in CONTEXTS]


def test_int8_without_calibration_texts_and_savedmodel_options_are_refused(classifier,
                                                                           tmp_path):
    with pytest.raises(ValueError, match="needs calibration_texts"):
        export_model(classifier, str(tmp_path), "c", format="openvino", quantize="int8")
    with pytest.raises(ValueError, match="SavedModel options"):
        export_model(classifier, str(tmp_path), "c", format="openvino", mixed_precision="bf16")
    assert not os.path.exists(tmp_path / "c" / "1")


def test_int8_of_a_model_that_keeps_its_training_texts_calibrates_on_them(exports):
    """The exports' int8 IR was given no calibration_texts: the classifier's own."""
    ir = ov.Core().read_model(os.path.join(exports["int8"], "model.xml"))
    assert ir.get_rt_info(["keras_bert", "precision"]).astype(str) == "int8"
    ir = ov.Core().read_model(os.path.join(exports["float32"], "model.xml"))
    assert ir.get_rt_info(["keras_bert", "precision"]).astype(str) == "float32"


# ------------------------------------------------------------------------ the tokenizer
# NFD's reordering of two spacing marks in one run is not in the OpenVINO tokenizer (its
# docstring): texts with two of those marks are left out.
REORDERED_MARKS = {chr(code_point) for code_point, combining in
                   enumerate(build_tables(lower_case=True).combining_class) if combining}
texts = st.text(alphabet=st.sampled_from(TRICKY) | st.characters(exclude_categories=["Cs"]),
                max_size=40).filter(lambda text: sum(c in REORDERED_MARKS for c in text) < 2)
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def tokenizers(request, minilm_dir):
    """(our Python tokenizer, the preprocessor, the compiled OpenVINO tokenizer for pairs)."""
    tokenizer = BertTokenizer.from_pretrained(minilm_dir, lower_case=request.param)
    preprocessor = BertPreprocessor.from_pretrained(minilm_dir, lower_case=request.param,
                                                    seq_length=16)
    model = tokenizer_model(list(preprocessor.vocabulary), request.param, 512)
    pairs = tokenizer_model(list(preprocessor.vocabulary), request.param, 16, text_pair=True)
    core = ov.Core()
    return tokenizer, preprocessor, core.compile_model(model), core.compile_model(pairs)


@pytest.fixture(scope="module")
def packed_pairs(tokenizers):
    """The preprocessor's packing of a batch of pairs, padded to the longest, traced once."""
    _, preprocessor, _, _ = tokenizers
    return tf.function(lambda first, second: trim_to_longest(preprocessor([first, second]),
                                                             multiple_of=1),
                       input_signature=[tf.TensorSpec([None], tf.string)] * 2)


@SETTINGS
@given(batch=st.lists(texts, min_size=1, max_size=8))
def test_tokenizer_ids_equal_the_python_tokenizers(tokenizers, batch):
    tokenizer, _, model, _ = tokenizers
    got = run(model, text=batch)
    longest = 0
    for row, text in enumerate(batch):
        ids = got["input_word_ids"][row][got["input_mask"][row] > 0].tolist()
        want = tokenizer.convert_tokens_to_ids(
            ["[CLS]"] + tokenizer.tokenize(text)[:510] + ["[SEP]"])
        assert ids == want, (text, tokenizer.tokenize(text))
        longest = max(longest, len(want))
    assert got["input_word_ids"].shape == (len(batch), longest)  # padded to the longest row


@SETTINGS
@given(batch=st.lists(st.tuples(texts, texts), min_size=1, max_size=8))
def test_pairs_are_packed_and_truncated_as_the_preprocessor_packs_them(tokenizers, packed_pairs,
                                                                      batch):
    _, _, _, pairs = tokenizers
    first, second = [list(column) for column in zip(*batch)]
    got = run(pairs, text=first, text_pair=second)
    want = packed_pairs(tf.constant(first), tf.constant(second))
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value.numpy(), err_msg=name)


def test_pairs_of_different_counts_fail_the_request(tokenizers):
    _, _, _, pairs = tokenizers
    with pytest.raises(RuntimeError, match=UNEQUAL_ROWS_NODE):
        run(pairs, text=["a", "b"], text_pair=["c"])
    assert run(pairs, text=["a"], text_pair=["c"])["input_word_ids"].shape[0] == 1


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def offsets(request, minilm_dir):
    """(the SavedModel's in-graph tokenizer's tokenize_with_offsets, traced once, the compiled
    OpenVINO context_pieces)."""
    vocabulary = list(BertPreprocessor.from_pretrained(minilm_dir).vocabulary)
    text = ov.op.Parameter(ov.Type.string, ov.PartialShape([-1]))
    text.output(0).set_names({"text"})
    pieces = context_pieces(text.output(0), vocabulary, request.param)
    model = ov.Model([ov.opset15.result(node) for node in pieces], [text])
    layer = BertTokenizerLayer(vocabulary=vocabulary, lower_case=request.param)
    return (tf.function(layer.tokenize_with_offsets,
                        input_signature=[tf.TensorSpec([None], tf.string)]),
            ov.Core().compile_model(model))


@settings(SETTINGS, max_examples=50)
@given(batch=st.lists(texts, min_size=1, max_size=6))
def test_context_pieces_and_bytes_equal_the_saved_models(offsets, batch):
    tokenize_with_offsets, model = offsets
    begins, ends, ids, starts, limits, _ = model(
        {"text": np.array([t.encode("utf-8") for t in batch], np.bytes_)}).values()
    want_ids, want_starts, want_limits = tokenize_with_offsets(tf.constant(batch))
    text_start = 0
    for row, text in enumerate(batch):
        pieces = slice(begins[row], ends[row])
        assert ids[pieces].tolist() == want_ids[row].numpy().tolist(), text
        assert (starts[pieces] - text_start).tolist() == want_starts[row].numpy().tolist(), text
        assert (limits[pieces] - text_start).tolist() == want_limits[row].numpy().tolist(), text
        # NumPy's bytes arrays drop a text's trailing NULs (which the tokenizer deletes).
        text_start += len(text.encode("utf-8").rstrip(b"\0"))


@pytest.fixture(scope="module", params=[(10, 3), (12, 5), (7, 1)],
                ids=["8_stride3", "10_stride5", "5_stride1"])
def word_windows(request):
    """(seq_length, stride, the compiled word-window tokenizer of the tiny vocabulary)."""
    from tests.tasks.tiny_checkpoint import VOCAB
    seq_length, stride = request.param
    return seq_length, stride, ov.Core().compile_model(
        word_windows_tokenizer(VOCAB, True, seq_length, stride, None))


# Words of one to four pieces (long ones longer than a window), and unknown ones.
TAGGED_WORDS = ["john", "paris", "cats", "walked", "12", "1212121", "zebra", "visited"]


@settings(SETTINGS, max_examples=40)
@given(batch=st.lists(st.lists(st.sampled_from(TAGGED_WORDS), max_size=24), min_size=1,
                      max_size=4))
def test_the_tokenizer_cuts_predict_tags_windows(word_windows, batch):
    from tests.tasks.tiny_checkpoint import VOCAB
    seq_length, stride, model = word_windows
    tokenizer = BertTokenizer(vocabulary=VOCAB)
    got = run(model, text=[" ".join(words) for words in batch])
    words_before = 0
    for row, words in enumerate(batch):
        counts = [len(tokenizer.tokenize(word)) for word in words]
        want = window_word_ranges(counts, seq_length - 2, stride) if counts else [(0, 0)]
        mine = got["text_index"] == row
        assert list(zip(got["first_word"][mine] - words_before,
                        got["end_word"][mine] - words_before)) == want, words
        words_before += len(counts)


def test_hard_cases_tokenize_as_written(tmp_path):
    from tests.tokenization.hard_cases import HARD_CASES, VOCABULARY
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("".join(token + "\n" for token in VOCABULARY), encoding="utf-8")
    for lower_case, column in ((True, 2), (False, 3)):
        tokenizer = BertTokenizer(str(vocab_file), lower_case=lower_case)
        model = ov.Core().compile_model(tokenizer_model(VOCABULARY, lower_case, 512))
        for case in HARD_CASES:
            if sum(c in REORDERED_MARKS for c in case[1]) >= 2:
                continue
            got = run(model, text=[case[1]])
            ids = got["input_word_ids"][0][got["input_mask"][0] > 0][1:-1].tolist()
            assert ids == tokenizer.convert_tokens_to_ids(case[column]), case[0]
