"""Each task owns its options: a dataclass of its own and the flags that set it. The run and the
command line take them from the task, and a flag of another task is an error naming it."""

import pytest

from keras_bert.cli import build_parser, main
from keras_bert.tasks import get_task, task_names
from keras_bert.tasks.spec import CommonOptions, option_defaults
from keras_bert.tasks.classification.task import ClassificationOptions
from keras_bert.tasks.squad.task import SquadOptions
from keras_bert.finetuning.finetune import _task_options
from keras_bert.cli.finetune import _options_from_flags
from tests.tasks.tiny_checkpoint import tiny_checkpoint

REQUIRED = ["--init_checkpoint", "c", "--train_file", "t", "--output_dir", "o"]


def parse(*flags):
    return build_parser("finetune").parse_args(["finetune", *REQUIRED, *flags])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "uncased_tiny"), "google")


@pytest.mark.parametrize("name", task_names())
def test_each_task_flag_sets_its_field_and_defaults_to_it(name):
    task = get_task(name)
    assert issubclass(task.options_class, CommonOptions)
    args = parse("--task", name)
    for field, default in option_defaults(task.options_class).items():
        assert getattr(args, field) == default, f"--{field} of {name}"
    assert _options_from_flags(task, args) == task.options_class()


def test_flags_become_the_task_options():
    args = parse("--task", "squad", "--doc_stride", "8", "--version_2_with_negative",
                 "--max_seq_length", "24", "--labels", "a, b")
    assert _options_from_flags(get_task("squad"), args) == SquadOptions(
        labels=["a", "b"], seq_length=24, doc_stride=8, version_2_with_negative=True)
    args = parse("--task", "regression", "--data_format", "sts-b", "--numeric_features", "x,y")
    assert _options_from_flags(get_task("regression"), args) == ClassificationOptions(
        data_format="sts-b", numeric_features=["x", "y"])
    args = parse("--task", "regression", "--data_format", "csv", "--text_column", "review",
                 "--text_pair_column", "summary", "--label_column", "score")
    assert _options_from_flags(get_task("regression"), args) == ClassificationOptions(
        data_format="csv", text_column="review", text_pair_column="summary",
        label_column="score")


@pytest.mark.parametrize("task,flags,message", [
    ("ner", ["--numeric_features", "age"],
     "--numeric_features is a flag of --task classification or regression, not ner"),
    ("classification", ["--doc_stride", "64"], "--doc_stride is a flag of --task squad, "
                                               "not classification"),
    ("ner", ["--text_column", "review"],
     "--text_column is a flag of --task classification or regression, not ner"),
])
def test_a_flag_of_another_task_is_an_error_naming_it(task, flags, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["finetune", "--task", task, "--init_checkpoint", str(tmp_path),
                 "--train_file", str(tmp_path / "train"), "--output_dir", str(out),
                 *flags]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_run_options_come_from_the_task():
    squad, classification = get_task("squad"), get_task("classification")
    assert _task_options(squad, None) == SquadOptions()
    given = SquadOptions(doc_stride=64)
    assert _task_options(squad, given) is given
    with pytest.raises(ValueError, match="the classification task takes ClassificationOptions, "
                                         "not SquadOptions"):
        _task_options(classification, given)
