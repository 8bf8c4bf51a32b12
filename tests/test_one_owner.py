"""A newcomer's check that each decision has one owner: the fine-tuning defaults (learning rate
1e-4, batch 32, 3 epochs, 10% warmup, weight decay 0.01) are written once, in
``config.FinetuneSettings``, and everything else (``compile``, ``fit``, ``FinetuneRun``,
``keras-bert finetune``'s flags) reads them from there."""

import ast
import inspect
import pathlib

from keras_bert.cli import build_parser
from keras_bert.config import FinetuneSettings
from keras_bert.models.task import BertTask
from keras_bert.finetuning.finetune import FinetuneRun

ROOT = pathlib.Path(__file__).resolve().parent.parent / "keras_bert"
RECIPE = {"learning_rate": 1e-4, "batch_size": 32, "epochs": 3}
# Pretraining has its own recipe (the paper's: lr 1e-4, batch 256), in its own config.
OTHER_RECIPES = ("pretraining", "pretraining_data")


def literal_defaults(path: pathlib.Path) -> list[tuple[int, str, object]]:
    """(line, name, value) of every number given as the default of a parameter, a dataclass
    field or an argparse flag named as a recipe setting."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            positional = arguments.posonlyargs + arguments.args
            pairs = list(zip(positional[len(positional) - len(arguments.defaults):],
                             arguments.defaults))
            pairs += [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d]
            found += [(d.lineno, a.arg, d.value) for a, d in pairs
                      if isinstance(d, ast.Constant)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and isinstance(node.value, ast.Constant):
            found.append((node.lineno, node.target.id, node.value.value))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flag = next((a.value for a in node.args if isinstance(a, ast.Constant)), "")
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            if isinstance(default, ast.Constant):
                found.append((default.lineno, str(flag).lstrip("-"), default.value))
    return [(line, name, value) for line, name, value in found
            if name in RECIPE and value == RECIPE[name]]


def test_the_fine_tuning_defaults_are_written_once():
    owner = ROOT / "config.py"
    elsewhere = [f"{path.relative_to(ROOT.parent)}:{line}: {name}={value!r}"
                 for path in sorted(ROOT.rglob("*.py"))
                 if path != owner and path.relative_to(ROOT).parts[0] not in OTHER_RECIPES
                 for line, name, value in literal_defaults(path)]
    assert not elsewhere, "the fine-tuning recipe's defaults belong to config.FinetuneSettings:\n" \
        + "\n".join(elsewhere)
    assert sorted(name for _, name, _ in literal_defaults(owner)) == sorted(RECIPE)


def test_every_door_reads_the_same_defaults():
    settings = FinetuneSettings()
    fit = inspect.signature(BertTask.fit).parameters
    compile_ = inspect.signature(BertTask.compile).parameters
    config = FinetuneRun("classification", "ckpt", "train.tsv", None, "out")
    flags = build_parser("finetune").parse_args(
        ["finetune", "--task", "classification", "--init_checkpoint", "c", "--train_file", "t",
         "--output_dir", "o"])
    for name in ("learning_rate", "weight_decay", "warmup_fraction"):
        assert compile_[name].default == getattr(config, name) == getattr(flags, name) \
            == getattr(settings, name), name
    for name in ("batch_size", "epochs"):
        assert getattr(config, name) == getattr(flags, name) == getattr(settings, name), name
    assert fit["epochs"].default == settings.epochs
    assert fit["bucket_lengths"].default == config.bucket_lengths == flags.bucket_lengths


def test_a_run_that_learned_nothing_is_told_the_default_rate():
    """The hint after a run that learned nothing reads the rate from the owner: a run below it
    is told to try it, a run at it is told to train longer."""
    from keras_bert.finetuning.finetune import _learning_hint
    below = FinetuneRun("classification", "ckpt", "train.tsv", None, "out", learning_rate=3e-5,
                        epochs=1)
    assert _learning_hint(below) == ("try more epochs (--epochs 3) or a higher learning rate "
                                     f"(--learning_rate {FinetuneSettings().learning_rate:g})")
    at_default = FinetuneRun("classification", "ckpt", "train.tsv", None, "out", epochs=3)
    assert _learning_hint(at_default) == "try more epochs (--epochs 6)"
