"""Google's character classes for BERT tokenization, and the lookup tables derived from them.

The Python tokenizer and the in-graph preprocessor both take every per-character decision from this
module, computed from the running Python's ``unicodedata``, so that they agree character for
character. The classes follow google-research/bert's ``tokenization.py``:

- control: categories Cc and Cf, except tab, newline and carriage return; deleted, as are U+0000
  and U+FFFD.
- whitespace: space, tab, newline, carriage return and category Zs; each becomes a space. Google
  then splits with ``str.split()``, which also splits at U+2028 and U+2029, so those count too.
- punctuation: every non-alphanumeric printable ASCII character (so ``$``, ``^`` and `````) and
  every character of a P* category.
- CJK: the code-point ranges of Google's ``_is_chinese_char``.
"""

from __future__ import annotations

import array
import bisect
import functools
import unicodedata

MAX_CODE_POINT = 0x10FFFF

# Google's CJK ideograph ranges (inclusive), from tokenization.py's _is_chinese_char.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# Range starts and (exclusive) ends, interleaved and sorted, for bisection.
_CJK_BOUNDS = sorted(b for start, end in CJK_RANGES for b in (start, end + 1))

# Case classes of Python's str.lower() final-sigma rule (see case_class).
CASE_IGNORABLE, CASED, UNCASED = 0, 1, 2

CAPITAL_SIGMA, SMALL_SIGMA, FINAL_SIGMA = "\u03a3", "\u03c3", "\u03c2"


def is_cjk(code_point: int) -> bool:
    """Whether a code point is a CJK ideograph by Google's ranges (isolated as its own word)."""
    return bisect.bisect_right(_CJK_BOUNDS, code_point) % 2 == 1


def is_control(char: str) -> bool:
    """Whether Google's cleaning deletes it: Cc and Cf except \\t \\n \\r, U+0000, U+FFFD."""
    if char in "\t\n\r":
        return False
    return char in "\x00\ufffd" or unicodedata.category(char) in ("Cc", "Cf")


def is_whitespace(char: str) -> bool:
    """Whether the character separates words after cleaning (Google's whitespace or str.split's)."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs" or char.isspace()


def is_punctuation(char: str) -> bool:
    """Whether the character is punctuation by Google's rule (ASCII symbols or a P* category)."""
    code_point = ord(char)
    if 33 <= code_point <= 47 or 58 <= code_point <= 64 or 91 <= code_point <= 96 \
            or 123 <= code_point <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def strip_accents(text: str) -> str:
    """NFD-decomposes text and drops the nonspacing marks (category Mn), as Google does."""
    return "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) != "Mn")


def case_class(char: str) -> int:
    """How Python's ``str.lower()`` sees a character when it decides on a final sigma.

    ``"Σ".lower()`` gives ``"ς"`` when the sigma follows a cased letter and no cased letter follows
    it, skipping case-ignorable characters on both sides. ``unicodedata`` does not expose the Cased
    and Case_Ignorable properties, so we read them back from ``lower()`` itself: that is exactly
    the data the Python tokenizer's lower-casing uses.

    Args:
        char: a single character.

    Returns:
        CASED (cased and not case-ignorable), CASE_IGNORABLE, or UNCASED.
    """
    if (char + CAPITAL_SIGMA).lower().endswith(FINAL_SIGMA):
        return CASED
    if ("A" + char + CAPITAL_SIGMA).lower().endswith(FINAL_SIGMA):
        return CASE_IGNORABLE
    return UNCASED


def normalized_char(code_point: int, char: str, lower_case: bool) -> str:
    """What Google's BasicTokenizer turns one character into, spaces marking word breaks: ""
    (control), " " (whitespace), a CJK ideograph or punctuation between spaces, and when
    ``lower_case`` the character lower-cased without accents (Python's ``str.lower``, NFD, no
    Mn). The in-graph normalizers (``graph_normalizer``, the OpenVINO tokenizer) map each
    character through it.

    >>> normalized_char(0xC9, "\u00c9", lower_case=True), normalized_char(0x21, "!", False)
    ('e', ' ! ')
    """
    if is_control(char):
        return ""
    if is_whitespace(char):
        return " "
    char_out = strip_accents(char.lower()) if lower_case else char
    if is_cjk(code_point):
        return f" {char_out} "
    return "".join(f" {c} " if is_punctuation(c) else c for c in char_out)


@functools.cache
def _assigned_code_points() -> array.array:
    """Every code point that some table must look at: all but the unassigned (Cn), private-use
    (Co) and surrogate ones, which no step changes, plus the CJK ranges, which include some
    unassigned code points."""
    return array.array("I", (cp for cp in range(MAX_CODE_POINT + 1)
                             if unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs")
                             or is_cjk(cp)))


def assigned_chars():
    """Yields (code point, character) for the code points that tokenization can change."""
    for code_point in _assigned_code_points():
        yield code_point, chr(code_point)


@functools.cache
def cleaning_table(isolate_punctuation: bool) -> dict[int, str | None]:
    """A ``str.translate`` table for Google's cleaning and CJK step.

    Control characters map to None (deleted), whitespace to a space, CJK ideographs (and, when
    ``isolate_punctuation``, punctuation) to themselves between spaces so that they become words of
    their own. Other characters are absent, i.e. unchanged.
    """
    table: dict[int, str | None] = {}
    for code_point, char in assigned_chars():
        if is_control(char):
            table[code_point] = None
        elif is_whitespace(char):
            table[code_point] = " "
        elif is_cjk(code_point) or (isolate_punctuation and is_punctuation(char)):
            table[code_point] = f" {char} "
    return table


@functools.cache
def accent_and_punctuation_table() -> dict[int, str | None]:
    """A ``str.translate`` table for NFD text: drops marks (Mn) and isolates punctuation."""
    table: dict[int, str | None] = {}
    for code_point, char in assigned_chars():
        if unicodedata.category(char) == "Mn":
            table[code_point] = None
        elif is_punctuation(char):
            table[code_point] = f" {char} "
    return table
