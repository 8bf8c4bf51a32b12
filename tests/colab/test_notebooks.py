"""The Colab notebooks: built from their sources, outputs cleared, and each one executed shrunk
on CPU with nbclient (CI values injected after the tagged parameters cell, as papermill does).
benchmarks/gpu_check.py runs them the same way on a GPU (``GPU_RUNS``) and applies ``CHECKS``."""

import json
import math
import os
import re
import sys

import nbformat
import pytest
from nbclient import NotebookClient

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLAB = os.path.join(REPO, "colab")
sys.path.insert(0, COLAB)
import build_notebooks  # noqa: E402

pytestmark = pytest.mark.slow  # minutes of real training, notebooks or subprocess workers

NOTEBOOKS = sorted(f for f in os.listdir(COLAB) if f.endswith(".ipynb"))

# Per notebook: the shrunk parameters, and the values the last cell reports for checking.
CI_RUNS = {
    "01_finetune_classifier.ipynb": (
        # seq_length 128 and 2 epochs, not 64 and 3: at 64 most reviews are read as two or
        # more windows; 152-163 s instead of 250 s in the slow tests (78.0% against 78.4%).
        dict(NUM_TRAIN=320, NUM_TEST=500, SEQ_LENGTH=128, BATCH_SIZE=16, EPOCHS=2,
             LEARNING_RATE=1e-4),
        "dict(test_accuracy=test_accuracy, majority_rate=majority_rate, "
        "majority_label=majority_label, test_size=len(test_y), train_size=len(train_y), "
        "per_label_accuracy=per_label_accuracy, shape=list(probabilities.shape), "
        "saved=os.path.exists(saved_path), "
        "predicted=[label_names[int(row.argmax())] for row in probabilities], "
        "curves_png=curves_png.getvalue()[:8].hex())"),
    "02_pretrain_from_scratch.ipynb": (
        dict(CORPUS_DOCUMENTS=30, VOCAB_SIZE=1200, PRESET="L-2_H-128_A-2", MAX_SEQ_LENGTH=64,
             MAX_PREDICTIONS_PER_SEQ=10, DUPE_FACTOR=1, BATCH_SIZE=16, TRAIN_STEPS=20,
             MIXED_PRECISION=None),
        "dict(final_loss=final_loss, steps=steps, losses=[losses[s] for s in steps], "
        "instances=summary.instances, vocab=len(tokens))"),
    "03_export_and_serve.ipynb": (
        dict(NUM_EXAMPLES=48, EPOCHS=1, SEQ_LENGTH=16),
        "dict(max_difference=max_difference, served_names=served_names, "
        "rest_rows=len(rest_predictions))"),
    "04_question_answering_and_ner.ipynb": (
        dict(NUM_EXAMPLES=256, QA_SEQ_LENGTH=64, NER_SEQ_LENGTH=24, EPOCHS=4, BATCH_SIZE=16,
             LEARNING_RATE=3e-4),
        "dict(qa_scores=qa_scores, ner_scores=ner_scores, answers=len(answers), "
        "entities=entities)"),
    "05_sentence_embeddings.ipynb": (
        dict(SEQ_LENGTH=32),
        "dict(top_hits=top_hits, shape=list(corpus_embeddings.shape))"),
    "06_tf_hub_classify_text.ipynb": (
        dict(NUM_EXAMPLES=160, SEQ_LENGTH=24, BATCH_SIZE=16, EPOCHS=3, LEARNING_RATE=1e-4),
        "dict(accuracy=accuracy, reload_difference=reload_difference, "
        "serving_difference=serving_difference, scores=serving_results[:, 0].numpy().tolist(), "
        "keras=type(classifier_model).__module__, keras_bert_imported='keras_bert' in sys.modules, "
        "trainable=len(classifier_model.trainable_weights))"),
    "07_feature_based_classification.ipynb": (
        # Fine-tuned 2 epochs, not 3: 77 s instead of 99 s alone, 76.8% against 78.6% (the
        # check asks 68.2%).
        dict(NUM_TRAIN=800, NUM_TEST=500, SEQ_LENGTH=128, FINETUNE_NUM_TRAIN=320,
             BATCH_SIZE=16, EPOCHS=2, LEARNING_RATE=1e-4),
        "dict(feature_accuracy=feature_accuracy, finetuned_accuracy=finetuned_accuracy, "
        "majority_rate=majority_rate, test_size=len(test_y), "
        "shapes={name: list(f.shape) for name, f in train_features.items()}, "
        "methods=summary['method'].tolist())"),
    "08_serve_hugging_face_model.ipynb": (
        # The folder transformers saved, with the logits it recorded (no torch in CI).
        dict(HF_MODEL=os.path.join(REPO, "tests", "fixtures", "hf_heads", "seq_cls"),
             SEQ_LENGTH=32),
        "dict(max_difference=max_difference, int8_difference=int8_difference, "
        "same_labels=same_labels, round_trip_difference=round_trip_difference, "
        "labels=classifier.label_names, reference=reference_source)"),
    "09_distill_and_serve.ipynb": (
        # seq_length 128, the notebook's own: at 64 the reviews longer than a window (half of
        # them) are read as two or more windows each, and the run took 668 s (315 s before
        # classifiers read long texts as windows). 160 texts without labels, not 320: the two
        # distillations took 137 s instead of 171 s (alone on the 2-core machine), the students
        # scoring 74.0% and 72.8% against 73.8% and 73.8% (the check asks 65.2%). 2 epochs,
        # not 3, since the teacher reads MiniLM by mean pooling: teacher 78.0%, students 76.6%
        # and 73.2%, 297 s beside another test (443 s for 3 epochs of the [CLS] pooler, whose
        # teacher learned nothing in 2: 62.2%, the majority's rate).
        # One student, the 2-layer one: 182 s alone against about 375 s with the 3-layer
        # student too (2026-11-30). A 3-layer student's kept layers ([1, 3, 5]) are checked in
        # tests/finetuning/test_distillation.py, and docs/distillation.md's blocks distil one
        # (Python and CLI) and export it int8.
        dict(NUM_LABELLED=320, NUM_UNLABELED=160, NUM_TEST=500, SEQ_LENGTH=128, BATCH_SIZE=16,
             EPOCHS=2, LEARNING_RATE=1e-4, STUDENT_LAYERS=[2]),
        "dict(teacher_accuracy=teacher_accuracy, majority_rate=majority_rate, "
        "results=results, served=served, "
        "kept={k: s.distillation['kept_layers'] for k, s in students.items()})"),
    "10_long_texts.ipynb": (
        dict(NUM_TRAIN=16, NUM_TEST=16, EPOCHS=1, BATCH_SIZE=16, MAX_WINDOWS=16),
        "dict(accuracy=accuracy, long_reviews=int(long_reviews.sum()), test_size=len(test_y), "
        "train_size=len(train_y), longest_windows=longest_windows, "
        "max_difference=max_difference, refusal=refusal, "
        "served=served['class_names'][0].numpy().decode(), "
        "combinations={k: c.window_combination for k, c in classifiers.items()})"),
}


