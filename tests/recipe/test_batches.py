"""fit and evaluate group rows by length: the bucket ladder, each epoch's batches as a function of
(seed, epoch), a known number of steps, one trace of the train step, resuming at an epoch with
Keras' BackupAndRestore, and every task's inputs and labels cut with the ids."""

import keras
import numpy as np
import pytest

from keras_bert import (BertClassifier, BertEncoder, BertMultipleChoice, BertPreprocessor,
                        BertQuestionAnswerer, BertTokenClassifier)
from keras_bert.layers.task_heads import PADDING_LOGIT
from keras_bert.recipe.batches import (MIN_GROUPING_SAVING, BatchPlan, grouping_saving,
                                             length_ladder, resolve_bucket_lengths)
from keras_bert.tasks.input_examples import TaggedSentence
from keras_bert.tasks.squad.reader import SquadAnswer, SquadExample
from tests.tasks.tiny_checkpoint import VOCAB, WORDS, tiny_encoder

WIDTH = 64


def texts_of_many_lengths(count, seed=0):
    """``count`` texts of 1 to 40 words from the tiny vocabulary, and 0/1 labels."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=rng.integers(1, 41))) for _ in range(count)]
    return texts, rng.integers(0, 2, size=count)


def classifier(dropout=0.1, seq_length=WIDTH):
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=64,
                          max_position_embeddings=WIDTH, hidden_dropout_prob=dropout,
                          attention_probs_dropout_prob=dropout)
    return BertClassifier(encoder, 2, dropout=dropout,
                          preprocessor=BertPreprocessor(vocabulary=VOCAB, seq_length=seq_length))


def test_the_ladder_follows_the_length_histogram():
    rng = np.random.default_rng(0)
    lengths = np.concatenate([rng.integers(5, 30, size=900), [70, 128]])  # two long outliers
    ladder = length_ladder(lengths, width=128)
    assert len(ladder) <= 8 and all(b % 8 == 0 for b in ladder) and ladder[-1] == 128
    # Most lengths go to the short texts; the rare long ones get their own top bucket.
    assert ladder[-2] <= 72 and sum(b <= 32 for b in ladder) >= 4
    padded = np.array(ladder)[np.searchsorted(ladder, lengths)]
    fixed_ladder = np.array([16, 32, 48, 64, 128])
    fixed = fixed_ladder[np.searchsorted(fixed_ladder, lengths)]
    assert padded.sum() < fixed.sum()  # pads less than the hand-picked ladder
    assert length_ladder(np.array([3, 5]), width=6) == [6]  # a width below 8 is its own bucket
    assert length_ladder(np.array([3, 5, 17]), width=128, max_buckets=1) == [24]


def test_bucket_lengths_auto_none_or_a_list():
    lengths = np.array([3, 9, 40])
    assert resolve_bucket_lengths(None, lengths, 64) == [64]
    assert resolve_bucket_lengths("auto", lengths, 64) == [8, 16, 40]
    assert resolve_bucket_lengths([32, 16, 100], lengths, 64) == [16, 32, 64]  # 40 needs 64
    with pytest.raises(ValueError, match="bucket_lengths must be 'auto', None or positive lengths"):
        resolve_bucket_lengths("fixed", lengths, 64)


def plan_rows(plan, epoch):
    rows, padded = (t.numpy() for t in plan(epoch))
    return rows, padded


def test_each_epoch_is_a_function_of_seed_and_epoch():
    lengths = np.random.default_rng(1).integers(2, 60, size=203)
    plan = BatchPlan(lengths, batch_size=8, bucket_lengths=[16, 32, 48, 64], shuffle=True,
                     seed=7)
    assert plan.num_batches == 26  # ceil(203 / 8): every batch but one is full
    epoch0, again = plan_rows(plan, 0), plan_rows(BatchPlan(lengths, 8, [16, 32, 48, 64],
                                                            shuffle=True, seed=7), 0)
    np.testing.assert_array_equal(epoch0[0], again[0])
    epoch1 = plan_rows(plan, 1)
    assert not np.array_equal(epoch0[0], epoch1[0])
    for rows, padded in (epoch0, epoch1):
        assert sorted(rows[rows >= 0].tolist()) == list(range(203))  # every row once
        assert (rows >= 0).sum(axis=1).tolist().count(8) == 25
        longest = np.array([lengths[r[r >= 0]].max() for r in rows])
        ladder = np.array([16, 32, 48, 64])
        np.testing.assert_array_equal(padded, ladder[np.searchsorted(ladder, longest)])
    # Grouping pads far less than shuffled batches padded to their longest bucket.
    ungrouped = plan_rows(BatchPlan(lengths, 8, [16, 32, 48, 64], shuffle=True, seed=7,
                                    window_batches=1), 0)[1]
    assert epoch0[1].sum() < 0.85 * ungrouped.sum()


def test_rows_of_alike_lengths_keep_the_fixed_padding_batches():
    """Regrouping shuffled rows pays only where lengths differ enough. colab/04's generated
    SQuAD windows are 28 to 39 tokens: regrouped into buckets 32 and 40, a batch's rows were
    less random (the "Where was X born?" questions are the short ones) for 8% fewer padded
    positions, and the shrunk run's exact match was lower (72.5 once against the test's 80).
    There the batches are now the fixed-padding ones, each padded to 32 or 40."""
    rng = np.random.default_rng(0)
    alike = np.concatenate([rng.integers(28, 33, size=96), rng.integers(33, 40, size=160)])
    assert grouping_saving(alike, 16, [32, 40]) < MIN_GROUPING_SAVING
    plan = BatchPlan(alike, 16, [32, 40], shuffle=True, seed=3)
    fixed = BatchPlan(alike, 16, [40], shuffle=True, seed=3)
    for epoch in range(3):
        rows, padded = plan_rows(plan, epoch)
        np.testing.assert_array_equal(rows, plan_rows(fixed, epoch)[0])
        longest = alike[rows].max(axis=1)
        np.testing.assert_array_equal(padded, np.where(longest <= 32, 32, 40))
    # Not shuffled (evaluate), rows are ordered by bucket anyway: the order does not matter.
    assert BatchPlan(alike, 16, [32, 40], shuffle=False, seed=0).grouped
    # Lengths that differ a lot are regrouped (a third fewer padded positions here).
    spread = np.random.default_rng(1).integers(2, 60, size=203)
    assert grouping_saving(spread, 8, [16, 32, 48, 64]) == pytest.approx(0.36, abs=0.01)
    assert BatchPlan(spread, 8, [16, 32, 48, 64], shuffle=True, seed=7).grouped


def test_drop_remainder_leaves_out_other_rows_every_epoch():
    plan = BatchPlan(np.arange(1, 22), batch_size=4, bucket_lengths=[8, 24], shuffle=True,
                     seed=0, drop_remainder=True)
    assert plan.num_batches == 5
    kept = [set(plan_rows(plan, epoch)[0].reshape(-1).tolist()) for epoch in range(4)]
    assert all(len(k) == 20 and -1 not in k for k in kept)
    assert len(set.union(*kept)) == 21


def test_passes_over_the_dataset_are_epochs_0_1_2_or_a_fixed_one():
    texts, labels = texts_of_many_lengths(40)
    model = classifier()

    def passes(dataset, count):
        return [[tuple(y.numpy().tolist()) for _, y in dataset] for _ in range(count)]

    dataset = model.make_dataset(texts, labels, batch_size=8, shuffle=True, seed=3,
                                 bucket_lengths="auto")
    assert int(dataset.cardinality()) == 5
    first, second = passes(dataset, 2)
    assert first != second
    assert passes(model.make_dataset(texts, labels, batch_size=8, shuffle=True, seed=3,
                                     bucket_lengths="auto", epoch=1), 2) == [second, second]
    # Without shuffling and buckets the rows keep their order, padded to seq_length.
    x, y = next(iter(model.make_dataset(texts, labels, batch_size=40)))
    assert x["input_word_ids"].shape == (40, WIDTH) and y.numpy().tolist() == labels.tolist()


@pytest.fixture(scope="module")
def fitted():
    """A classifier compiled and fitted for 2 epochs on 90 texts of many lengths, counting the
    traces of its train step; and what test_fit_traces_... reads of the run, taken as the fit
    returns (the tests after it use the trained model: evaluate, and fit on with
    validation_split)."""
    texts, labels = texts_of_many_lengths(90)
    model = classifier()
    traces = []
    train_step = model.train_step
    model.train_step = lambda data: traces.append(data[0]["input_word_ids"].shape) or \
        train_step(data)
    model.compile(learning_rate=1e-3)
    dataset = model.make_dataset(texts, labels, batch_size=8, shuffle=True, seed=0,
                                 bucket_lengths="auto")
    shapes = {tuple(x["input_word_ids"].shape) for x, _ in dataset}
    history = model.fit(texts, labels, batch_size=8, epochs=2, verbose=0, seed=0)
    return model, {"shapes": shapes, "losses": history.history["loss"],
                   "traces": [shape.as_list() for shape in traces],
                   "iterations": int(model.optimizer.iterations),
                   "learning_rate": float(model.optimizer.learning_rate.numpy())}


def test_fit_traces_the_train_step_once_and_sizes_the_schedule_exactly(fitted):
    _, run = fitted
    assert len({s[1] for s in run["shapes"]}) >= 3  # the batches come in several lengths
    assert len(run["losses"]) == 2
    # One trace for every length (the sequence axis is dynamic), AdamW's apply included.
    assert run["traces"] == [[None, None]]
    # ceil(90 / 8) = 12 steps per epoch: the schedule decays to 0 at the last step.
    assert run["iterations"] == 24
    assert run["learning_rate"] == pytest.approx(0.0, abs=1e-12)


def test_evaluate_grouped_by_length_scores_as_fixed_padding(fitted):
    model, _ = fitted  # trained: its scores are not a random model's
    texts, labels = texts_of_many_lengths(30)
    grouped = model.evaluate(texts, labels, batch_size=8, verbose=0, return_dict=True)
    fixed = model.evaluate(texts, labels, batch_size=8, verbose=0, return_dict=True,
                           bucket_lengths=None)
    assert grouped["loss"] == pytest.approx(fixed["loss"], rel=1e-5)
    assert grouped["accuracy"] == fixed["accuracy"]


def test_every_rows_loss_is_the_same_however_far_it_is_padded():
    """Grouping by length is only a speed-up if a row's loss does not depend on the length its
    batch is padded to. Span logits at padding used to take part in the softmax over
    positions, so a SQuAD window padded to 64 had 40-odd more wrong positions than padded to
    24: the loss, and what fit learned, changed with the bucket (colab/04's exact match)."""
    context = "john lives in paris . mary works in london and she was not in the old city ."
    examples = [SquadExample(f"q{i}", question, context,
                             (SquadAnswer(answer, context.index(answer)),))
                for i, (question, answer) in enumerate([
                    ("where does john live ?", "paris"), ("who works in london ?", "mary"),
                    ("where does mary work ?", "london"), ("is it old ?", "old city")])]
    qa = BertQuestionAnswerer(tiny_encoder(), preprocessor=BertPreprocessor(
        vocabulary=VOCAB, seq_length=WIDTH), doc_stride=32, max_query_length=16)
    qa.compile()
    grouped = qa.evaluate(examples, batch_size=2, verbose=0, return_dict=True)
    fixed = qa.evaluate(examples, batch_size=2, verbose=0, return_dict=True,
                        bucket_lengths=None)
    assert grouped["loss"] == pytest.approx(fixed["loss"], rel=1e-5)
    x, _ = qa.to_arrays(examples)
    logits = keras.tree.map_structure(np.asarray, qa.predict_on_batch(x))  # padded to 64
    padding = x["input_mask"] == 0
    assert padding.any()
    for name in ("start_logits", "end_logits"):
        assert (logits[name][padding] == PADDING_LOGIT).all()
        assert (logits[name][~padding] > PADDING_LOGIT / 10).all()

    tagger = BertTokenClassifier(tiny_encoder(), ["O", "B-PER", "B-LOC"],
                                 preprocessor=BertPreprocessor(vocabulary=VOCAB, seq_length=32))
    sentences = [TaggedSentence(["john", "lives", "in", "paris"], ["B-PER", "O", "O", "B-LOC"]),
                 TaggedSentence(["mary"] + ["went", "to", "london", "and"] * 4,
                                ["B-PER"] + ["O", "O", "B-LOC", "O"] * 4)] * 2
    tagger.compile()
    # One batch (the loss is a mean over the batch's labelled tokens), padded to 24 or to 32.
    grouped = tagger.evaluate(sentences, batch_size=4, verbose=0, return_dict=True)
    fixed = tagger.evaluate(sentences, batch_size=4, verbose=0, return_dict=True,
                            bucket_lengths=None)
    assert grouped["loss"] == pytest.approx(fixed["loss"], rel=1e-5)


class Crash(Exception):
    pass


class CrashAt(keras.callbacks.Callback):
    """Raises at the start of epoch ``epoch``, as a crash would."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise Crash(f"crashed at the start of epoch {epoch}")


def test_backup_and_restore_resumes_with_the_interrupted_epochs_batches(tmp_path):
    texts, labels = texts_of_many_lengths(48)
    whole = classifier(dropout=0.0)  # no dropout: the resumed run can match exactly
    whole.compile(learning_rate=1e-3)
    whole.fit(texts, labels, batch_size=8, epochs=3, verbose=0, seed=5)

    crashed = classifier(dropout=0.0)
    crashed.compile(learning_rate=1e-3)
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    with pytest.raises(Crash):
        crashed.fit(texts, labels, batch_size=8, epochs=3, verbose=0, seed=5,
                    callbacks=[backup, CrashAt(2)])
    # A new process: a new model, restored to the end of epoch 2 (weights and optimizer).
    resumed = classifier(dropout=0.0)
    resumed.compile(learning_rate=1e-3)
    history = resumed.fit(texts, labels, batch_size=8, epochs=3, verbose=0, seed=5,
                          callbacks=[backup])
    assert len(history.history["loss"]) == 1  # epoch 3 only
    for a, b in zip(whole.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_token_labels_and_choices_are_cut_with_the_ids():
    tagger = BertTokenClassifier(tiny_encoder(), ["O", "B-PER", "B-LOC"],
                                 preprocessor=BertPreprocessor(vocabulary=VOCAB, seq_length=32))
    sentences = [TaggedSentence(["john", "lives", "in", "paris"], ["B-PER", "O", "O", "B-LOC"]),
                 TaggedSentence(["mary"] + ["went", "to", "london", "and"] * 4,
                                ["B-PER"] + ["O", "O", "B-LOC", "O"] * 4)]
    batches = list(tagger.make_dataset(sentences, batch_size=1, bucket_lengths="auto"))
    assert [tuple(x["input_word_ids"].shape) for x, _ in batches] == [(1, 8), (1, 24)]
    for x, y in batches:
        assert y.shape == x["input_word_ids"].shape
        first_pieces = y.numpy()[0] >= 0
        assert first_pieces.sum() == int(x["input_mask"].numpy().sum()) - 2  # one piece a word

    chooser = BertMultipleChoice(tiny_encoder(), num_choices=2,
                                 preprocessor=BertPreprocessor(vocabulary=VOCAB, seq_length=32))
    data = [("john sat", ["down", "on the very old red river city"]), ("a dog", ["ran", "sat"])]
    x, y = next(iter(chooser.make_dataset(data, [1, 0], batch_size=2, bucket_lengths="auto")))
    assert x["input_word_ids"].shape == (2, 2, 16)  # the longest choice (12 tokens) decides
    assert y.numpy().tolist() == [0, 1]  # ordered by bucket: "a dog" (6 tokens) first


def test_features_ride_along_ungrouped_columns():
    model = BertClassifier(tiny_encoder(), 2, numeric_features=["age"],
                           categorical_features=["country"],
                           preprocessor=BertPreprocessor(vocabulary=VOCAB, seq_length=32))
    columns = {"text": ["the city river was very nice and old", "the movie was good", "a film"],
               "age": [40.0, 20.0, 30.0], "country": ["fr", "us", "fr"]}
    model.adapt(columns)
    x, _ = next(iter(model.make_dataset(columns, [0, 1, 1], batch_size=3,
                                        bucket_lengths="auto")))
    assert x["input_word_ids"].shape == (3, 16)
    # Ordered by bucket (8: the two short texts, in their order; 16: the long one), each
    # feature with its own row.
    assert x["input_mask"].numpy().sum(axis=1).tolist() == [6, 4, 10]
    assert x["age"].numpy().tolist() == [20.0, 30.0, 40.0]
    assert x["country"].numpy().tolist() == [b"us", b"fr", b"fr"]


def test_finetune_and_fit_share_the_default():
    import inspect

    from keras_bert.cli import build_parser
    from keras_bert.models.task import BertTask
    from keras_bert.finetuning.finetune import FinetuneRun

    def flag(*flags):
        return build_parser("finetune").parse_args(
            ["finetune", "--task", "classification", "--init_checkpoint", "c", "--train_file",
             "t", "--output_dir", "o", *flags]).bucket_lengths

    fit_default = inspect.signature(BertTask.fit).parameters["bucket_lengths"].default
    assert flag() == FinetuneRun.bucket_lengths == fit_default == "auto"
    assert flag("--bucket_lengths", "none") is None
    assert flag("--bucket_lengths", "32,16") == [16, 32]
    assert flag("--bucket_lengths", "16,32,64,128") == [16, 32, 64, 128]
    assert flag("--bucket_lengths", " Auto ") == "auto"
    assert flag("--bucket_lengths", "NONE") is None
    for bad in ("", "16,x", "0,32", "-8", "fixed"):
        with pytest.raises(SystemExit):
            flag("--bucket_lengths", bad)


def test_validation_split_holds_out_the_last_rows_as_keras_does(fitted):
    model, _ = fitted  # already compiled and trained: this fit's steps are counted from here
    texts, labels = texts_of_many_lengths(40)
    steps_before = int(model.optimizer.iterations)
    history = model.fit(texts, labels, batch_size=8, epochs=1, verbose=0, seed=0,
                        validation_split=0.25)
    assert "val_loss" in history.history
    # 30 training rows: ceil(30 / 8) = 4 steps; the last 10 rows were held out.
    assert int(model.optimizer.iterations) - steps_before == 4
    expected = model.evaluate(texts[30:], labels[30:], batch_size=8, verbose=0,
                              return_dict=True)["loss"]
    assert history.history["val_loss"][0] == pytest.approx(expected, rel=1e-5)
    for bad, message in ((1.0, r"must be in \(0, 1\)"), (0.01, "leaves no")):
        with pytest.raises(ValueError, match=message):
            model.fit(texts, labels, validation_split=bad, verbose=0)
    with pytest.raises(ValueError, match="no validation_data"):
        model.fit(texts, labels, validation_split=0.5, validation_data=(texts, labels))
