"""The pure-Python TFRecord writer against TensorFlow's own: the same bytes, readable as GZIP."""

import gzip
import os
import random

import pytest
import tensorflow as tf

from keras_bert import fileio
from keras_bert.pretraining_data import tfrecord


def _payloads(count=50, seed=0):
    rng = random.Random(seed)
    return [bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 7, 300, 5000])))
            for _ in range(count)]


def test_crc32c_matches_the_standard_check_values():
    # RFC 3720 B.4 / the CRC catalogue: CRC-32C("123456789") = 0xE3069283.
    assert tfrecord.crc32c(b"123456789") == 0xE3069283
    assert tfrecord.crc32c_python(b"123456789") == 0xE3069283
    assert tfrecord.crc32c(b"") == tfrecord.crc32c_python(b"") == 0
    assert tfrecord.crc32c(bytes(32)) == 0x8A9136AA  # 32 zero bytes, RFC 3720 B.4
    for payload in _payloads(20, seed=1):
        assert tfrecord.crc32c(payload) == tfrecord.crc32c_python(payload)


def test_plain_files_are_byte_identical_to_tensorflows_writer(tmp_path):
    payloads = _payloads()
    ours, theirs = str(tmp_path / "ours.tfrecord"), str(tmp_path / "tf.tfrecord")
    with tfrecord.TFRecordFileWriter(ours) as writer:
        for payload in payloads[:25]:
            writer.write(payload)
        writer.write_framed(b"".join(tfrecord.frame_record(p) for p in payloads[25:]))
    with tf.io.TFRecordWriter(theirs) as writer:
        for payload in payloads:
            writer.write(payload)
    with open(ours, "rb") as a, open(theirs, "rb") as b:
        assert a.read() == b.read()
    assert [r.numpy() for r in tf.data.TFRecordDataset(ours)] == payloads


def test_gzip_files_read_back_with_tensorflow_and_are_reproducible(tmp_path):
    payloads = _payloads(seed=2)
    paths = [str(tmp_path / f"{i}.tfrecord.gz") for i in range(2)]
    for path in paths:
        with tfrecord.TFRecordFileWriter(path, gzip_compress=True) as writer:
            for payload in payloads:
                writer.write(payload)
    read = [r.numpy() for r in tf.data.TFRecordDataset(paths[0], compression_type="GZIP")]
    assert read == payloads
    with open(paths[0], "rb") as a, open(paths[1], "rb") as b:
        first = a.read()
        assert first == b.read()  # no time stamp or file name in the gzip header
    plain = str(tmp_path / "plain.tfrecord")
    with tf.io.TFRecordWriter(plain) as writer:
        for payload in payloads:
            writer.write(payload)
    with open(plain, "rb") as f:
        assert gzip.decompress(first) == f.read()


def test_a_corrupted_record_is_caught_by_tensorflows_reader(tmp_path):
    path = str(tmp_path / "x.tfrecord")
    with tfrecord.TFRecordFileWriter(path) as writer:
        writer.write(b"hello world" * 10)
    data = bytearray(open(path, "rb").read())
    data[20] ^= 0xFF  # a byte of the payload: its CRC no longer matches
    open(path, "wb").write(bytes(data))
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(path))


def test_remote_paths_go_through_tf_gfile(tmp_path):
    path = "ram://tfrecord-test/out.tfrecord"
    tf.io.gfile.makedirs("ram://tfrecord-test")
    with tfrecord.TFRecordFileWriter(path) as writer:
        writer.write(b"remote")
    assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == [b"remote"]
    assert fileio.is_remote(path) and fileio.exists(path)
    fileio.rename(path, path + ".moved", overwrite=True)
    assert fileio.glob("ram://tfrecord-test/*") == [path + ".moved"]


def test_local_file_functions(tmp_path):
    for name in ("b.txt", "a.txt", ".hidden.txt"):
        with fileio.open_file(str(tmp_path / name), "w") as f:
            f.write("é\n")
    assert fileio.glob(str(tmp_path / "*.txt")) == [
        str(tmp_path / n) for n in (".hidden.txt", "a.txt", "b.txt")]
    assert fileio.glob(str(tmp_path / "a.txt")) == [str(tmp_path / "a.txt")]
    assert fileio.glob(str(tmp_path / "missing.txt")) == []
    assert fileio.open_file(f"file://{tmp_path}/a.txt", "rb").read() == "é\n".encode()
    with pytest.raises(FileExistsError, match="b.txt"):
        fileio.rename(str(tmp_path / "a.txt"), str(tmp_path / "b.txt"))
    fileio.rename(str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), overwrite=True)
    assert not fileio.exists(str(tmp_path / "a.txt")) and fileio.isdir(str(tmp_path))
    fileio.makedirs(str(tmp_path / "x" / "y"))
    assert os.path.isdir(tmp_path / "x" / "y")