def test_notebooks_match_their_sources():
    assert build_notebooks.main(["--check"]) == 0, "run python colab/build_notebooks.py"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_shape(name):
    notebook = nbformat.read(os.path.join(COLAB, name), as_version=4)
    assert "colab.research.google.com/assets/colab-badge.svg" in notebook.cells[0].source
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code), "outputs not cleared"
    assert any("pip install" in c.source for c in code), "no install cell"
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    assert name in CI_RUNS, f"{name} has no shrunk CI run"
    # TensorFlow starts quietly (start_up_lines below) before the first import that loads it.
    source = "\n".join(c.source for c in code)
    quiet = re.search(r"start_tensorflow_quietly\(\)|os\.dup2\(", source)
    loads = re.search(r"^\s*(?:import|from) (?:(?:tensorflow|keras|tf_keras)\b|keras_bert\.)",
                      source, re.MULTILINE)
    assert quiet and (loads is None or quiet.start() < loads.start()), \
        "TensorFlow loads before the notebook starts it quietly"


# Per notebook, what a GPU run changes and adds to the report: the parameters that switch on its
# GPU path (02's default bf16, which CI turns off), and where its model's variables live (and,
# where it picks one, the strategy).
GPU_RUNS = {
    "01_finetune_classifier.ipynb": (
        {}, "strategy=type(strategy).__name__, "
            "device=classifier.trainable_weights[0].value.device"),
    "02_pretrain_from_scratch.ipynb": (
        {"MIXED_PRECISION": "bf16"},
        "strategy=type(strategy).__name__, policy=result.model.encoder.dtype_policy.name, "
        "device=result.model.trainable_weights[0].value.device"),
    "03_export_and_serve.ipynb": ({}, "device=classifier.trainable_weights[0].value.device"),
    "04_question_answering_and_ner.ipynb": (
        {}, "strategy=type(strategy).__name__, device=tagger.trainable_weights[0].value.device"),
    "05_sentence_embeddings.ipynb": (
        {}, "strategy=type(strategy).__name__, device=embedder.weights[0].value.device"),
    "06_tf_hub_classify_text.ipynb": (
        {}, "device=classifier_model.trainable_weights[0].device"),
    "07_feature_based_classification.ipynb": (
        {}, "strategy=type(strategy).__name__, device=embedder.weights[0].value.device"),
    "08_serve_hugging_face_model.ipynb": ({}, "device=classifier.weights[0].value.device"),
    "09_distill_and_serve.ipynb": ({}, "device=teacher.weights[0].value.device"),
    "10_long_texts.ipynb": ({}, "device=windows.weights[0].value.device"),
}


