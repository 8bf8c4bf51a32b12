"""keras_bert.fileio, the one way the library touches files: plain paths and file:// URLs are local
files handled by Python (no TensorFlow imported), schemes such as gs:// and TensorFlow's ram:// go
through tf.io.gfile; every path argument takes a pathlib.Path; outputs appear whole or not at all.
"""

import doctest
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import uuid

import pytest

from keras_bert import fileio

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("path,local", [("/tmp/x", True), ("rel/x", True),
                                        ("file:///tmp/x", True), ("gs://bucket/x", False),
                                        ("ram://x", False), ("s3://b/x", False),
                                        (pathlib.Path("/tmp/x"), True)])
def test_local_and_remote_paths(path, local):
    assert fileio.is_remote(path) == (not local)


def test_join_keeps_url_prefixes():
    assert fileio.join("gs://bucket/", "/run", "model.keras") == "gs://bucket/run/model.keras"
    assert fileio.join("/tmp", "run", "model.keras") == os.path.join("/tmp", "run", "model.keras")
    assert fileio.join(pathlib.Path("/tmp"), "a") == os.path.join("/tmp", "a")


def test_a_file_url_output_lands_at_its_local_path(tmp_path):
    target = tmp_path / "out"
    with fileio.atomic_output_dir(f"file://{target}") as scratch:
        open(os.path.join(scratch, "a.txt"), "w").write("x")
    assert (target / "a.txt").read_text() == "x"
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no scratch left behind
    with pytest.raises(FileExistsError, match="already exists"):
        with fileio.atomic_output_dir(f"file://{target}"):
            pass
    assert fileio.exists(f"file://{target}/a.txt")
    assert fileio.local_copy(f"file://{target}/a.txt", str(tmp_path)) == str(target / "a.txt")


def test_a_failed_output_dir_leaves_the_old_one_and_no_scratch(tmp_path):
    target = tmp_path / "out"
    with fileio.atomic_output_dir(target) as scratch:
        pathlib.Path(scratch, "a.txt").write_text("old")
    with pytest.raises(RuntimeError, match="boom"):
        with fileio.atomic_output_dir(target, overwrite=True) as scratch:
            pathlib.Path(scratch, "a.txt").write_text("new")
            raise RuntimeError("boom")
    assert (target / "a.txt").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["out"]
    with fileio.atomic_output_dir(target, overwrite=True) as scratch:
        pathlib.Path(scratch, "b.txt").write_text("new")
    assert sorted(os.listdir(target)) == ["b.txt"]  # replaced whole, not merged


