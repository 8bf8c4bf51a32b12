"""The TFRecord writer end to end: statistics, consistency with the tokenized corpus, worker
independence, formats, the memory bound and the progress bar."""

import collections
import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from keras_bert.pretraining_data import writer as pretraining_data
from keras_bert.pretraining_data.corpus import read_document_windows
from keras_bert.pretraining_data.writer import PretrainingDataConfig, create_pretraining_data
from keras_bert.pretraining.schema import parse_pretraining_example
from keras_bert.pretraining_data.worker import InstanceOptions
from keras_bert.tokenization import BertTokenizer
from tests.pretraining_data.google_spec import google_feature_spec

MAX_SEQ_LENGTH, MAX_PREDICTIONS = 64, 10
CLS = 2  # in the small vocabulary


def _read(paths, max_seq_length=MAX_SEQ_LENGTH, max_predictions=MAX_PREDICTIONS):
    """All records of `paths`, parsed with Google's spec, as numpy arrays [num_records, ...]."""
    spec = google_feature_spec(max_seq_length, max_predictions)
    batches = [tf.io.parse_example(batch, spec) for batch in
               tf.data.TFRecordDataset(paths).batch(4096)]
    return {name: np.concatenate([b[name].numpy() for b in batches]) for name in spec}


def _config(tmp_path, corpus, vocab, name, **overrides):
    options = dict(max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS,
                   dupe_factor=10)
    options.update(overrides.pop("instance", {}))
    config = dict(input_file=corpus, vocab_file=vocab, num_workers=1, window_bytes=1 << 16,
                  output_file=f"{tmp_path}/{name}-a.tfrecord,{tmp_path}/{name}-b.tfrecord")
    config.update(overrides)
    return PretrainingDataConfig(**config, instance=InstanceOptions(**options))