# What TensorFlow's C++ side writes while it starts (the absl notice, the CUDA stub and
# CPU-feature lines, the red "failed call to cuInit" without a GPU): no notebook shows it. They
# start TensorFlow with keras_bert.start_tensorflow_quietly() (06, which runs without keras-bert,
# the same way in its own lines).
START_UP_MARKERS = ("cuInit", "absl::InitializeLog", "cpu_feature_guard", "cudart_stub")


def start_up_lines(notebook) -> list[str]:
    """The lines of ``notebook``'s outputs (streams, results, errors) that hold one of
    ``START_UP_MARKERS``, each with its cell's index."""
    found = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            texts = [output.get("text", ""), *output.get("traceback", []),
                     *(value for value in output.get("data", {}).values()
                       if isinstance(value, str))]
            found += [f"cell {index}: {line}" for text in texts for line in text.splitlines()
                      if any(marker in line for marker in START_UP_MARKERS)]
    return found


def execute(name, work_dir, overrides=None, extra_report=""):
    """Runs notebook ``name`` shrunk (``CI_RUNS``, then ``overrides``) in ``work_dir`` and
    returns its report (``CI_RUNS``' expression, then ``extra_report``'s keywords); fails if an
    output shows TensorFlow's start-up lines."""
    shrunk, report = CI_RUNS[name]
    overrides = {**shrunk, **(overrides or {})}
    if extra_report:
        report = f"{report[:-1]}, {extra_report})"
    notebook = nbformat.read(os.path.join(COLAB, name), as_version=4)
    index = next(i for i, c in enumerate(notebook.cells)
                 if "parameters" in c.metadata.get("tags", []))
    injected = "\n".join([f"WORK_DIR = {str(work_dir)!r}"] +
                         [f"{key} = {value!r}" for key, value in overrides.items()])
    notebook.cells.insert(index + 1, nbformat.v4.new_code_cell(injected))
    notebook.cells.append(nbformat.v4.new_code_cell(
        f"import json as _json\nprint('CI-REPORT ' + _json.dumps({report}, default=float))"))
    # iopub_timeout: how long to wait for a cell's output after the kernel says it finished;
    # nbclient's 4 s default lost the CI-REPORT line of a notebook on a loaded 2-core machine.
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", iopub_timeout=60,
                            resources={"metadata": {"path": str(work_dir)}})
    client.execute()
    shown = start_up_lines(notebook)
    assert not shown, f"{name} shows TensorFlow's start-up lines:\n" + "\n".join(shown)
    # ipykernel sends stdout in chunks on a timer, so a printed line can arrive split over two
    # stream outputs, or after a progress bar's unfinished line: join them, find the marker
    # anywhere (a CI run on a loaded machine lost notebook 02's report, nothing else wrong).
    printed = "".join(output.get("text", "") for output in notebook.cells[-1].outputs
                      if output.get("output_type") == "stream" and output.get("name") == "stdout")
    for line in printed.splitlines():
        if "CI-REPORT " in line:
            return json.loads(line.split("CI-REPORT ", 1)[1])
    raise AssertionError(f"{name} did not report its results; its last cell gave "
                         f"{notebook.cells[-1].outputs!r}")