# ---------------------------------------------------------------------------------- atomic_write
def test_atomic_write_replaces_the_file_only_when_the_block_succeeds(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old\n")
    with pytest.raises(RuntimeError, match="boom"):
        with fileio.atomic_write(path) as f:
            f.write("half")
            raise RuntimeError("boom")
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["results.json"]  # the temporary file is removed
    with fileio.atomic_write(path) as f:
        f.write("new é\n")
    assert path.read_bytes() == "new é\n".encode()
    assert os.listdir(tmp_path) == ["results.json"]
    with fileio.atomic_write(str(tmp_path / "blob.bin"), "wb") as f:
        f.write(b"\x00\xff")
    assert (tmp_path / "blob.bin").read_bytes() == b"\x00\xff"
    with pytest.raises(ValueError, match="mode must be 'w' or 'wb'"):
        with fileio.atomic_write(path, "a"):
            pass


def test_atomic_write_never_shows_a_partial_file(tmp_path):
    path = tmp_path / "out.txt"
    with fileio.atomic_write(path) as f:
        f.write("first half ")
        f.flush()
        assert not path.exists()
        (temp,) = os.listdir(tmp_path)
        assert temp.startswith("out.txt.tmp-")
        f.write("second half")
    assert path.read_text() == "first half second half"


def test_atomic_write_on_a_remote_file_system():
    tf = pytest.importorskip("tensorflow")
    directory = f"ram://fileio-{uuid.uuid4().hex}"
    tf.io.gfile.makedirs(directory)
    path = f"{directory}/out.txt"
    with fileio.atomic_write(path) as f:
        f.write("remote\n")
    with pytest.raises(RuntimeError):
        with fileio.atomic_write(path) as f:
            f.write("half")
            raise RuntimeError("boom")
    assert fileio.listdir(directory) == ["out.txt"]
    with fileio.open_file(path) as f:
        assert f.read() == "remote\n"


def test_rmtree_on_a_remote_file_system():
    tf = pytest.importorskip("tensorflow")
    directory = f"ram://fileio-{uuid.uuid4().hex}"
    tf.io.gfile.makedirs(f"{directory}/sub")
    with tf.io.gfile.GFile(f"{directory}/sub/x.txt", "w") as f:
        f.write("x")
    fileio.rmtree(directory)
    assert not tf.io.gfile.exists(directory)
    fileio.rmtree(directory)  # gone already: nothing to do


def test_text_reads_as_through_gfile(tmp_path):
    """No newline translation in text mode: only ``\\n`` ends a line, as with tf.io.gfile (whose
    line iteration drops every ``\\r``), so a vocabulary has the same lines either way."""
    tf = pytest.importorskip("tensorflow")
    data = "a\r\nb\rc\nd".encode()
    remote = f"ram://fileio-{uuid.uuid4().hex}.txt"
    with tf.io.gfile.GFile(remote, "wb") as f:
        f.write(data)
    (tmp_path / "local.txt").write_bytes(data)
    with fileio.open_file(tmp_path / "local.txt") as f:
        local_lines = list(f)
    with fileio.open_file(remote) as f:
        remote_lines = list(f)
    assert local_lines == ["a\r\n", "b\rc\n", "d"]
    assert remote_lines == [line.replace("\r", "") for line in local_lines]
    with fileio.open_file(tmp_path / "local.txt") as f, fileio.open_file(remote) as g:
        assert f.read() == g.read() == data.decode()
    with fileio.open_file(tmp_path / "written.txt", "w") as f:
        f.write("x\ny\n")
    assert (tmp_path / "written.txt").read_bytes() == b"x\ny\n"


# ---------------------------------------------------------------------------------- pathlib.Path
def _calls(tmp: pathlib.Path) -> dict:
    """Each public fileio callable, called with pathlib.Path arguments; each returns what a user
    would check."""
    (tmp / "a.txt").write_text("a")
    (tmp / "dir").mkdir()

    def atomic_write():
        with fileio.atomic_write(tmp / "w.txt") as f:
            f.write("w")
        return (tmp / "w.txt").read_text() == "w"

    def atomic_output_dir():
        with fileio.atomic_output_dir(tmp / "out") as scratch:
            pathlib.Path(scratch, "x").write_text("x")
        return (tmp / "out" / "x").read_text() == "x"

    def atomic_path():
        with fileio.atomic_path(tmp / "p.keras") as scratch:
            assert scratch.endswith(".keras") and os.path.dirname(scratch) == str(tmp)
            pathlib.Path(scratch).write_text("p")
        return (tmp / "p.keras").read_text() == "p" and os.listdir(tmp).count("p.keras") == 1

    def open_file():
        with fileio.open_file(tmp / "a.txt") as f:
            return f.read() == "a"

    def rename():
        fileio.rename(tmp / "a.txt", tmp / "r.txt")
        return (tmp / "r.txt").exists() and not (tmp / "a.txt").exists()

    def remove():
        fileio.remove(tmp / "a.txt")
        return not (tmp / "a.txt").exists()

    def copy():
        fileio.copy(tmp / "a.txt", tmp / "c.txt")
        return (tmp / "c.txt").read_text() == "a"

    def makedirs():
        fileio.makedirs(tmp / "m" / "n")
        return (tmp / "m" / "n").is_dir()

    def rmtree():
        (tmp / "t" / "u").mkdir(parents=True)
        (tmp / "t" / "u" / "f.txt").write_text("f")
        fileio.rmtree(tmp / "t")
        fileio.rmtree(tmp / "missing")  # no error when there is nothing to remove
        return not (tmp / "t").exists() and (tmp / "a.txt").exists()

    def ordinary_permissions():
        os.chmod(tmp / "dir", 0o700)
        fileio.ordinary_permissions(tmp / "dir")
        return os.stat(tmp / "dir").st_mode & 0o777 != 0o700

    return {
        "OutputExistsError": lambda: fileio.OutputExistsError(tmp / "a.txt").path
        == str(tmp / "a.txt"),
        "atomic_output_dir": atomic_output_dir,
        "atomic_path": atomic_path,
        "atomic_write": atomic_write,
        "check_writable_location": lambda: fileio.check_writable_location(tmp / "new") is None,
        "copy": copy,
        "exists": lambda: fileio.exists(tmp / "a.txt") and not fileio.exists(tmp / "no"),
        "glob": lambda: fileio.glob(tmp / "*.txt") == [str(tmp / "a.txt")],
        "file_stat": lambda: fileio.file_stat(tmp / "a.txt").length == 1,
        "FileStat": lambda: fileio.FileStat(1, 2).length == 1,
        "walk": lambda: [(root, files) for root, _, files in fileio.walk(tmp / "dir")]
        == [(str(tmp / "dir"), [])],
        "is_remote": lambda: fileio.is_remote(tmp) is False,
        "isdir": lambda: fileio.isdir(tmp / "dir") and not fileio.isdir(tmp / "a.txt"),
        "join": lambda: fileio.join(tmp, pathlib.Path("dir")) == str(tmp / "dir"),
        "listdir": lambda: fileio.listdir(tmp) == ["a.txt", "dir"],
        "local_copy": lambda: fileio.local_copy(tmp / "a.txt", tmp) == str(tmp / "a.txt"),
        "local_path": lambda: fileio.local_path(tmp) == str(tmp),
        "makedirs": makedirs,
        "open_file": open_file,
        "ordinary_permissions": ordinary_permissions,
        "read_text_lines": lambda: fileio.read_text_lines(tmp / "a.txt") == ["a"],
        "remove": remove,
        "rename": rename,
        "rmtree": rmtree,
        "write_json": lambda: (fileio.write_json(tmp / "w.json", {"é": [1]}) is None
                               and json.loads((tmp / "w.json").read_text("utf-8")) == {"é": [1]}),
    }


def _public_callables() -> set[str]:
    return {name for name, value in vars(fileio).items()
            if not name.startswith("_") and callable(value)
            and getattr(value, "__module__", None) == fileio.__name__}


def test_every_public_callable_is_checked_with_a_path(tmp_path):
    assert set(_calls(tmp_path)) == _public_callables()


@pytest.mark.parametrize("name", sorted(_public_callables()))
def test_takes_a_pathlib_path(tmp_path, name):
    assert _calls(tmp_path)[name]() is True


# ---------------------------------------------------------------------------------- no TensorFlow
def test_local_files_and_bert_config_import_no_tensorflow(tmp_path):
    code = textwrap.dedent(f"""
        import json, pathlib, sys
        from keras_bert.config import BertConfig
        from keras_bert import fileio
        local = pathlib.Path({str(tmp_path)!r})
        (local / "bert_config.json").write_text(json.dumps({{"vocab_size": 99, "hidden_size": 8,
            "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16}}))
        config = BertConfig.from_json_file(str(local / "bert_config.json"))
        config.to_json_file(local / "copy.json")
        BertConfig.from_json_file(f"file://{{local}}/copy.json").to_hf_json_file(local / "hf.json")
        with fileio.atomic_write(local / "x.txt") as f:
            f.write("x")
        with fileio.atomic_output_dir(local / "d") as scratch:
            pass
        fileio.glob(local / "*"), fileio.listdir(local), fileio.isdir(local / "d")
        print(config.vocab_size, BertConfig.from_hf_json_file(local / "hf.json").vocab_size,
              "tensorflow" in sys.modules)
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, timeout=300, env={**os.environ, "PYTHONPATH": REPO})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["99", "99", "False"]


def test_the_module_example_runs():
    result = doctest.testmod(fileio, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# ---------------------------------------------------------------------------------- one module
def test_no_other_module_touches_files_through_gfile():
    """fileio is the one way to touch files: no other library module calls tf.io.gfile."""
    package = pathlib.Path(fileio.__file__).parent
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "fileio.py" and path.parent == package:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\bgfile\.\w+\(", line.split("#", 1)[0]):  # a gfile call
                offenders.append(f"{path.relative_to(package)}:{number}: {line.strip()}")
    assert not offenders, "tf.io.gfile outside keras_bert/fileio.py:\n" + "\n".join(offenders)
