"""The `keras-bert` command line as a user meets it: help texts that name real commands and
documented flags, one casing flag on every command, errors that name the CLI's own flags and fail
before long work, and a quiet start-up unless -v."""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys

import pytest

from keras_bert import cli, tf_startup

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERAS_BERT = [sys.executable, "-m", "keras_bert.cli"]


def _choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    """Each command's full parser (serve's is the model server's own)."""
    from keras_bert.serving.flags import build_flag_parser
    return {name: _choices(cli.build_parser(name))[name] for name in cli.COMMANDS
            if name != cli.SERVE} | {cli.SERVE: build_flag_parser()}


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(KERAS_BERT + list(args), capture_output=True, text=True, cwd=REPO,
                          timeout=300, env={**os.environ, "PYTHONPATH": REPO}, **kwargs)


def test_the_command_table_and_the_modules_cannot_disagree():
    """`keras-bert --help` lists COMMANDS, and each command's module adds the commands the table
    gives it, no more."""
    listed = _choices(cli.build_parser())
    assert list(listed) == list(cli.COMMANDS)
    help_text = " ".join(cli.build_parser().format_help().split())
    for name, command in cli.COMMANDS.items():
        assert f"{name} {' '.join(command.summary.split())}" in help_text
        if name != cli.SERVE:
            assert set(_choices(cli.build_parser(name))) == {
                other for other, entry in cli.COMMANDS.items() if entry.module == command.module}


def test_help_texts_name_only_commands_that_exist():
    commands = set(cli.COMMANDS)
    for name, parser in _subparsers().items():
        text = parser.format_help()
        for mentioned in re.findall(r"`keras-bert\s+([a-z][a-z-]*)", text):
            assert mentioned in commands, f"`keras-bert {name} --help` names `keras-bert " \
                                          f"{mentioned}`, which is not a command"


@pytest.mark.parametrize("command", ["extract-features", "finetune", "export", "pretrain",
                                     "pretraining-data", "vocab", "convert", "predict"])
def test_every_documented_option_has_a_help_text(command):
    parser = _subparsers()[command]
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or not action.option_strings:
            continue
        if action.option_strings == ["-h", "--help"]:
            continue
        assert action.help, f"`keras-bert {command}` documents {action.option_strings} " \
                            f"without a help text"


CASING = {  # argv that each command needs besides the casing flag
    "export": ["ckpt", "models", "--model_name", "m"],
    "finetune": ["--task", "classification", "--init_checkpoint", "c", "--train_file", "t",
                 "--output_dir", "o"],
    "extract-features": ["--init_checkpoint", "c", "--input_file", "i", "--output_file", "o"],
    "pretraining-data": ["--input_file", "i", "--output_file", "o", "--vocab_file", "v"],
    "vocab": ["--input", "i", "--output", "o"],
}
SPELLINGS = [([], None), (["--do_lower_case"], True), (["--do_lower_case=true"], True),
             (["--do_lower_case=false"], False), (["--no_do_lower_case"], False),
             (["--nodo_lower_case"], False), (["--do_lower_case=False"], False)]


@pytest.mark.parametrize("command", sorted(CASING))
@pytest.mark.parametrize("flags,expected", SPELLINGS)
def test_one_casing_flag_on_every_command(command, flags, expected):
    args = cli.build_parser(command).parse_args([command, *CASING[command], *flags])
    default = {"pretraining-data": True, "vocab": True}.get(command)  # Google's / uncased
    assert args.do_lower_case == (default if expected is None else expected)
    help_text = _subparsers()[command].format_help()
    assert "--do_lower_case" in help_text and "--no_do_lower_case" in help_text


@pytest.mark.parametrize("flag", ["--lower_case", "--no-lower_case", "--no_lower_case",
                                  "--cased"])
def test_no_other_spelling_of_the_casing_flag(flag, capsys):
    with pytest.raises(SystemExit):
        cli.build_parser("vocab").parse_args(["vocab", *CASING["vocab"], flag])
    assert "unrecognized arguments" in capsys.readouterr().err


def test_converting_onto_an_existing_directory_names_the_overwrite_flag(tmp_path, capsys):
    (tmp_path / "dst").mkdir()
    code = cli.main(["convert", "--from", "hf", "--to", "keras", str(tmp_path / "src"),
                     str(tmp_path / "dst")])
    err = capsys.readouterr().err
    assert code == 2
    if "does not exist" not in err:  # the source is checked first on some paths
        assert "--overwrite" in err and "overwrite=True" not in err


