"""The pretraining input pipeline: records as written, deterministic, checkpointable, sharded."""

import glob
import gzip
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.pretraining.dynamic_masking import DynamicMasker
from keras_bert.pretraining.schema import parse_pretraining_example
from keras_bert.pretraining.input import pretraining_dataset
from tests.pretraining.records import MASK_ID, write_records


def _dataset(files, batch_size=4, **kwargs):
    return pretraining_dataset(files["pattern"], batch_size, 32, 5, **kwargs)


def _records(path):
    return [parse_pretraining_example(r, 32, 5) for r in tf.data.TFRecordDataset(path)]


def _first_batches(dataset, count):
    iterator = iter(dataset)
    return [next(iterator) for _ in range(count)]


def _ids(batch):
    return batch[0]["input_word_ids"].numpy()


def test_reads_the_records_as_written(pretraining_files):
    inputs, labels = next(iter(_dataset(pretraining_files, is_training=False)))
    assert {k: (v.dtype, tuple(v.shape)) for k, v in inputs.items()} == {
        "input_word_ids": (tf.int32, (4, 32)), "input_mask": (tf.int32, (4, 32)),
        "input_type_ids": (tf.int32, (4, 32)), "masked_lm_positions": (tf.int32, (4, 5))}
    assert {k: (v.dtype, tuple(v.shape)) for k, v in labels.items()} == {
        "masked_lm_ids": (tf.int32, (4, 5)), "masked_lm_weights": (tf.float32, (4, 5)),
        "next_sentence_labels": (tf.int32, (4,))}
    files = sorted(glob.glob(pretraining_files["pattern"]))
    first, second = _records(files[0]), _records(files[1])
    # Evaluation order: the two files interleaved record by record.
    expected = [first[0], second[0], first[1], second[1]]
    np.testing.assert_array_equal(inputs["input_word_ids"],
                                  np.stack([r["input_ids"] for r in expected]))
    np.testing.assert_array_equal(labels["next_sentence_labels"],
                                  [int(r["next_sentence_labels"][0]) for r in expected])
    total = sum(int(b[1]["next_sentence_labels"].shape[0])
                for b in _dataset(pretraining_files, batch_size=5, is_training=False))
    assert total == 128


def test_training_order_depends_only_on_the_seed(pretraining_files):
    one = _first_batches(_dataset(pretraining_files, seed=5), 3)
    two = _first_batches(_dataset(pretraining_files, seed=5), 3)
    other = _first_batches(_dataset(pretraining_files, seed=6), 3)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(_ids(a), _ids(b))
    assert any(not np.array_equal(_ids(a), _ids(c)) for a, c in zip(one, other))


def test_a_restored_iterator_continues_where_the_saved_one_was(pretraining_files, tmp_path):
    masker = DynamicMasker(pretraining_files["vocab"], max_predictions_per_seq=5)
    iterator = iter(_dataset(pretraining_files, masker=masker))
    for _ in range(3):
        next(iterator)
    path = tf.train.Checkpoint(iterator=iterator).write(str(tmp_path / "it"))
    expected = [next(iterator) for _ in range(40)]  # past one pass over the 128 records
    fresh = iter(_dataset(pretraining_files, masker=masker))
    tf.train.Checkpoint(iterator=fresh).read(path).assert_consumed()
    for want in expected:
        got = next(fresh)
        np.testing.assert_array_equal(_ids(got), _ids(want))
        np.testing.assert_array_equal(got[1]["masked_lm_ids"], want[1]["masked_lm_ids"])


def _all_ids(dataset):
    return sorted(tuple(row) for batch in dataset for row in _ids(batch))