class _CorpusIndex:
    """Finds token sequences in the tokenized corpus: which documents hold them, and where."""

    def __init__(self, corpus, tokenizer):
        self.documents = [[]]
        with open(corpus, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    self.documents.append([])
                else:
                    self.documents[-1] += tokenizer.convert_tokens_to_ids(tokenizer.tokenize(line))
        self.documents = [d for d in self.documents if d]
        self.trigrams = collections.defaultdict(list)
        self.short = set()
        for d, doc in enumerate(self.documents):
            for p in range(len(doc)):
                self.trigrams[tuple(doc[p:p + 3])].append((d, p))
                self.short.update({tuple(doc[p:p + 1]), tuple(doc[p:p + 2])})

    def find(self, tokens):
        """[(document, position)] of every occurrence (None: too short to place)."""
        if len(tokens) < 3:
            return None if tuple(tokens) in self.short else []
        return [(d, p) for d, p in self.trigrams[tuple(tokens[:3])]
                if self.documents[d][p:p + len(tokens)] == tokens]


def _check_records(records, index, tokenizer, whole_word_continuations=None):
    """Structural checks of every record against the tokenized corpus; returns statistics."""
    stats = collections.Counter()
    CLS, SEP, MASK = tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id
    for i in range(len(records["input_ids"])):
        ids, mask, segments = (records[k][i] for k in ("input_ids", "input_mask", "segment_ids"))
        weights = records["masked_lm_weights"][i]
        n, k = int(mask.sum()), int(weights.sum())
        assert (mask[:n] == 1).all() and (ids[n:] == 0).all() and (segments[n:] == 0).all()
        assert (weights[:k] == 1).all() and (weights[k:] == 0).all()
        positions, labels = records["masked_lm_positions"][i], records["masked_lm_ids"][i]
        assert (np.diff(positions[:k]) > 0).all() and (positions[k:] == 0).all()
        assert (labels[k:] == 0).all()
        restored = ids[:n].copy()  # (a random replacement may be any token, [SEP] too)
        restored[positions[:k]] = labels[:k]
        seps = np.flatnonzero(restored == SEP)
        assert restored[0] == CLS and len(seps) == 2 and seps[1] == n - 1
        assert (segments[:seps[0] + 1] == 0).all() and (segments[seps[0] + 1:n] == 1).all()
        assert not set(positions[:k]) & {0, seps[0], n - 1}
        # Every position, masked ones restored from their labels, is the tokenized corpus.
        tokens_a, tokens_b = list(restored[1:seps[0]]), list(restored[seps[0] + 1:n - 1])
        in_a, in_b = index.find(tokens_a), index.find(tokens_b)
        assert in_a != [] and in_b != [], f"record {i}: A or B is not in the corpus"
        is_random_next = records["next_sentence_labels"][i, 0] == 1
        if not is_random_next and in_a:
            # B continues A in the same document (after what truncation removed).
            assert any(index.documents[d][q:q + len(tokens_b)] == tokens_b
                       for d, p in in_a for q in range(p + len(tokens_a),
                                                      len(index.documents[d])))
        if whole_word_continuations is not None:
            chosen = set(positions[:k])
            for p in range(2, n):
                if restored[p] in whole_word_continuations and p - 1 not in (seps[0],):
                    assert (p in chosen) == (p - 1 in chosen), f"record {i} splits a word"
        masked_tokens = ids[positions[:k]]
        stats.update(records=1, random_next=int(is_random_next), maskable=n - 3, masked=k,
                     mask=int((masked_tokens == MASK).sum()),
                     kept=int((masked_tokens == labels[:k]).sum()))
    stats["random"] = stats["masked"] - stats["mask"] - stats["kept"]
    return stats


def test_statistics_consistency_and_worker_independence(tmp_path, corpus_file, small_vocab_file):
    one = create_pretraining_data(_config(tmp_path, corpus_file, small_vocab_file, "one"),
                                  progress=False)
    two = create_pretraining_data(
        _config(tmp_path, corpus_file, small_vocab_file, "two", num_workers=2), progress=False)
    for suffix in ("a", "b"):  # byte-identical whatever the number of workers
        assert (tmp_path / f"one-{suffix}.tfrecord").read_bytes() == \
            (tmp_path / f"two-{suffix}.tfrecord").read_bytes()
    assert dataclasses.replace(one, seconds=0, output_files=[]) == \
        dataclasses.replace(two, seconds=0, output_files=[])
    records = _read(one.output_files)
    assert one.documents == 600 and len(records["input_ids"]) == one.instances > 10_000
    tokenizer = BertTokenizer(small_vocab_file)
    stats = _check_records(records, _CorpusIndex(corpus_file, tokenizer), tokenizer)
    assert stats["masked"] / stats["maskable"] == pytest.approx(0.15, abs=0.015)
    assert stats["mask"] / stats["masked"] == pytest.approx(0.8, abs=0.015)
    assert stats["random"] / stats["masked"] == pytest.approx(0.1, abs=0.015)
    assert stats["kept"] / stats["masked"] == pytest.approx(0.1, abs=0.015)
    # Pairs from chunks of two or more sentences toss a fair coin; one-sentence chunks (the
    # last sentence of a document, mostly) always take a random next segment, as Google's do.
    coin_tosses = one.instances - one.one_sentence_pairs
    assert (one.random_next - one.one_sentence_pairs) / coin_tosses == \
        pytest.approx(0.5, abs=0.015)
    assert one.one_sentence_pairs / one.instances < 0.15
    # The summary counts what the records hold.
    assert one.masking.mask + one.masking.random + one.masking.kept == stats["masked"]
    assert (one.maskable_tokens, one.random_next) == (stats["maskable"], stats["random_next"])


def test_whole_word_masking_with_the_real_vocabulary(tmp_path, real_vocab_file):
    text = ("Tokenization splits unbelievably long words into wordpieces.\n"
            "Pretraining transformers requires enormous unlabelled corpora.\n"
            "Whole word masking hides every piece of a multilingual word.\n"
            "Researchers reproduced the embeddings deterministically.\n")
    corpus = tmp_path / "english.txt"
    corpus.write_text("\n".join([text] * 40), encoding="utf-8")
    tokenizer = BertTokenizer(real_vocab_file)
    summary = create_pretraining_data(
        _config(tmp_path, str(corpus), real_vocab_file, "wwm",
                instance=dict(do_whole_word_mask=True, dupe_factor=5)), progress=False)
    continuations = {i for t, i in tokenizer.vocab.items() if t.startswith("##")}
    stats = _check_records(_read(summary.output_files), _CorpusIndex(str(corpus), tokenizer),
                           tokenizer, whole_word_continuations=continuations)
    assert stats["records"] == summary.instances > 100
    assert stats["masked"] / stats["maskable"] == pytest.approx(0.15, abs=0.03)


def test_output_dir_shards_gzip_and_v2_names(tmp_path, corpus_file, small_vocab_file):
    config = _config(tmp_path, corpus_file, small_vocab_file, "x", output_file="",
                     output_dir=f"{tmp_path}/out", num_shards=3, gzip=True,
                     instance=dict(v2_feature_names=True, dupe_factor=1))
    summary = create_pretraining_data(config, progress=False)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        f"pretraining-0000{i}-of-00003.tfrecord.gz" for i in range(3)]
    dataset = tf.data.TFRecordDataset(summary.output_files, compression_type="GZIP")
    counts = [sum(1 for _ in tf.data.TFRecordDataset(path, compression_type="GZIP"))
              for path in summary.output_files]
    assert max(counts) - min(counts) <= 1 and sum(counts) == summary.instances  # round-robin
    record = next(iter(dataset))
    assert "input_word_ids" in tf.train.Example.FromString(record.numpy()).features.feature
    parsed = parse_pretraining_example(record, MAX_SEQ_LENGTH, MAX_PREDICTIONS)
    assert parsed["input_ids"][0] == CLS


