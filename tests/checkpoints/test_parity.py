"""Parity on real weights: our encoder vs Hugging Face transformers' BertModel (recorded fixture),
through the HF directory and through a Google TF1 checkpoint that the test writes itself."""

import json
import os

import numpy as np
import tensorflow as tf
from safetensors.numpy import load_file

from keras_bert import BertEncoder

SEQ_TOL = 1e-4
POOLED_TOL = 1e-5


def _inputs(ref):
    return {"input_word_ids": ref["input_ids"], "input_mask": ref["attention_mask"],
            "input_type_ids": ref["token_type_ids"]}


def _assert_matches(encoder, ref, form):
    out = encoder(_inputs(ref))
    valid = ref["attention_mask"].astype(bool)
    seq = np.asarray(out["sequence_output"])
    seq_err = np.abs(seq - ref[f"sequence_output_{form}"])[valid].max()
    pooled_err = np.abs(np.asarray(out["pooled_output"]) - ref[f"pooled_output_{form}"]).max()
    assert seq_err < SEQ_TOL, f"sequence_output differs by {seq_err:.2e}"
    assert pooled_err < POOLED_TOL, f"pooled_output differs by {pooled_err:.2e}"
    # The last entry of encoder_outputs is the sequence output.
    np.testing.assert_array_equal(np.asarray(out["encoder_outputs"][-1]), seq)
    return seq_err, pooled_err


def test_reference_batch_mixes_singles_pairs_and_padding(minilm_reference):
    types, mask = minilm_reference["token_type_ids"], minilm_reference["attention_mask"]
    assert (types.max(axis=1) == 0).sum() >= 2, "some rows are single sentences"
    assert (types.max(axis=1) == 1).sum() >= 2, "some rows are pairs"
    assert (mask.sum(axis=1) < mask.shape[1]).all(), "every row has padding"


def test_hf_directory_matches_transformers(minilm_dir, minilm_reference):
    encoder = BertEncoder.from_pretrained(minilm_dir)
    assert encoder.bert_config.hidden_act == "gelu_exact"
    _assert_matches(encoder, minilm_reference, "erf")


# The test's own name map (Google TF1 <- HF), written out independently of keras_bert.checkpoints.
def _google_name(hf_key):
    name = hf_key.replace("encoder.layer.", "encoder/layer_").replace(".", "/")
    name = name.replace("LayerNorm/weight", "LayerNorm/gamma").replace("LayerNorm/bias", "LayerNorm/beta")
    name = name.replace("_embeddings/weight", "_embeddings")
    name = name.replace("/weight", "/kernel")
    return "bert/" + name


def write_tf1_checkpoint_like_google(hf_dir, out_dir, hidden_act="gelu"):
    """A Google-style directory written with tf.compat.v1.train.Saver, as google-research/bert did."""
    weights = load_file(os.path.join(hf_dir, "model.safetensors"))
    with open(os.path.join(hf_dir, "config.json")) as f:
        hf_config = json.load(f)
    os.makedirs(out_dir)
    graph = tf.Graph()
    with graph.as_default():
        variables, feeds = [], {}
        for key, value in weights.items():
            if key.endswith("position_ids"):
                continue
            if key.endswith(".weight") and "embeddings" not in key and "LayerNorm" not in key:
                value = value.T  # torch Linear [out, in] -> TF kernel [in, out]
            placeholder = tf.compat.v1.placeholder(tf.float32, value.shape)
            variables.append(tf.compat.v1.Variable(placeholder, name=_google_name(key)))
            feeds[placeholder] = value
        step = tf.compat.v1.train.get_or_create_global_step()
        # Adam slots as a training run leaves them: tolerated on load.
        slot = tf.compat.v1.Variable(tf.zeros([2]), name="bert/pooler/dense/bias/adam_m")
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer(), feed_dict=feeds)
            saver.save(session, os.path.join(out_dir, "bert_model.ckpt"), write_meta_graph=False)
    del step, slot
    config = {k: hf_config[k] for k in (
        "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
        "max_position_embeddings", "type_vocab_size", "initializer_range")}
    config["hidden_act"] = hidden_act
    with open(os.path.join(out_dir, "bert_config.json"), "w") as f:
        json.dump(config, f)


def test_google_tf1_checkpoint_matches_transformers_with_tanh_gelu(minilm_dir, minilm_reference,
                                                                    tmp_path):
    # Google's bert_config.json "gelu" is the tanh approximation, so the reference for a
    # TF1 directory is transformers run with hidden_act="gelu_new".
    ckpt_dir = str(tmp_path / "google")
    write_tf1_checkpoint_like_google(minilm_dir, ckpt_dir)
    encoder = BertEncoder.from_pretrained(ckpt_dir)
    assert encoder.bert_config.hidden_act == "gelu"
    _assert_matches(encoder, minilm_reference, "tanh")


def test_gelu_forms_really_differ_on_this_batch(minilm_reference):
    # Guards the two tests above: the erf and tanh references are distinguishable.
    diff = np.abs(minilm_reference["sequence_output_erf"] - minilm_reference["sequence_output_tanh"])
    assert diff[minilm_reference["attention_mask"].astype(bool)].max() > 10 * SEQ_TOL
