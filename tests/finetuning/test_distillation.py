"""keras_bert.distill on tiny random BERTs: which layers a student keeps, the loss against NumPy,
the teacher run once, labelled and unlabelled texts in one call, augmented copies, every
supported head, the student as a model like any other (save, load, its record), resume, and bad
input refused in one line before anything trains."""

import json
import os
import re

import keras
import numpy as np
import pytest

from keras_bert import (BertClassifier, BertEmbedder, BertEncoder, BertMultipleChoice,
                        BertPreprocessor, BertQuestionAnswerer, BertTokenClassifier, distill,
                        save_checkpoint)
from keras_bert.tasks.squad.reader import SquadAnswer, SquadExample
from keras_bert.finetuning.distillation.augmentation import augmented_texts
from keras_bert.finetuning.distillation.comparison import compare
from keras_bert.finetuning.distillation.loss import SoftTargetLoss
from keras_bert.config import kept_layers
from keras_bert.finetuning.distillation.student import student_of
from tests.tasks.tiny_checkpoint import VOCAB

TEXTS = ["the movie was good", "a terrible film", "good", "the meal was bad and the film awful",
         "a very nice city", "the poor old dog", "john visited paris", "really awful"]
LABELS = ["pos", "neg", "pos", "neg", "pos", "neg", "pos", "neg"]


def encoder(layers=4, hidden=64, seed=0, vocab_size=len(VOCAB)):
    keras.utils.set_random_seed(seed)
    return BertEncoder(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                       num_attention_heads=4, intermediate_size=2 * hidden,
                       max_position_embeddings=64)


def preprocessor(vocabulary=VOCAB):
    return BertPreprocessor(vocabulary=vocabulary, seq_length=16)


@pytest.fixture(scope="module")
def teacher():
    """A 4-layer classifier fitted to TEXTS, its head scaled up so that its outputs differ
    from text to text and from a student's: something to learn."""
    model = BertClassifier(encoder(), 2, preprocessor=preprocessor(), label_names=["neg", "pos"])
    model.compile(learning_rate=3e-3)
    # Four epochs: with two, the teacher gave every text about the same outputs under some
    # random states (the test order moves them), and then there was nothing to learn.
    model.fit(TEXTS * 4, LABELS * 4, batch_size=8, epochs=4, seed=0, verbose=0)
    kernel, bias = model.head.dense.get_weights()
    model.head.dense.set_weights([kernel * 30, bias])
    return model


def kl(teacher_probabilities, student_probabilities):
    return float(np.mean(np.sum(teacher_probabilities * (np.log(teacher_probabilities)
                                                          - np.log(student_probabilities)), -1)))


def test_kept_layers_spread_evenly_with_the_top_one():
    assert kept_layers(12, 4) == [2, 5, 8, 11]
    assert kept_layers(12, 6) == [1, 3, 5, 7, 9, 11]
    assert kept_layers(6, 3) == [1, 3, 5]
    assert kept_layers(6, 2) == [2, 5]
    assert kept_layers(2, 1) == [1]
    for bad in (0, 6, 7, -1, True, 2.0):
        with pytest.raises(ValueError, match="num_layers must be between 1 and 5"):
            kept_layers(6, bad)