@pytest.fixture
def kernel_env(monkeypatch):
    # The kernel runs this interpreter; make the repo (and its serving/ package) importable.
    monkeypatch.setenv("PYTHONPATH", REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # No TF_CPP_MIN_LOG_LEVEL, as on Colab: the notebooks keep TensorFlow's start-up quiet.
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)


# The shrunk runs still learn their tasks (real MiniLM weights on real reviews, synthetic data,
# or pretraining from scratch): each check asserts what a user of the notebook would see, not
# just a value's range.

# The first 500 Fine Food test reviews: 311 "great" (62.2%), the training set's majority label.
FINE_FOOD_TEST_500_MAJORITY = 311 / 500
# "Clearly above the majority rate": an accuracy measured on 500 reviews has a standard error of
# about 2.2 points near 62%, so 6 points above is nearly 3 standard errors. The shrunk runs
# measured: fine-tuning on 320 reviews 77.6%, 74.6% and 77.6% (01 at seq 64 for 3 epochs,
# seeds 1 to 3), 78.0%, 76.6% and 78.0% (01 at seq 128 for 2 epochs, as now), and, at seq
# 128, 77.4% and 78.2% (07, seeds 1 and 3; 76.0% at seq 96, seed 1); the logistic regression
# on mean-pooled features of 800 reviews 72.2% at seq 128 (07; the same every run), 70.4% at
# seq 96 (at seq 64 68.6%, too close to the 68.2% required). 07 runs at 128: since classifiers
# read long texts as windows, its fine-tuning at 96 read half the reviews as two or more
# windows, and the notebook took 255 s against 151 s at 128.
MARGIN = 0.06


def check_01_finetune_classifier(result):
    assert result["train_size"] == 320 and result["test_size"] == 500
    assert bytes.fromhex(result["curves_png"]) == b"\x89PNG\r\n\x1a\n"  # the curves shown
    assert result["majority_label"] == "great"
    assert result["majority_rate"] == pytest.approx(FINE_FOOD_TEST_500_MAJORITY)
    assert result["test_accuracy"] >= result["majority_rate"] + MARGIN, result
    # It learned the rarer label too (always "great" gets none of the "other" reviews right):
    # 59%, 49% and 63% of them in the runs above.
    assert result["per_label_accuracy"]["other"] >= 0.3, result
    assert result["shape"] == [2, 2] and result["saved"]
    # A delighted review and a disappointed one.
    assert result["predicted"] == ["great", "other"]


def check_02_pretrain_from_scratch(result):
    assert result["vocab"] == 1200 and result["instances"] > 100
    assert result["steps"] and result["steps"][-1] == 20
    losses = result["losses"]
    # A fresh model guesses uniformly: MLM ln(vocab) plus NSP ln(2); then the loss falls.
    assert losses[0] == pytest.approx(math.log(1200) + math.log(2), abs=0.3)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.2, losses
    assert result["final_loss"] == pytest.approx(losses[-1], rel=1e-5)


def check_03_export_and_serve(result):
    assert result["max_difference"] < 1e-4, "served probabilities equal the Keras model's"
    assert set(result["served_names"]) <= {"negative", "positive"}
    assert result["rest_rows"] == 2


def check_04_question_answering_and_ner(result):
    dev_size = 256 // 5
    assert result["answers"] == dev_size
    # Three question kinds (city, year, company): guessing the kind is right a third of the time.
    assert result["qa_scores"]["exact_match"] >= 80.0, result["qa_scores"]
    assert result["ner_scores"]["gold_entities"] == dev_size * 3  # PER, ORG and LOC each
    assert result["ner_scores"]["f1"] >= 90.0, result["ner_scores"]
    text = "Grace Hopper works for Globex in Oslo."
    assert [(e["type"], e["text"]) for e in result["entities"]] == [
        ("PER", "Grace Hopper"), ("ORG", "Globex"), ("LOC", "Oslo")]
    for entity in result["entities"]:
        assert text[entity["start"]:entity["end"]] == entity["text"]


def check_05_sentence_embeddings(result):
    assert result["shape"] == [12, 384]
    assert "eating" in result["top_hits"]["A man is eating pasta."][0]
    assert "drums" in " ".join(result["top_hits"]["Someone is playing an instrument."][:2]) or \
        "violin" in " ".join(result["top_hits"]["Someone is playing an instrument."][:2])
    assert result["top_hits"]["Shares are falling."][0] in (
        "The stock market fell sharply today.", "Investors sold shares as prices dropped.")


