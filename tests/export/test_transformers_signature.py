"""A drop-in for the clients of transformers' TF exports: ``serving_default="transformers"``
gives the signatures transformers 4.57's ``TFBertFor*`` SavedModels have (read from real
exports: tests/fixtures/transformers_tf/signatures.json), through TF Serving's own graph-mode
loader, with transformers' outputs (tests/fixtures/hf_heads and, for the issue's
TFBertForSequenceClassification folder, tests/fixtures/tf_h5: what transformers computed) for
the same ids, raw text beside them as ``serve_text``, and our own outputs on ids as
``serve_ids``. ``predict --server`` picks ``serve_text`` from such an export's signatures."""

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import json_format
from tensorflow_serving.apis import get_model_metadata_pb2

from keras_bert.cli import main
from keras_bert.export.client import _text_signature
from tests.serving.graph_mode import GraphModeModel

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"
HF = FIXTURES / "hf_heads"
TRANSFORMERS = json.loads((FIXTURES / "transformers_tf" / "signatures.json").read_text())
# The folder of each TF class (the export's model name is the folder's name), and the outputs
# transformers computed there. The sequence classifier is the case: a tf_model.h5
# folder that transformers 4.57's TFBertForSequenceClassification wrote, with its logits.
FOLDERS = {"TFBertModel": (HF / "bert_model", ("last_hidden_state", "pooler_output")),
           "TFBertForSequenceClassification": (FIXTURES / "tf_h5" / "seq_cls", ("logits",)),
           "TFBertForTokenClassification": (HF / "token_cls", ("logits",)),
           "TFBertForQuestionAnswering": (HF / "qa", ("start_logits", "end_logits")),
           "TFBertForMultipleChoice": (HF / "multiple_choice", ("logits",))}
DTYPES = {1: "float32", 3: "int32", 9: "int64"}  # TensorFlow's DataType enum


def expected(folder: pathlib.Path) -> dict:
    with np.load(folder / "expected.npz", allow_pickle=True) as z:
        return {k: z[k] for k in z.files}


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def ids_only_model(path: str) -> None:
    """A SavedModel version whose one signature takes int32 ids, no text."""
    module = tf.Module()
    module.serve = tf.function(lambda input_ids: {"doubled": input_ids * 2},
                               input_signature=[tf.TensorSpec([None, None], tf.int32,
                                                              name="input_ids")])
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})


def metadata_signatures(served: GraphModeModel) -> dict:
    """The {name: SignatureDef as JSON} that ``ServingClient.metadata`` gets for a served model:
    the SignatureDefs of its graph-mode load (all of them, as the server lists them), packed in
    a SignatureDefMap as GetModelMetadata answers, and read back as the client reads it."""
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    for name, signature in served.signature_defs.items():
        signature_map.signature_def[name].CopyFrom(signature)
    return json_format.MessageToDict(signature_map,
                                     preserving_proto_field_name=True)["signature_def"]


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
        assert main(["export", str(folder), str(base), "--model_name", folder.name,
                     "--serving_default", "transformers"]) == 0
    return base


@pytest.fixture(scope="module")
def loaded(exported):
    """Each export, loaded once as TF Serving loads it, by its folder's name."""
    cache = {}

    def load(name: str) -> GraphModeModel:
        if name not in cache:
            cache[name] = GraphModeModel(str(exported / name / "1"))
        return cache[name]

    return load


@pytest.mark.parametrize("tf_class", sorted(FOLDERS))
def test_the_signatures_are_transformers_and_give_its_outputs(loaded, tf_class):
    folder, outputs = FOLDERS[tf_class]
    served = loaded(folder.name)
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


def test_raw_text_is_served_beside_them(loaded):
    folder, _ = FOLDERS["TFBertForSequenceClassification"]
    reference = expected(folder)
    served = loaded(folder.name)
    result = served.run("serve_text",
                        text=np.array([t.encode() for t in reference["texts"]], object))
    np.testing.assert_allclose(result["probabilities"], softmax(reference["logits"]), atol=1e-4)
    assert "classify" in served.signature_defs  # TF Serving's Classify API stays too


def test_serve_ids_gives_a_taggers_and_a_span_models_outputs(loaded):
    """serve_ids (our names in, our outputs out) beside transformers' signatures: a tagger's
    probabilities are the softmax of transformers' logits, a span model's start_logits
    transformers' own, on the real positions."""
    for tf_class, output, reference_of in (
            ("TFBertForTokenClassification", "probabilities", lambda r: softmax(r["logits"])),
            ("TFBertForQuestionAnswering", "start_logits", lambda r: r["start_logits"])):
        folder, _ = FOLDERS[tf_class]
        reference = expected(folder)
        inputs = {"input_word_ids": reference["input_ids"].astype("int32"),
                  "input_mask": reference["attention_mask"].astype("int32"),
                  "input_type_ids": reference["token_type_ids"].astype("int32")}
        served = loaded(folder.name).run("serve_ids", **inputs)
        mask = reference["attention_mask"].astype(bool)
        np.testing.assert_allclose(served[output][mask], reference_of(reference)[mask],
                                   atol=1e-4, err_msg=folder.name)


def test_predict_server_picks_serve_text_and_names_it_when_refusing(loaded, tmp_path):
    """The choice ``predict --server`` makes from a served model's metadata
    (``ServingClient.text_signature``), on this module's sequence classifier export as the
    server's metadata gives its signatures (tests/serving/test_text_signature.py asks a running
    server): raw text goes to serve_text, named or not; serving_default, which takes
    transformers' ids, or a missing name fails naming serve_text; a model whose signatures take
    no text fails listing them."""
    signatures = metadata_signatures(
        loaded(FOLDERS["TFBertForSequenceClassification"][0].name))
    assert _text_signature("transformers", signatures, "") == "serve_text"
    assert _text_signature("transformers", signatures, "serve_text") == "serve_text"
    with pytest.raises(ValueError) as error:
        _text_signature("transformers", signatures, "serving_default")
    assert str(error.value) == (
        "signature 'serving_default' of model 'transformers' takes attention_mask (int32), "
        "input_ids (int32), token_type_ids (int32), not raw text; serve_text takes raw text")
    with pytest.raises(ValueError) as error:
        _text_signature("transformers", signatures, "nope")
    assert "\n" not in str(error.value)
    assert "model 'transformers' has no signature 'nope' (it has " in str(error.value)
    assert str(error.value).endswith("; serve_text takes raw text")
    ids_only_model(str(tmp_path / "ids" / "1"))
    with pytest.raises(ValueError) as error:
        _text_signature("ids", metadata_signatures(GraphModeModel(str(tmp_path / "ids" / "1"))),
                        "")
    assert str(error.value) == ("no signature of model 'ids' takes raw text (a string input "
                                "'text'): serving_default takes input_ids (int32)")


def test_the_command_line_and_what_it_refuses(tmp_path, capsys):
    assert main(["export", str(HF / "seq_cls_multi_label"), str(tmp_path), "--model_name", "m",
                 "--serving_default", "transformers"]) == 0
    reference = expected(HF / "seq_cls_multi_label")
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
