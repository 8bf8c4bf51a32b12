"""``from_pretrained``, written once on BertTask for every task model: a new head on a checkpoint's
encoder (the head's arguments by position, each task's default length), and a saved task model
returned as it is, where an argument that would change it is an error naming it."""

import numpy as np
import pytest

from keras_bert import (BertClassifier, BertEmbedder, BertEncoder, BertMultipleChoice,
                        BertPreprocessor, BertQuestionAnswerer, BertTokenClassifier)
from keras_bert.checkpoints.saving import save_checkpoint
from tests.tasks.tiny_checkpoint import VOCAB, tiny_checkpoint, tiny_encoder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "uncased_tiny"), "google")


def test_new_models_take_their_head_arguments_by_position(checkpoint):
    classifier = BertClassifier.from_pretrained(checkpoint, 3, 16, label_names=["a", "b", "c"])
    assert classifier.num_classes == 3 and classifier.preprocessor.seq_length == 16
    assert classifier.label_names == ["a", "b", "c"]
    expected = BertEncoder.from_pretrained(checkpoint).get_weights()
    for got, want in zip(classifier.encoder.get_weights(), expected, strict=True):
        np.testing.assert_array_equal(got, want)
    tagger = BertTokenClassifier.from_pretrained(checkpoint, ["O", "B-PER"], 24)
    assert tagger.label_names == ["O", "B-PER"] and tagger.seq_length == 24
    chooser = BertMultipleChoice.from_pretrained(checkpoint, 3, 16)
    assert chooser.num_choices == 3 and chooser.preprocessor.seq_length == 16
    reader = BertQuestionAnswerer.from_pretrained(checkpoint, 32, doc_stride=8)
    assert reader.seq_length == 32 and reader.doc_stride == 8
    embedder = BertEmbedder.from_pretrained(checkpoint, 16, pooling="cls", lower_case=False,
                                            feature_layers=[-1, -2])
    assert embedder.preprocessor.seq_length == 16 and embedder.pooling == "cls"
    assert embedder.preprocessor.lower_case is False


def test_left_out_arguments_take_each_task_s_defaults(checkpoint):
    classifier = BertClassifier.from_pretrained(checkpoint)
    assert classifier.num_classes == 2 and classifier.preprocessor.seq_length == 128
    assert classifier.preprocessor.lower_case is True  # the checkpoint's casing
    assert BertMultipleChoice.from_pretrained(checkpoint, num_choices=None).num_choices == 4
    # run_squad.py's 384, capped at the encoder's positions (the tiny checkpoint has 128)
    assert BertQuestionAnswerer.from_pretrained(checkpoint).seq_length == 128


def test_wrong_calls_say_what_was_wrong(checkpoint):
    with pytest.raises(ValueError, match="label_names is required for a new BertTokenClassifier"):
        BertTokenClassifier.from_pretrained(checkpoint)
    with pytest.raises(TypeError, match=r"at most 2 more positional arguments \(num_classes, "
                                        r"seq_length\); got 4"):
        BertClassifier.from_pretrained(checkpoint, 2, 16, 0.1)
    with pytest.raises(TypeError, match="multiple values for argument 'seq_length'"):
        BertQuestionAnswerer.from_pretrained(checkpoint, 32, seq_length=64)


def _saved(model, tmp_path):
    return save_checkpoint(model, str(tmp_path / type(model).__name__))


def test_saved_models_load_as_they_are_and_refuse_changes(tmp_path):
    def preprocessor():
        return BertPreprocessor(vocabulary=VOCAB, seq_length=16)

    tagger = _saved(BertTokenClassifier(tiny_encoder(), ["O", "B-PER", "I-PER"],
                                        preprocessor=preprocessor(), window_stride=4), tmp_path)
    same = BertTokenClassifier.from_pretrained(tagger, ("O", "B-PER", "I-PER"), 16,
                                               window_stride=4)
    assert same.label_names == ["O", "B-PER", "I-PER"] and same.window_stride == 4
    with pytest.raises(ValueError, match=r"label_names=\['O', 'B-LOC'\] \(the saved model has "
                                         r"\['O', 'B-PER', 'I-PER'\]\)"):
        BertTokenClassifier.from_pretrained(tagger, ["O", "B-LOC"])

    chooser = _saved(BertMultipleChoice(tiny_encoder(), 3, preprocessor=preprocessor()),
                     tmp_path)
    assert BertMultipleChoice.from_pretrained(chooser).num_choices == 3
    with pytest.raises(ValueError, match=r"holds a saved BertMultipleChoice, which "
                                         r"from_pretrained loads as it is, but was asked for "
                                         r"num_choices=4 \(the saved model has 3\), "
                                         r"seq_length=32 \(the saved model has 16\)"):
        BertMultipleChoice.from_pretrained(chooser, 4, 32)

    reader = _saved(BertQuestionAnswerer(tiny_encoder(), preprocessor=preprocessor(),
                                         doc_stride=8), tmp_path)
    assert BertQuestionAnswerer.from_pretrained(reader).seq_length == 16  # not 384
    with pytest.raises(ValueError, match=r"doc_stride=16 \(the saved model has 8\)"):
        BertQuestionAnswerer.from_pretrained(reader, doc_stride=16)

    embedder = _saved(BertEmbedder(tiny_encoder(), preprocessor=preprocessor(), pooling="cls",
                                   feature_layers=[-1]),
                      tmp_path)
    assert BertEmbedder.from_pretrained(embedder, pooling="cls").pooling == "cls"
    with pytest.raises(ValueError, match=r"lower_case=False \(the saved model has True\)"):
        BertEmbedder.from_pretrained(embedder, lower_case=False)
    with pytest.raises(ValueError, match=r"window_stride=4 \(a setting of a new model\)"):
        BertEmbedder.from_pretrained(embedder, window_stride=4)