def check_06_tf_hub_classify_text(result):
    assert not result["keras_bert_imported"], "the tutorial's side runs without keras_bert"
    assert result["keras"].startswith("tf_keras")
    assert result["trainable"] == 103 + 2, "MiniLM's 103 encoder variables and the Dense layer"
    assert result["accuracy"] >= 0.9, "fine-tuned through hub.KerasLayer, it learns the reviews"
    assert result["reload_difference"] < 1e-5 and result["serving_difference"] < 1e-5
    # "A wonderful, heartfelt film.", "Tedious and forgettable.", "The acting was superb!",
    # "I thought the script was clumsy."
    assert [score > 0.5 for score in result["scores"]] == [True, False, True, False]


def check_07_feature_based_classification(result):
    assert result["shapes"] == {"cls": [800, 384], "mean": [800, 384]}
    assert result["test_size"] == 500
    assert result["majority_rate"] == pytest.approx(FINE_FOOD_TEST_500_MAJORITY)
    accuracy = result["feature_accuracy"]
    # MiniLM was trained with mean pooling: its mean vector makes better features than [CLS]
    # (70.4% against 65.6% at seq 96; 78.7% against 74.5% from all 4,000 reviews at seq 128).
    assert accuracy["mean"] >= result["majority_rate"] + MARGIN, result
    assert accuracy["mean"] > accuracy["cls"], result
    assert result["finetuned_accuracy"] >= result["majority_rate"] + MARGIN, result
    assert len(result["methods"]) == 4


def check_08_serve_hugging_face_model(result):
    assert result["labels"] == ["neg", "neu", "pos"], "the head came with its id2label"
    assert result["reference"] == "the logits transformers recorded for this folder"
    assert result["max_difference"] < 1e-4, "served float32 = transformers' softmax"
    assert result["same_labels"] and result["int8_difference"] < 0.05, result
    assert result["round_trip_difference"] < 1e-6, "back in from the HF folder it wrote"


def check_09_distill_and_serve(result):
    assert result["majority_rate"] == pytest.approx(FINE_FOOD_TEST_500_MAJORITY)
    assert result["teacher_accuracy"] >= result["majority_rate"] + MARGIN, result
    assert result["kept"] == {"2": [2, 5]}
    results = result["results"]
    assert sorted(results) == ["2-layer student (int8)", "teacher (float32)"]
    accuracy, speed = results["2-layer student (int8)"]
    # The student learned the reviews, not the majority label, and serves faster.
    assert accuracy >= result["majority_rate"] + MARGIN / 2, result
    assert speed > results["teacher (float32)"][1], result
    assert set(result["served"]) <= {"great", "other"} and len(result["served"]) == 2


def check_10_long_texts(result):
    assert result["train_size"] == 16 and result["test_size"] == 16
    assert result["combinations"] == {"windows": "mean", "cut": "first"}
    # Some test reviews are longer than a window; the longest is read as several.
    assert result["long_reviews"] > 0 and result["longest_windows"] > 1, result
    for scores in result["accuracy"].values():
        assert 0.0 <= scores["long"] <= 1.0 and 0.0 <= scores["all"] <= 1.0
    # A few dozen reviews and one epoch teach nothing reliable (benchmarks/README.md,
    # "Long texts", has what the full data measures); what must hold is the export:
    assert result["max_difference"] < 1e-5, "the export answers a long review as predict"
    assert result["served"] in ("great", "other")
    assert "max_windows=16" in result["refusal"], result["refusal"]


CHECKS = {f"{check.__name__[len('check_'):]}.ipynb": check for check in (
    check_01_finetune_classifier, check_02_pretrain_from_scratch, check_03_export_and_serve,
    check_04_question_answering_and_ner, check_05_sentence_embeddings,
    check_06_tf_hub_classify_text, check_07_feature_based_classification,
    check_08_serve_hugging_face_model, check_09_distill_and_serve, check_10_long_texts)}


def test_every_notebook_has_a_check_and_a_gpu_run():
    assert sorted(CHECKS) == sorted(GPU_RUNS) == NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_shrunk(name, tmp_path, kernel_env):
    CHECKS[name](execute(name, tmp_path))