def test_a_student_starts_from_the_teachers_embeddings_kept_layers_and_head(teacher):
    student = student_of(teacher, num_layers=2)
    assert type(student) is BertClassifier
    assert student.encoder.bert_config.num_hidden_layers == 2
    assert student.label_names == teacher.label_names and student.activation == "softmax"
    blocks, teacher_blocks = student.encoder.transformer_layers, teacher.encoder.transformer_layers
    for ours, theirs in ((student.encoder.embeddings, teacher.encoder.embeddings),
                         (blocks[0], teacher_blocks[1]), (blocks[1], teacher_blocks[3]),
                         (student.encoder.pooler, teacher.encoder.pooler),
                         (student.head, teacher.head)):
        for a, b in zip(ours.get_weights(), theirs.get_weights(), strict=True):
            np.testing.assert_array_equal(a, b)
    assert student.distillation == {"teacher": teacher.name, "teacher_layers": 4,
                                    "kept_layers": [1, 3]}
    # The student's vocabulary is the teacher's: same ids for the same text.
    np.testing.assert_array_equal(student.preprocessor(["a good film"])["input_word_ids"],
                                  teacher.preprocessor(["a good film"])["input_word_ids"])


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_soft_target_loss_equals_numpy_for_labelled_and_unlabelled_rows():
    rng = np.random.default_rng(0)
    teacher_logits, student_logits = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    labels = np.eye(3)[[0, 2, 1, 0]]
    labelled = np.array([1.0, 0.0, 1.0, 0.0])
    t, w = 2.0, 0.3
    p_t, p_s = _softmax(teacher_logits / t), _softmax(student_logits / t)
    soft = t * t * np.sum(p_t * (np.log(p_t) - np.log(p_s)), -1)
    hard = -np.sum(labels * np.log(_softmax(student_logits)), -1)
    expected = np.mean((1 - w * labelled) * soft + w * labelled * hard)
    y_true = np.concatenate([_softmax(teacher_logits), labels, labelled[:, None],
                             np.ones((4, 1))], -1)  # teacher, label, labelled, scored
    for kind, ours, theirs in (("softmax", _softmax(student_logits), _softmax(teacher_logits)),
                               ("logits", student_logits, teacher_logits)):
        y = y_true.copy()
        y[:, :3] = theirs
        loss = SoftTargetLoss(kind, t, w)(y.astype("float32"), ours.astype("float32"))
        np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    # Regression: squared errors to the teacher's score and to the label.
    scores = np.array([[0.5], [1.0]]), np.array([[0.0], [3.0]])
    y = np.array([[1.0, 2.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]], "float32")
    loss = SoftTargetLoss("score", t, w)(y, scores[0].astype("float32"))
    np.testing.assert_allclose(float(loss), ((1 - w) * 0.25 + w * 2.25 + 1.0) / 2, rtol=1e-6)


def test_sigmoid_soft_targets_are_per_class_bernoulli_kl():
    rng = np.random.default_rng(1)
    teacher_logits, student_logits = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    sigmoid = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    t = 3.0
    p, q = sigmoid(teacher_logits / t), sigmoid(student_logits / t)
    soft = t * t * np.mean(p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q)), -1)
    y = np.concatenate([sigmoid(teacher_logits), np.zeros((3, 4)), np.zeros((3, 1)),
                        np.ones((3, 1))], -1)
    loss = SoftTargetLoss("sigmoid", t, 0.5)(y.astype("float32"),
                                             sigmoid(student_logits).astype("float32"))
    np.testing.assert_allclose(float(loss), np.mean(soft), rtol=1e-4)


def test_distill_runs_the_teacher_once_and_the_student_learns_its_outputs(teacher, monkeypatch):
    calls = []
    predict = teacher.predict
    monkeypatch.setattr(teacher, "predict", lambda *a, **k: calls.append(1) or predict(*a, **k))
    keras.utils.set_random_seed(0)  # dropout's masks: the same whatever ran before
    before = student_of(teacher, num_layers=1)
    student = distill(teacher, TEXTS * 4, None, num_layers=1, epochs=6, batch_size=8,
                      learning_rate=3e-3, seed=0, verbose=0)
    assert len(calls) == 1  # the teacher's outputs are computed once, not once per epoch
    monkeypatch.undo()
    target = teacher.predict(TEXTS, verbose=0)
    assert kl(target, student.predict(TEXTS, verbose=0)) < 0.5 * kl(
        target, before.predict(TEXTS, verbose=0))
    assert student.distillation == {"teacher": teacher.name, "teacher_layers": 4,
                                    "kept_layers": [3], "temperature": 2.0,
                                    "label_weight": 0.5, "augment": 0}
    # Compiled with the task's own loss again: evaluate on labels as any classifier.
    scores = student.evaluate(TEXTS, LABELS, verbose=0, return_dict=True)
    assert set(scores) == {"loss", "accuracy"}


@pytest.fixture(scope="module")
def mixed_student(teacher):
    """A 2-layer student of TEXTS twice, every third one unlabelled, scored on TEXTS."""
    labels = [label if i % 3 else None for i, label in enumerate(LABELS * 2)]
    return distill(teacher, TEXTS * 2, labels, num_layers=2, epochs=1, batch_size=8, seed=0,
                   validation_data=(TEXTS, LABELS), verbose=0)


def test_labelled_and_unlabelled_texts_mix_and_dev_scores_sit_beside_the_teachers(
        teacher, mixed_student):
    scores = mixed_student.dev_scores
    assert set(scores) == {"teacher", "student", "majority"}
    assert scores["majority"]["accuracy"] == 0.5
    teacher_accuracy = np.mean(np.array(teacher.predict_labels(TEXTS)) == np.array(LABELS))
    assert scores["teacher"]["accuracy"] == pytest.approx(teacher_accuracy)
    assert 0.0 <= scores["student"]["agreement"] <= 1.0