def test_existing_output_names_the_flag_of_the_command(tmp_path, minilm_dir, capsys):
    (tmp_path / "dst").mkdir()
    code = cli.main(["convert", "--from", "hf", "--to", "keras", minilm_dir,
                     str(tmp_path / "dst")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"output '{tmp_path / 'dst'}' already exists; remove it or pass --overwrite" in err
    assert "overwrite=True" not in err


def test_extract_features_on_a_missing_checkpoint_says_it_is_missing(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("hello\n")
    code = cli.main(["extract-features", "--init_checkpoint", str(tmp_path / "nowhere"),
                     "--input_file", str(tmp_path / "in.txt"),
                     "--output_file", str(tmp_path / "out.jsonl")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"'{tmp_path / 'nowhere'}' does not exist" in err
    assert "vocab.txt" not in err.split("does not exist")[0]
    assert not (tmp_path / "out.jsonl").exists()


def test_export_under_a_file_fails_before_loading_the_model(tmp_path, minilm_dir, capsys,
                                                            monkeypatch):
    import keras_bert.tasks.checkpoint_models as checkpoints

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded before the output path was checked")

    monkeypatch.setattr(checkpoints, "model_of_checkpoint", no_loading)
    (tmp_path / "afile").write_text("not a directory")
    code = cli.main(["export", minilm_dir, str(tmp_path / "afile" / "models"),
                     "--model_name", "m"])
    err = capsys.readouterr().err
    assert code == 2
    assert "is a file, not a directory" in err and "Errno" not in err
    # An existing version is refused as early.
    (tmp_path / "models" / "m" / "3").mkdir(parents=True)
    code = cli.main(["export", minilm_dir, str(tmp_path / "models"), "--model_name", "m",
                     "--version", "3"])
    assert code == 2 and "exists; TF Serving versions are immutable" in capsys.readouterr().err


def test_the_casing_warning_names_the_command_line_flag(tmp_path, caplog):
    from keras_bert.tokenization.pretrained_vocab import read_pretrained_vocabulary
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    with caplog.at_level("WARNING"):
        read_pretrained_vocabulary(str(tmp_path))
    assert "--do_lower_case / --no_do_lower_case" in caplog.text


# What TensorFlow writes to stderr as it starts (C++ lines before its log level applies).
START_UP = ("I0000", "cuInit", "oneDNN", "absl::InitializeLog", "cpu_feature_guard",
            "This TensorFlow binary is optimized")


# Printed to stderr between what `keras-bert info` wrote and the warnings after it.
MARKER = "---- keras-bert info returned ----"


def _info_then_warnings(verbose: bool) -> subprocess.CompletedProcess:
    """`keras-bert info L-2_H-128_A-2` (a preset: it builds the model, so TensorFlow starts)
    through cli.main, as the `keras-bert` script calls it; then MARKER on stderr; then a Keras
    warning, a TensorFlow logged warning and our own log and warning in that process."""
    argv = ["info", "L-2_H-128_A-2", *(["-v"] if verbose else [])]  # -v after the subcommand
    code = ("import logging, sys, warnings\nfrom keras_bert import cli\n"
            f"code = cli.main({argv!r})\n"
            f"print({MARKER!r}, file=sys.stderr, flush=True)\n"
            "import keras, tensorflow as tf\n"
            "keras.layers.Dense(2, input_shape=(3,))\n"  # Keras: prefer an Input object
            "tf.get_logger().warning('TensorFlow says careful')\n"
            "logging.getLogger('keras_bert.finetuning').warning('we say careful')\n"
            "warnings.warn_explicit('we warn too', UserWarning, 'run.py', 1, "
            "module='keras_bert.finetuning.finetune')\n"
            "sys.exit(code)\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=300, env={**os.environ, "PYTHONPATH": REPO})


def test_the_cli_is_quiet_by_default_and_verbose_with_v():
    """Quiet: `keras-bert info` writes nothing to stderr, and what cli.main did before
    TensorFlow loaded still hides Keras' Python warnings and TensorFlow's logged warnings
    afterwards, while our own logs and warnings keep their level. With -v: TensorFlow's
    start-up lines, and its and Keras' warnings, show."""
    # The four run side by side (each is a process start, two of them TensorFlow's).
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = [pool.submit(_run, ["--help"]), pool.submit(_run, ["info", "no-such-checkpoint"]),
                pool.submit(_info_then_warnings, False), pool.submit(_info_then_warnings, True)]
    help_run, failing, quiet, loud = (run.result() for run in runs)
    assert help_run.returncode == 0 and help_run.stderr == "", help_run.stderr
    assert "finetune" in help_run.stdout
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "hidden_size: 128" in quiet.stdout
    quiet_info, quiet_after = quiet.stderr.split(MARKER + "\n")
    assert quiet_info == "", quiet.stderr
    ours = ("we say careful", "we warn too")
    for line in ours:
        assert line in quiet_after, quiet.stderr
    # Nothing else: neither Keras' input_shape warning nor TensorFlow's log, nor any at exit.
    assert [line for line in quiet_after.splitlines()
            if not any(text in line for text in ours)] == [], quiet.stderr
    assert loud.returncode == 0, loud.stderr[-2000:]
    loud_info, loud_after = loud.stderr.split(MARKER + "\n")
    assert [m for m in START_UP if m in loud_info], "-v shows TensorFlow's start-up lines"
    assert "input_shape" in loud_after, loud.stderr[-2000:]
    assert "TensorFlow says careful" in loud_after, loud.stderr[-2000:]
    assert "we say careful" in loud_after and "we warn too" in loud_after
    assert failing.returncode == 2
    assert failing.stderr.count("\n") == 1 and failing.stderr.startswith(
        "keras-bert info: error: "), failing.stderr


# Runs `keras-bert ARGV` (cli.main) for each ARGV of the JSON list in argv[1], in one process:
# per ARGV, how it exited, what it wrote, and the TensorFlow and Keras modules loaded so far.
HELP_IN_ONE_PROCESS = """
import contextlib, io, json, sys
from keras_bert import cli
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(argv)
            code = "returned"
        except SystemExit as e:
            code = e.code
    results.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue(),
                    "modules": sorted(m for m in sys.modules
                                      if m.split(".")[0] in ("tensorflow", "keras"))})
print(json.dumps(results))
"""


def _helps(argvs: list[list[str]]) -> list[dict]:
    """HELP_IN_ONE_PROCESS's results for ``argvs``, each with the process's exit status and
    stderr."""
    run = subprocess.run([sys.executable, "-c", HELP_IN_ONE_PROCESS, json.dumps(argvs)],
                         capture_output=True, text=True, cwd=REPO, timeout=300,
                         env={**os.environ, "PYTHONPATH": REPO})
    results = json.loads(run.stdout.splitlines()[-1]) if run.returncode == 0 else \
        [{}] * len(argvs)
    return [{**result, "returncode": run.returncode, "process_stderr": run.stderr}
            for result in results]


HELPS = [None, *cli.COMMANDS]


@pytest.fixture(scope="module")
def helps() -> dict:
    """Every `--help` of HELPS in one fresh process; if any of them failed, wrote to stderr or
    loaded TensorFlow or Keras (after which the next ones cannot load it again), each again in
    a process of its own, so that each test judges its own command."""
    argvs = [["--help"] if command is None else [command, "--help"] for command in HELPS]
    results = _helps(argvs)
    if any(r["returncode"] or r["process_stderr"] or r.get("modules") for r in results):
        results = [_helps([argv])[0] for argv in argvs]
    return dict(zip(HELPS, results))


@pytest.mark.parametrize("command", HELPS)
def test_help_loads_no_tensorflow(helps, command):
    """`keras-bert --help` and `keras-bert COMMAND --help` answer in a fraction of a second: they
    import neither TensorFlow nor Keras."""
    result = helps[command]
    assert result["returncode"] == 0, result["process_stderr"][-2000:]
    assert result["code"] in (0, "returned"), result["code"]
    assert result["stdout"].startswith(
        f"usage: keras-bert{'' if command is None else ' ' + command}")
    assert result["modules"] == []
    assert result["stderr"] == "" and result["process_stderr"] == ""


@pytest.mark.slow
def test_quiet_export_shows_our_log_once_and_none_of_tensorflows(tmp_path, minilm_dir):
    result = _run(["export", minilm_dir, str(tmp_path / "models"), "--model_name", "m"])
    assert result.returncode == 0, result.stderr[-2000:]
    # all-MiniLM-L6-v2 is a sentence-transformers folder: it exports as the BertEmbedder it holds
    assert result.stderr.count("exported BertEmbedder as") == 1
    for noise in ("Assets written", "unsupported characters", "I0000", "cuInit"):
        assert noise not in result.stderr, result.stderr
    assert "exported m to" in result.stdout


def test_a_failing_tensorflow_start_up_still_shows_what_it_wrote(capfd):
    def broken():
        os.write(2, b"native library said why\n")
        raise ImportError("tensorflow is broken")

    with pytest.raises(ImportError):
        with tf_startup.stderr_captured():
            broken()
    assert "native library said why" in capfd.readouterr().err
    with tf_startup.stderr_captured():
        os.write(2, b"hidden\n")
    assert "hidden" not in capfd.readouterr().err
