"""The script and `keras-bert pretraining-data`: flags, clear errors on bad input, atomic output."""

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from keras_bert import cli as keras_bert_cli
from keras_bert.cli import pretraining_data as cli
from keras_bert.pretraining_data.writer import TEMP_SUFFIX
from tests.pretraining_data.conftest import SMALL_VOCABULARY, make_corpus

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "tfrecords", "create_pretraining_data.py")


def _script():
    spec = importlib.util.spec_from_file_location("create_pretraining_data", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(capsys, *flags):
    code = keras_bert_cli.main(["pretraining-data", "--progress=false", *flags])
    return code, capsys.readouterr().err


def test_flags_and_defaults_match_googles_script():
    parser = __import__("argparse").ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args(["--input_file=a", "--output_file=b", "--vocab_file=v",
                              "--nodo_lower_case", "--do_whole_word_mask"])
    assert (args.do_lower_case, args.do_whole_word_mask) == (False, True)
    config = cli.config_from_args(parser.parse_args(
        ["--input_file=a", "--output_file=b", "--vocab_file=v", "--do_lower_case=false"]))
    assert config.do_lower_case is False
    options = config.instance
    assert (options.max_seq_length, options.max_predictions_per_seq, options.random_seed,
            options.dupe_factor, options.masked_lm_prob, options.short_seq_prob) == \
        (128, 20, 12345, 10, 0.15, 0.1)
    assert (options.do_whole_word_mask, options.v2_feature_names, config.gzip) == \
        (False, False, False)


def test_command_writes_records(tmp_path, corpus_file, small_vocab_file, capsys, caplog):
    caplog.set_level("INFO")
    code, err = _run(capsys, f"--input_file={corpus_file}", f"--vocab_file={small_vocab_file}",
                     f"--output_dir={tmp_path}/out", "--num_shards=2", "--dupe_factor=1",
                     "--num_workers=1")
    assert code == 0, err
    assert sorted(os.listdir(tmp_path / "out")) == [
        "pretraining-00000-of-00002.tfrecord", "pretraining-00001-of-00002.tfrecord"]
    assert "documents: 600 " in caplog.text
    assert re.search(r"\[MASK\] (79|80)\.\d\d%, random (9|10)\.\d\d%", caplog.text)


@pytest.mark.parametrize("case, expected", [
    ("missing", "input file '{tmp}/nope.txt' does not exist"),
    ("utf8", "{tmp}/bad.txt:4: invalid UTF-8 (invalid start byte at byte 7 of the line)"),
    ("uncased_vocab", "looks uncased"),
    ("cased_vocab", "looks cased"),
    ("short", "--max_seq_length must be at least 5"),
    ("empty", "no documents in {tmp}/empty.txt"),
    ("outputs", "exactly one of --output_file and --output_dir"),
    ("same_output", "--output_file names {tmp}/out.tfrecord more than once"),
])
def test_bad_input_gets_a_clear_error_and_no_output(tmp_path, corpus_file, small_vocab_file,
                                                    capsys, case, expected):
    (tmp_path / "bad.txt").write_bytes(b"fine line .\n\nanother .\nbroken \xff line\n")
    (tmp_path / "empty.txt").write_text("\n\n  \n", encoding="utf-8")
    cased = tmp_path / "cased.txt"
    cased.write_text("".join(t.capitalize() + "\n" if t.startswith("w") else t + "\n"
                             for t in SMALL_VOCABULARY), encoding="utf-8")
    flags = {"input_file": corpus_file, "vocab_file": small_vocab_file,
             "output_file": f"{tmp_path}/out.tfrecord"}
    extra = []
    if case == "missing":
        flags["input_file"] = f"{tmp_path}/nope.txt"
    elif case == "utf8":
        flags["input_file"] = f"{tmp_path}/bad.txt"
    elif case == "uncased_vocab":
        extra = ["--do_lower_case=false"]
    elif case == "cased_vocab":
        flags["vocab_file"] = str(cased)
    elif case == "short":
        extra = ["--max_seq_length=4"]
    elif case == "empty":
        flags["input_file"] = f"{tmp_path}/empty.txt"
    elif case == "outputs":
        extra = [f"--output_dir={tmp_path}/dir"]
    elif case == "same_output":
        flags["output_file"] += f",{flags['output_file']}"
    code, err = _run(capsys, *[f"--{k}={v}" for k, v in flags.items()], *extra,
                     "--num_workers=1")
    assert code == 2
    assert expected.format(tmp=tmp_path) in err
    if case == "cased_vocab":
        assert str(cased) in err
    assert not any(name.startswith("out") for name in os.listdir(tmp_path))


def test_script_is_the_same_command(tmp_path, small_vocab_file, capsys):
    code = _script().main(["--input_file=x", f"--vocab_file={small_vocab_file}",
                           f"--output_file={tmp_path}/o", "--max_seq_length=3"])
    assert code == 2 and "at least 5" in capsys.readouterr().err


def test_killed_run_leaves_no_final_file_and_a_rerun_completes_it(tmp_path, small_vocab_file):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(make_corpus(1000, seed=5), encoding="utf-8")
    flags = [f"--input_file={corpus}", f"--vocab_file={small_vocab_file}", "--dupe_factor=5",
             "--max_seq_length=64", "--max_predictions_per_seq=10", "--window_bytes=32768",
             "--num_workers=2", "--progress=false"]
    outputs = [tmp_path / "run" / f"part-{i}.tfrecord" for i in range(2)]
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
    process = subprocess.Popen(
        [sys.executable, SCRIPT, *flags, f"--output_file={','.join(map(str, outputs))}"],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    temp = outputs[0].with_name(outputs[0].name + TEMP_SUFFIX)
    deadline = time.monotonic() + 120
    while not (temp.exists() and temp.stat().st_size > 0):
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, "the run never started writing"
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)  # the script and its workers
    process.wait()
    assert not any(path.exists() for path in outputs), "a final name after a killed run"
    assert temp.exists()

    reference = [tmp_path / "reference" / f"part-{i}.tfrecord" for i in range(2)]
    for paths in (outputs, reference):  # the rerun, and a run that was never interrupted
        parser = __import__("argparse").ArgumentParser()
        cli.add_arguments(parser)
        assert cli.run(parser.parse_args([*flags, f"--output_file={','.join(map(str, paths))}"])) \
            == 0
    assert [p.read_bytes() for p in outputs] == [p.read_bytes() for p in reference]
    assert sorted(os.listdir(tmp_path / "run")) == ["part-0.tfrecord", "part-1.tfrecord"]