@pytest.mark.parametrize("num_pipelines", [2, 3])
def test_input_pipelines_read_disjoint_shares_of_the_data(pretraining_files, num_pipelines):
    everything = _all_ids(_dataset(pretraining_files, is_training=False))
    shares = [_all_ids(_dataset(pretraining_files, is_training=False,
                                input_context=tf.distribute.InputContext(num_pipelines, i)))
              for i in range(num_pipelines)]
    assert sorted(sum(shares, [])) == everything
    assert all(len(share) >= 128 // num_pipelines - 1 for share in shares)


def test_dynamic_masking_masks_afresh_and_keeps_the_true_tokens(pretraining_files):
    masker = DynamicMasker(pretraining_files["vocab"], max_predictions_per_seq=5)
    static = next(iter(_dataset(pretraining_files, batch_size=16, is_training=False)))
    dynamic = next(iter(_dataset(pretraining_files, batch_size=16, is_training=False,
                                 masker=masker)))
    # The unmasked sequence: static input ids with the static labels put back.
    original = _ids(static).copy()
    for row, (positions, ids, weights) in enumerate(zip(
            static[0]["masked_lm_positions"].numpy(), static[1]["masked_lm_ids"].numpy(),
            static[1]["masked_lm_weights"].numpy())):
        original[row, positions[weights > 0]] = ids[weights > 0]
    positions = dynamic[0]["masked_lm_positions"].numpy()
    weights = dynamic[1]["masked_lm_weights"].numpy()
    labels = dynamic[1]["masked_lm_ids"].numpy()
    masked = _ids(dynamic)
    rows = np.arange(16)[:, None]
    used = weights > 0
    np.testing.assert_array_equal(labels[used], original[rows, positions][used])
    assert (masked[rows, positions][used] == MASK_ID).mean() > 0.6
    assert not np.array_equal(positions, static[0]["masked_lm_positions"].numpy())
    unmasked = np.ones_like(masked, dtype=bool)
    unmasked[rows.repeat(5, 1)[used], positions[used]] = False
    np.testing.assert_array_equal(masked[unmasked], original[unmasked])


def test_gzip_files_are_read_like_plain_ones(pretraining_files, tmp_path):
    source = sorted(glob.glob(pretraining_files["pattern"]))[0]
    with open(source, "rb") as f, gzip.open(tmp_path / "part.tfrecord.gz", "wb") as out:
        shutil.copyfileobj(f, out)
    plain = next(iter(pretraining_dataset(source, 8, 32, 5, is_training=False)))
    zipped = next(iter(pretraining_dataset(str(tmp_path / "*.gz"), 8, 32, 5,
                                           is_training=False)))
    np.testing.assert_array_equal(_ids(plain), _ids(zipped))


def test_errors_name_the_problem(pretraining_files, tmp_path):
    with pytest.raises(FileNotFoundError, match="input file '.*nothing-.*' does not exist"):
        pretraining_dataset(str(tmp_path / "nothing-*.tfrecord"), 4, 32, 5)
    masker = DynamicMasker(pretraining_files["vocab"], max_predictions_per_seq=7)
    with pytest.raises(ValueError, match="max_predictions_per_seq=7 but the records have 5"):
        _dataset(pretraining_files, masker=masker)


@pytest.mark.parametrize("v2_feature_names", [False, True])
def test_records_of_other_lengths_are_refused_up_front_with_the_fix(pretraining_files, tmp_path,
                                                                    v2_feature_names):
    pattern = (write_records(str(tmp_path), num_files=1, records_per_file=2,
                             v2_feature_names=True) if v2_feature_names
               else pretraining_files["pattern"])
    first = re.escape(sorted(glob.glob(pattern))[0])
    ids = "input_word_ids" if v2_feature_names else "input_ids"
    with pytest.raises(ValueError, match=(
            f"records in {first} were written with max_seq_length=32 \\(feature '{ids}' has 32 "
            "values\\) but max_seq_length=64 was given; pass --max_seq_length 32")):
        pretraining_dataset(pattern, 4, 64, 5)
    with pytest.raises(ValueError, match=(
            f"records in {first} were written with max_predictions_per_seq=5 \\(feature "
            "'masked_lm_positions' has 5 values\\) but max_predictions_per_seq=7 was given; "
            "pass --max_predictions_per_seq 5")):
        pretraining_dataset(pattern, 4, 32, 7, is_training=False)
    inputs, _ = next(iter(pretraining_dataset(pattern, 2, 32, 5)))
    assert inputs["input_word_ids"].shape == (2, 32)
