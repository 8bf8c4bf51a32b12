"""A drop-in for the clients of transformers' TF exports: ``serving_default="transformers"``
gives the signatures transformers 4.57's ``TFBertFor*`` SavedModels have (read from real
exports: tests/fixtures/transformers_tf/signatures.json), through TF Serving's own graph-mode
loader, with transformers' outputs (tests/fixtures/hf_heads: what transformers computed) for the
same ids, and raw text beside them as ``serve_text``."""

import json
import pathlib

import numpy as np
import pytest

from keras_bert.cli import main
from tests.serving.graph_mode import GraphModeModel

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
HF = FIXTURES / "hf_heads"
TRANSFORMERS = json.loads((FIXTURES / "transformers_tf" / "signatures.json").read_text())
# The hf_heads folder of each TF class, and the outputs transformers computed there.
FOLDERS = {"TFBertModel": ("bert_model", ("last_hidden_state", "pooler_output")),
           "TFBertForSequenceClassification": ("seq_cls", ("logits",)),
           "TFBertForTokenClassification": ("token_cls", ("logits",)),
           "TFBertForQuestionAnswering": ("qa", ("start_logits", "end_logits")),
           "TFBertForMultipleChoice": ("multiple_choice", ("logits",))}
DTYPES = {1: "float32", 3: "int32", 9: "int64"}  # TensorFlow's DataType enum


def expected(folder) -> dict:
    with np.load(HF / folder / "expected.npz", allow_pickle=True) as z:
        return {k: z[k] for k in z.files}


def described(tensor_info) -> list:
    """[dtype, shape] as signatures.json has them (None for an unknown size)."""
    return [DTYPES[tensor_info.dtype],
            [None if d.size < 0 else d.size for d in tensor_info.tensor_shape.dim]]


def same_layout(ours: list, theirs: list) -> bool:
    """The same dtype and rank, and the same size wherever both are static (our multiple-choice
    model fixes the number of choices, and the fixtures' label counts differ)."""
    return ours[0] == theirs[0] and len(ours[1]) == len(theirs[1])


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    base = tmp_path_factory.mktemp("models")
    for folder, _ in FOLDERS.values():
        assert main(["export", str(HF / folder), str(base), "--model_name", folder,
                     "--serving_default", "transformers"]) == 0
    return base


@pytest.mark.parametrize("tf_class", sorted(FOLDERS))
def test_the_signatures_are_transformers_and_give_its_outputs(exported, tf_class):
    folder, outputs = FOLDERS[tf_class]
    served = GraphModeModel(str(exported / folder / "1"))
    for key in ("serving_default", "int64_serving"):
        theirs = TRANSFORMERS["signatures"][tf_class][key]
        ours = served.signature_defs[key]
        assert sorted(ours.inputs) == sorted(theirs["inputs"])
        assert sorted(ours.outputs) == sorted(theirs["outputs"])
        for kind in ("inputs", "outputs"):
            for name, layout in theirs[kind].items():
                assert same_layout(described(getattr(ours, kind)[name]), layout), (key, name)
    reference = expected(folder)
    mask = reference["attention_mask"].astype(bool)
    for key, dtype in (("serving_default", np.int32), ("int64_serving", np.int64)):
        result = served.run(key, **{name: reference[name].astype(dtype) for name in
                                    ("input_ids", "attention_mask", "token_type_ids")})
        for name in outputs:
            want, got = reference[name], result[name]
            if got.shape[:mask.ndim] == mask.shape:  # per position: the real ones
                want, got = want[mask], got[mask]
            np.testing.assert_allclose(got, want, atol=1e-5, err_msg=f"{tf_class} {name}")
    assert "serve_text" in served.signature_defs and "serve_ids" in served.signature_defs


def test_raw_text_is_served_beside_them(exported):
    reference = expected("seq_cls")
    served = GraphModeModel(str(exported / "seq_cls" / "1"))
    result = served.run("serve_text",
                        text=np.array([t.encode() for t in reference["texts"]], object))
    logits = reference["logits"]
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(result["probabilities"], probabilities, atol=1e-4)
    assert "classify" in served.signature_defs  # TF Serving's Classify API stays too


def test_the_command_line_and_what_it_refuses(tmp_path, capsys):
    assert main(["export", str(HF / "seq_cls_multi_label"), str(tmp_path), "--model_name", "m",
                 "--serving_default", "transformers"]) == 0
    reference = expected("seq_cls_multi_label")
    served = GraphModeModel(str(tmp_path / "m" / "1")).run(
        "serving_default", **{name: reference[name].astype(np.int32)
                              for name in ("input_ids", "attention_mask", "token_type_ids")})
    np.testing.assert_allclose(served["logits"], reference["logits"], atol=1e-5)  # not sigmoid
    assert main(["export", str(HF / "sentence_transformers"), str(tmp_path), "--model_name",
                 "e", "--serving_default", "transformers"]) == 2
    assert "no TF class of transformers exports what a BertEmbedder does" in \
        capsys.readouterr().err
    assert main(["export", str(HF / "seq_cls"), str(tmp_path / "hub"), "--tf_hub",
                 "--serving_default", "transformers"]) == 2
    assert "--serving_default do not apply to --tf_hub" in capsys.readouterr().err


def test_a_tf_model_h5_folder_answers_its_old_client_with_its_logits(tmp_path):
    """The issue's case: a TFBertForSequenceClassification folder (tf_model.h5, written by
    transformers 4.57) exported with the old signatures answers a client's ids with the logits
    TFBertForSequenceClassification computed, on TF Serving's loader."""
    folder = FIXTURES / "tf_h5" / "seq_cls"
    assert main(["export", str(folder), str(tmp_path), "--model_name", "tf_sentiment",
                 "--serving_default", "transformers"]) == 0
    with np.load(folder / "expected.npz", allow_pickle=True) as z:
        reference = {k: z[k] for k in z.files}
    served = GraphModeModel(str(tmp_path / "tf_sentiment" / "1")).run(
        "serving_default", **{name: reference[name].astype(np.int32)
                              for name in ("input_ids", "attention_mask", "token_type_ids")})
    np.testing.assert_allclose(served["logits"], reference["logits"], atol=1e-5)