def test_the_student_saves_loads_and_converts_like_any_model(mixed_student, tmp_path):
    student = mixed_student
    save_checkpoint(student, tmp_path / "keras")
    loaded = BertClassifier.from_pretrained(tmp_path / "keras")
    assert loaded.distillation == student.distillation
    np.testing.assert_allclose(loaded.predict(TEXTS, verbose=0), student.predict(TEXTS, verbose=0),
                               atol=1e-6)
    save_checkpoint(student, tmp_path / "hf", "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["num_hidden_layers"] == 2
    assert config["id2label"] == {"0": "neg", "1": "pos"}


def test_a_multi_label_teacher():
    multi = BertClassifier(encoder(layers=2), 3, preprocessor=preprocessor(),
                           activation="sigmoid", label_names=["a", "b", "c"])
    student = distill(multi, TEXTS, [["a"], ["b", "c"], None, [], ["c"], ["a", "b"], None, ["b"]],
                      num_layers=1, epochs=1, batch_size=4, seed=0, verbose=0)
    assert student.is_multi_label and student.label_names == ["a", "b", "c"]


def test_a_regression_teacher():
    regression = BertClassifier(encoder(layers=2), 1, preprocessor=preprocessor())
    student = distill(regression, TEXTS, [0.5, None, 1.0, 2.0, None, 0.0, 1.5, 3.0],
                      num_layers=1, epochs=1, batch_size=4, seed=0, verbose=0,
                      validation_data=(TEXTS, [0.5, 1, 1, 2, 0, 0, 1.5, 3]))
    assert student.is_regression and set(student.dev_scores["student"]) >= {"mse"}


def test_a_multiple_choice_teacher():
    choice = BertMultipleChoice(encoder(layers=2), 2, preprocessor=preprocessor())
    examples = [("the movie was", ["good", "a city"]), ("john visited", ["paris", "good"])] * 2
    student = distill(choice, examples, [0, 0, None, 0], num_layers=1, epochs=1, batch_size=2,
                      seed=0, verbose=0)
    assert type(student) is BertMultipleChoice and student.num_choices == 2
    assert student.predict(examples, verbose=0).shape == (4, 2)


def test_a_checkpoint_student_with_the_teachers_vocabulary(teacher, tmp_path):
    narrow = BertClassifier(encoder(layers=1, hidden=32), 2, preprocessor=preprocessor())
    save_checkpoint(narrow, tmp_path / "narrow")
    student = distill(teacher, TEXTS, LABELS, student=str(tmp_path / "narrow"), epochs=1,
                      batch_size=8, seed=0, verbose=0)
    assert student.encoder.bert_config.hidden_size == 32
    assert student.label_names == ["neg", "pos"]
    other = BertClassifier(encoder(layers=1, hidden=32), 2,
                           preprocessor=preprocessor(VOCAB[:-1] + ["zzz"]))
    with pytest.raises(ValueError, match="another vocabulary than the teacher"):
        distill(teacher, TEXTS, LABELS, student=other, epochs=1, verbose=0)


def test_resumes_after_a_crash_with_backup_and_restore(teacher, tmp_path):
    epochs_run = []

    class Crash(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            epochs_run.append(epoch)
            if epoch == 1 and len(epochs_run) == 2:
                raise RuntimeError("killed")
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    with pytest.raises(RuntimeError, match="killed"):
        distill(teacher, TEXTS, LABELS, num_layers=1, epochs=3, batch_size=4, seed=0,
                verbose=0, callbacks=[backup, Crash()])
    distill(teacher, TEXTS, LABELS, num_layers=1, epochs=3, batch_size=4, seed=0, verbose=0,
            callbacks=[keras.callbacks.BackupAndRestore(str(tmp_path / "backup")), Crash()])
    assert epochs_run == [0, 1, 1, 2]  # the second run starts at the epoch that crashed


@pytest.mark.parametrize("call, message", [
    (lambda t: distill(t.encoder, TEXTS, num_layers=1), "has no head to distil"),
    (lambda t: distill(t, TEXTS, num_layers=0), "num_layers must be between 1 and 3"),
    (lambda t: distill(t, TEXTS, num_layers=4), "num_layers must be between 1 and 3"),
    (lambda t: distill(t, TEXTS), "num_layers= .* or student="),
    (lambda t: distill(t, TEXTS, ["pos"] * 7 + ["maybe"], num_layers=1), "maybe"),
    (lambda t: distill(t, [], num_layers=1), "no texts"),
    (lambda t: distill(t, TEXTS, LABELS[:3], num_layers=1), "8 texts but 3 labels"),
    (lambda t: distill(t, TEXTS, num_layers=1, temperature=0), "temperature must be positive"),
    (lambda t: distill(t, TEXTS, num_layers=1, augment=-1), "augment must be a whole number"),
    (lambda t: distill(t, TEXTS, num_layers=1, augment=1.5), "augment must be a whole number"),
    (lambda t: distill(t, TEXTS, LABELS[:3], num_layers=1, augment=1), "8 texts but 3 labels"),
    (lambda t: distill(t, TEXTS[:7] + [["a", "list"]], num_layers=1, augment=1),
     r"texts\[7\] is a list"),
    (lambda t: distill(t, TEXTS, num_layers=1, augment=1, text_pairs=TEXTS[:2]),
     "got 8 texts but 2 text_pairs"),
])
def test_bad_input_is_refused_in_one_line_before_training(teacher, call, message):
    with pytest.raises(ValueError, match=message) as error:
        call(teacher)
    assert "\n" not in str(error.value)


def test_augmented_texts_drop_words_keep_ngrams_and_repeat_for_a_seed():
    texts = ["what is the capital city of peru and of chile ?", "who wrote hamlet ?", "why"]
    copies, pairs = augmented_texts(texts, 40, seed=3)
    assert len(copies) == 120 and pairs is None
    assert augmented_texts(texts, 40, seed=3)[0] == copies  # a resumed run trains on the same
    assert augmented_texts(texts, 40, seed=4)[0] != copies
    long = [copy.split() for copy in copies[0::3]]
    words = texts[0].split()
    for copy in long:  # words dropped or an n-gram kept: an ordered subsequence, never empty
        assert copy and all(w in words for w in copy)
        positions = [words.index(w) for w in copy if words.count(w) == 1]
        assert positions == sorted(positions)
    lengths = [len(copy) for copy in long]
    assert min(lengths) <= 5 and max(lengths) > 5  # some n-grams of at most 5, some whole
    assert sum(len(c) for c in long) < 40 * len(words) * 0.95  # about a tenth of words dropped
    assert set(copies[2::3]) == {"why"}  # one word is kept
    # A pair's two texts change independently, each from its own text.
    firsts, seconds = augmented_texts(["a b c d e f g"] * 2, 5, 0, ["h i j k l m n"] * 2)
    assert len(firsts) == len(seconds) == 10
    assert all(set(f.split()) <= set("abcdefg") and set(s.split()) <= set("hijklmn")
               for f, s in zip(firsts, seconds))
    assert augmented_texts(texts, 0) == ([], None)
    assert augmented_texts(texts, 2, seed=np.int64(3)) == augmented_texts(texts, 2, seed=3)


def test_augment_adds_copies_the_teacher_labels_once(teacher, monkeypatch):
    seen = []
    predict = teacher.predict
    monkeypatch.setattr(teacher, "predict",
                        lambda rows, *a, **k: seen.append(len(rows)) or predict(rows, *a, **k))
    student = distill(teacher, TEXTS, LABELS, num_layers=1, epochs=1, batch_size=8, seed=0,
                      augment=2, verbose=0)
    assert seen == [3 * len(TEXTS)]  # the texts and two copies of each, in one predict
    assert student.distillation["augment"] == 2


def test_labels_may_be_an_array_and_copies_that_barely_change_are_named(teacher, caplog):
    words = ["今天天气很好", "这部电影很糟糕", "我喜欢这个城市", "服务太差了"] * 2
    logger = "keras_bert.finetuning.distillation.augmentation"
    with caplog.at_level("WARNING", logger=logger):
        student = distill(teacher, TEXTS + words, np.array(LABELS + [None] * 8, dtype=object),
                          num_layers=1, epochs=1, batch_size=8, seed=np.int64(0), augment=1,
                          validation_data=(TEXTS, np.array(LABELS)), verbose=0)
    assert student.dev_scores["teacher"]["accuracy"] > 0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(re.search(r"augment=1: (9|1[0-6]) of the 16 copies equal their text", w)
               and "Chinese" in w for w in warnings), warnings


def test_augment_is_for_text_classifiers():
    tagger = BertTokenClassifier(encoder(layers=2), ["O", "B-PER"], preprocessor=preprocessor())
    with pytest.raises(ValueError, match="augment= changes raw texts, for text classifiers; a "
                                         "BertTokenClassifier's labels"):
        distill(tagger, [["john", "visited"]], [["B-PER", "O"]], num_layers=1, augment=1)


def test_a_tagger_learns_its_teachers_tags_on_first_pieces_only():
    teacher = BertTokenClassifier(encoder(layers=2), ["O", "B-PER", "B-LOC"],
                                  preprocessor=preprocessor())
    sentences = [["john", "visited", "paris"], ["mary", "lives", "in", "london"],
                 ["the", "dog", "sat"]] * 2
    tags = [["B-PER", "O", "B-LOC"], None, ["O", "O", "O"]] * 2
    rows, y, labelled, scored = teacher.distillation_rows(sentences, tags)
    # scored: each word's first piece, as fit aligns tags; labelled: those of tagged sentences
    assert scored[0].sum() == 3 and scored[1].sum() == 4
    assert labelled[0].sum() == 3 and labelled[1].sum() == 0
    assert (labelled <= scored).all()
    student = distill(teacher, sentences, tags, num_layers=1, epochs=2, batch_size=2, seed=0,
                      learning_rate=3e-3, validation_data=(sentences[:3], [["B-PER", "O", "B-LOC"],
                                                       ["B-PER", "O", "O", "B-LOC"],
                                                       ["O", "O", "O"]]),
                      verbose=0)
    assert type(student) is BertTokenClassifier and student.label_names == teacher.label_names
    assert len(student.predict_tags([["john", "visited", "paris"]])[0]) == 3
    assert set(student.dev_scores["student"]) == {"accuracy", "agreement", "texts_per_s"}


def test_a_span_head_learns_start_and_end_distributions():
    teacher = BertQuestionAnswerer(encoder(layers=2), max_query_length=8,
                                   preprocessor=BertPreprocessor(vocabulary=VOCAB, seq_length=32))
    context = "john visited paris in the city of london"
    examples = [SquadExample("a", "who visited paris", context, answers=(SquadAnswer("john", 0),)),
                SquadExample("b", "where is the city", context)]  # no answer: unlabelled
    rows, y, labelled, _ = teacher.distillation_rows(examples)
    assert labelled.tolist() == [True, False] and set(y) == {"start_logits", "end_logits"}
    student = distill(teacher, examples * 2, num_layers=1, epochs=1, batch_size=2, seed=0,
                      verbose=0)
    answers, _, _ = student.predict_answers([("who visited paris", context)])
    assert isinstance(answers["0"], str)
    with pytest.raises(ValueError, match="labels are its SquadExamples' answers"):
        distill(teacher, examples, ["john", None], num_layers=1)


def test_a_task_it_cannot_distil_is_named():
    embedder = BertEmbedder(encoder(layers=2), preprocessor=preprocessor())
    with pytest.raises(ValueError, match="cannot distil a BertEmbedder"):
        distill(embedder, ["john lives"], num_layers=1)


def test_compare_reports_accuracy_agreement_and_the_majority_rate(teacher):
    student = student_of(teacher, num_layers=2)
    scores = compare(teacher, student, TEXTS, LABELS[:7] + ["pos"])
    assert scores["majority"]["accuracy"] == 5 / 8
    assert all(scores[name]["texts_per_s"] > 0 for name in ("teacher", "student"))


MIRRORED = """
import json, keras
from keras_bert.distribute import use_logical_cpu_devices
use_logical_cpu_devices(2)
import tensorflow as tf
from keras_bert import BertClassifier, BertEncoder, BertPreprocessor, distill
from tests.tasks.tiny_checkpoint import VOCAB
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    encoder = BertEncoder(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    teacher = BertClassifier(encoder, 2, preprocessor=BertPreprocessor(vocabulary=VOCAB,
                                                                       seq_length=16))
texts = ["the movie was good", "a terrible film", "good", "really awful"] * 4
history = []
student = distill(teacher, texts, [1, 0, 1, 0] * 4, num_layers=1, epochs=2, batch_size=8,
                  seed=0, verbose=0,
                  callbacks=[keras.callbacks.LambdaCallback(
                      on_epoch_end=lambda epoch, logs: history.append(logs["loss"]))])
print(json.dumps({"strategy": type(student.distribute_strategy).__name__,
                  "replicas": student.distribute_strategy.num_replicas_in_sync,
                  "losses": history, "shape": list(student.predict(texts[:2], verbose=0).shape)}))
"""


@pytest.mark.slow
def test_distils_under_mirrored_strategy_on_two_cpu_devices():
    """A multi-device CPU run stands in for GPUs and TPUs: the student is built under the
    teacher's strategy and trains with its replicas."""
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, "-c", MIRRORED], cwd=repo, capture_output=True,
                            text=True, timeout=600,
                            env=dict(os.environ, PYTHONPATH=repo, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["strategy"] == "MirroredStrategy" and report["replicas"] == 2
    assert len(report["losses"]) == 2 and all(np.isfinite(report["losses"]))
    assert report["shape"] == [2, 2]