def test_windows_bound_what_is_read_ahead(tmp_path, corpus_file, small_vocab_file,
                                          monkeypatch):
    windows = list(read_document_windows([corpus_file], 1 << 14))
    sizes = [sum(len(line) + 1 for doc in w for line in doc) for w in windows]
    largest_document = max(sum(len(line) + 1 for line in doc) for w in windows for doc in w)
    assert len(windows) > 20 and max(sizes) < (1 << 14) + largest_document
    assert sum(len(w) for w in windows) == 600

    pulled = [0]

    def counting(windows):
        for item in windows:
            pulled[0] += 1
            yield item

    config = _config(tmp_path, corpus_file, small_vocab_file, "bound", num_workers=2,
                     window_bytes=1 << 14, instance=dict(dupe_factor=1))
    results = pretraining_data._process_windows(
        counting(enumerate(windows)), BertTokenizer(small_vocab_file), config.instance, 2)
    # Windows read but not yet handed back, each time one is handed back.
    ahead = [pulled[0] - consumed for consumed, _ in enumerate(results, start=1)]
    assert len(ahead) == len(windows)
    assert max(ahead) <= 4  # 2 * num_workers windows in flight at most


def test_progress_bar_shows_documents_and_instances_per_second(tmp_path, corpus_file,
                                                               small_vocab_file, capsys):
    create_pretraining_data(_config(tmp_path, corpus_file, small_vocab_file, "p",
                                    instance=dict(dupe_factor=1)), progress=True)
    err = capsys.readouterr().err
    assert "documents/s" in err and "instances_per_s=" in err and "600 documents" in err


def test_reads_and_writes_through_tf_gfile(tmp_path, corpus_file, small_vocab_file):
    # TensorFlow's in-memory filesystem stands in for gs://: no step may use local-only I/O.
    for local, remote in ((corpus_file, "ram://pretraining/corpus.txt"),
                          (small_vocab_file, "ram://pretraining/vocab.txt")):
        tf.io.gfile.makedirs("ram://pretraining")
        tf.io.gfile.copy(local, remote, overwrite=True)
    local_run = create_pretraining_data(
        _config(tmp_path, corpus_file, small_vocab_file, "local", instance=dict(dupe_factor=2)),
        progress=False)
    remote_run = create_pretraining_data(
        _config(tmp_path, "ram://pretraining/corpus.txt", "ram://pretraining/vocab.txt", "remote",
                output_file="", output_dir="ram://pretraining/out", num_shards=2, num_workers=2,
                instance=dict(dupe_factor=2)), progress=False)
    names = [f"pretraining-0000{i}-of-00002.tfrecord" for i in range(2)]
    assert remote_run.output_files == [f"ram://pretraining/out/{name}" for name in names]
    assert sorted(tf.io.gfile.listdir("ram://pretraining/out")) == names  # no temporary left
    for local, remote in zip(local_run.output_files, remote_run.output_files):
        with tf.io.gfile.GFile(local, "rb") as a, tf.io.gfile.GFile(remote, "rb") as b:
            assert a.read() == b.read()


def test_an_output_that_cannot_be_opened_leaves_no_file(tmp_path, corpus_file, small_vocab_file):
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("a file where the second output's directory should be")
    config = _config(tmp_path, corpus_file, small_vocab_file, "x",
                     output_file=f"{tmp_path}/first.tfrecord,{blocker}/second.tfrecord")
    with pytest.raises(OSError):
        create_pretraining_data(config, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_directory"]
