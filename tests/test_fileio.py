"""keras_bert.fileio and keras_bert.io_utils agree on what is local: plain paths and file://
URLs are local files (never tf.io.gfile's remote file systems); schemes such as gs:// and
TensorFlow's ram:// are remote."""

import os

import pytest

from keras_bert import fileio, io_utils


@pytest.mark.parametrize("path,local", [("/tmp/x", True), ("rel/x", True),
                                        ("file:///tmp/x", True), ("gs://bucket/x", False),
                                        ("ram://x", False), ("s3://b/x", False)])
def test_both_modules_agree_on_local_paths(path, local):
    assert io_utils.is_local(path) == local
    assert fileio.is_remote(path) == (not local)


def test_a_file_url_output_lands_at_its_local_path(tmp_path):
    target = tmp_path / "out"
    with io_utils.atomic_output_dir(f"file://{target}") as scratch:
        open(os.path.join(scratch, "a.txt"), "w").write("x")
    assert (target / "a.txt").read_text() == "x"
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no scratch left behind
    with pytest.raises(FileExistsError, match="already exists"):
        with io_utils.atomic_output_dir(f"file://{target}"):
            pass
    assert fileio.exists(f"file://{target}/a.txt")
    assert io_utils.local_copy(f"file://{target}/a.txt", str(tmp_path)) == str(target / "a.txt")
