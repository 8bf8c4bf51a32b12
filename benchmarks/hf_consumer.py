"""Loads a Hugging Face model folder exactly as a transformers user would, runs it on given
inputs and writes what it saw: the real consumer of the folders keras-bert writes.

Benchmark-only: run it with the torch venv's Python (torch, transformers, sentence-transformers;
none of them is a dependency of keras-bert or of its CI), never from the library.

    /work/main/benchmarks/.venvs/torch/bin/python benchmarks/hf_consumer.py \\
        --folder tests/fixtures/hf_heads/seq_cls --inputs inputs.json --output outputs.json

--inputs is a JSON object, one of:
    {"texts": [...]}                              tokenized by AutoTokenizer.from_pretrained(folder)
    {"texts": [...], "text_pairs": [...]}         pairs (classifiers, question answering)
    {"texts": [...], "choices": [[...], ...]}     multiple choice: each text with each of its
                                                  choices, ids [batch, num_choices, seq]
    {"input_ids": [[...]], "attention_mask": ..., "token_type_ids": ...}   ids as given

The model class is the Auto class of config.json's ``architectures`` (BertForSequenceClassification
-> AutoModelForSequenceClassification, ..., BertModel -> AutoModel), loaded with
``from_pretrained(folder, output_loading_info=True)``; any missing, unexpected or mismatched key
is listed on stderr and the exit status is 1. Texts are padded to the longest. The output JSON
holds the auto class, the ids used and every output tensor (``logits``; ``start_logits`` and
``end_logits``; ``prediction_logits`` and ``seq_relationship_logits``; ``last_hidden_state`` and
``pooler_output``), plus ``probabilities`` (softmax) and ``labels`` (id2label of the argmax) for
single-label classifiers. A sentence-transformers folder (modules.json) is also run through
``SentenceTransformer(folder).encode(texts)``: ``sentence_embedding``.

With --tokenizer_only the folder needs only tokenizer files: the output holds the ids.
Nothing is downloaded: the hub is switched off (HF_HUB_OFFLINE=1).
"""

import argparse
import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

# config.json's architectures[0] suffix -> the Auto class a user would pick.
AUTO_CLASSES = {
    "ForSequenceClassification": "AutoModelForSequenceClassification",
    "ForTokenClassification": "AutoModelForTokenClassification",
    "ForQuestionAnswering": "AutoModelForQuestionAnswering",
    "ForMultipleChoice": "AutoModelForMultipleChoice",
    "ForPreTraining": "AutoModelForPreTraining",
    "ForMaskedLM": "AutoModelForMaskedLM",
    "Model": "AutoModel",
}
ID_NAMES = ("input_ids", "attention_mask", "token_type_ids")


def auto_class_name(architecture: str) -> str:
    for suffix, name in AUTO_CLASSES.items():
        if architecture.endswith(suffix):
            return name
    raise SystemExit(f"config.json names the architecture {architecture!r}, which has no Auto "
                     f"class here (known: *{', *'.join(AUTO_CLASSES)})")


def tokenize(folder: str, inputs: dict) -> dict[str, np.ndarray]:
    """The int64 ids [batch, seq] (or [batch, num_choices, seq]) for ``inputs``."""
    if "input_ids" in inputs:
        ids = {name: np.asarray(inputs[name], np.int64) for name in ID_NAMES if name in inputs}
        ids.setdefault("attention_mask", np.ones_like(ids["input_ids"]))
        ids.setdefault("token_type_ids", np.zeros_like(ids["input_ids"]))
        return ids
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    texts = inputs["texts"]
    if "choices" in inputs:
        choices = inputs["choices"]
        num_choices = len(choices[0])
        if any(len(row) != num_choices for row in choices) or len(choices) != len(texts):
            raise SystemExit("'choices' must give each text the same number of choices")
        batch = tokenizer([t for t, row in zip(texts, choices) for _ in row],
                          [c for row in choices for c in row], padding="longest",
                          return_tensors="np")
        return {name: batch[name].astype(np.int64).reshape(len(texts), num_choices, -1)
                for name in ID_NAMES}
    batch = tokenizer(texts, inputs.get("text_pairs"), padding="longest", return_tensors="np")
    return {name: batch[name].astype(np.int64) for name in ID_NAMES}


def load_checked(folder: str, auto_class: str):
    """The model, in eval mode; exits with status 1 listing any key that did not load."""
    model, info = getattr(transformers, auto_class).from_pretrained(
        folder, output_loading_info=True)
    problems = [f"{kind}: {key}" for kind in ("missing_keys", "unexpected_keys",
                                              "mismatched_keys")
                for key in sorted(map(str, info.get(kind) or ()))]
    problems += [f"error: {message}" for message in info.get("error_msgs") or ()]
    if problems:
        print(f"{auto_class}.from_pretrained({folder!r}) did not load cleanly:", file=sys.stderr)
        print("\n".join("  " + p for p in problems), file=sys.stderr)
        raise SystemExit(1)
    model.eval()
    return model


def run_model(folder: str, ids: dict[str, np.ndarray]) -> dict:
    config = transformers.AutoConfig.from_pretrained(folder)
    architecture = (config.architectures or ["BertModel"])[0]
    auto_class = auto_class_name(architecture)
    model = load_checked(folder, auto_class)
    with torch.no_grad():
        outputs = model(**{name: torch.from_numpy(value) for name, value in ids.items()})
    result = {"architecture": architecture, "auto_class": auto_class}
    result.update({name: value.numpy().tolist() for name, value in outputs.items()
                   if isinstance(value, torch.Tensor)})
    single_label = (auto_class == "AutoModelForSequenceClassification" and config.num_labels > 1
                    and config.problem_type in (None, "single_label_classification"))
    if single_label:
        logits = outputs["logits"]
        result["probabilities"] = torch.softmax(logits, dim=-1).numpy().tolist()
        result["labels"] = [config.id2label[int(i)] for i in logits.argmax(-1)]
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", required=True, help="the Hugging Face model folder")
    parser.add_argument("--inputs", required=True, help="a JSON file of texts or ids")
    parser.add_argument("--output", required=True, help="where to write the JSON of outputs")
    parser.add_argument("--tokenizer_only", action="store_true",
                        help="only tokenize the texts (the folder needs no model)")
    args = parser.parse_args(argv)
    with open(args.inputs, encoding="utf-8") as f:
        inputs = json.load(f)
    ids = tokenize(args.folder, inputs)
    result = {"transformers": transformers.__version__,
              **{name: value.tolist() for name, value in ids.items()}}
    if not args.tokenizer_only:
        result.update(run_model(args.folder, ids))
        if os.path.exists(os.path.join(args.folder, "modules.json")):
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(args.folder, device="cpu")
            result["sentence_embedding"] = model.encode(
                inputs["texts"], convert_to_numpy=True).tolist()
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
