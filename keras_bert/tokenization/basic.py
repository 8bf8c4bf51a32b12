"""Google's BasicTokenizer in Python: clean, isolate CJK, lower-case and strip accents, split
punctuation; fast whole-string version plus a version that tracks character offsets.

The fast version works on the whole text with ``str.translate``, ``lower`` and NFD; it gives what
Google's per-word loop gives, because every step maps characters independently except
``lower()``'s final sigma and NFD's mark reordering, and neither looks past a space.
"""

from __future__ import annotations

import dataclasses
import unicodedata

from keras_bert.tokenization import chars


def decode_text(text: str | bytes) -> str:
    """Returns ``text`` as str; bytes are decoded as UTF-8 with invalid bytes replaced by U+FFFD.

    The cleaning step then deletes U+FFFD, so an invalid byte vanishes, as with Google's
    ``convert_to_unicode`` (which decodes with ``errors="ignore"``). The in-graph preprocessor
    decodes the same way.
    """
    if isinstance(text, bytes):
        return text.decode("utf-8", errors="replace")
    if isinstance(text, str):
        return text
    raise TypeError(f"expected str or bytes text, got {type(text).__name__}")


def basic_tokenize(text: str, lower_case: bool) -> list[str]:
    """Splits text into Google's basic-tokenizer words (before WordPiece).

    Args:
        text: the input text.
        lower_case: lower-case and strip accents (uncased models).

    >>> basic_tokenize("Héllo, WORLD!", lower_case=True)
    ['hello', ',', 'world', '!']
    """
    if not lower_case:
        return text.translate(chars.cleaning_table(isolate_punctuation=True)).split()
    text = text.translate(chars.cleaning_table(isolate_punctuation=False)).lower()
    if not text.isascii():
        text = unicodedata.normalize("NFD", text)
    return text.translate(chars.accent_and_punctuation_table()).split()


@dataclasses.dataclass(frozen=True)
class Word:
    """A basic-tokenizer word with, per character, its span in the original text.

    Args:
        text: the normalized word.
        starts: for each character of ``text``, where its source character starts.
        ends: for each character of ``text``, where its source character ends (exclusive).
    """
    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]


def basic_tokenize_with_offsets(text: str, lower_case: bool, base: int = 0) -> list[Word]:
    """Like ``basic_tokenize``, but keeps each word's character offsets into ``text``.

    A character that normalizes to several (``ﬁ`` stays one, ``İ`` lower-cases to two) gives them
    all its own span. In the rare word where NFD reorders marks across characters, every character
    gets the span of the whole whitespace-delimited chunk.

    Args:
        text: the input text.
        lower_case: lower-case and strip accents (uncased models).
        base: added to every offset (the position of ``text`` in a larger string).

    >>> [(w.text, w.starts[0], w.ends[-1]) for w in basic_tokenize_with_offsets("Ab, c", True)]
    [('ab', 0, 2), (',', 2, 3), ('c', 4, 5)]
    """
    words: list[Word] = []
    for chunk, positions in _whitespace_chunks(text, base):
        if lower_case:
            pieces = _normalize_chunk(chunk, positions)
        else:
            pieces = [(c, p, p + 1) for c, p in zip(chunk, positions)]
        current: list[tuple[str, int, int]] = []
        for piece in pieces:
            if not chars.is_punctuation(piece[0]):
                current.append(piece)
                continue
            if current:
                words.append(_make_word(current))
                current = []
            words.append(_make_word([piece]))
        if current:
            words.append(_make_word(current))
    return words


def _make_word(pieces: list[tuple[str, int, int]]) -> Word:
    return Word("".join(c for c, _, _ in pieces), tuple(s for _, s, _ in pieces),
                tuple(e for _, _, e in pieces))


def _whitespace_chunks(text: str, base: int):
    """Yields (chunk, source positions) for Google's whitespace-delimited tokens after cleaning
    and CJK isolation; a CJK ideograph is a chunk of its own."""
    table = chars.cleaning_table(isolate_punctuation=False)
    chunk: list[str] = []
    positions: list[int] = []
    for position, char in enumerate(text, start=base):
        mapped = table.get(ord(char), char)
        if mapped is None:
            continue
        if mapped == char and char != " ":
            chunk.append(char)
            positions.append(position)
            continue
        if chunk:
            yield "".join(chunk), positions
            chunk, positions = [], []
        if mapped != " ":
            yield char, [position]
    if chunk:
        yield "".join(chunk), positions


def _normalize_chunk(chunk: str, positions: list[int]) -> list[tuple[str, int, int]]:
    """Lower-cases and strips accents of one whitespace chunk, char by char with spans."""
    lowered = [_lower_in_context(chunk, i) for i in range(len(chunk))]
    decomposed = [unicodedata.normalize("NFD", piece) for piece in lowered]
    exact = chars.strip_accents(chunk.lower())
    pieces = [(c, p, p + 1) for piece, p in zip(decomposed, positions) for c in piece
              if unicodedata.category(c) != "Mn"]
    if "".join(c for c, _, _ in pieces) == exact:
        return pieces
    # NFD moved a mark across characters: fall back to the chunk's span for every character.
    start, end = positions[0], positions[-1] + 1
    return [(c, start, end) for c in exact]


def _lower_in_context(chunk: str, index: int) -> str:
    """``chunk[index].lower()``, with the capital sigma resolved as ``chunk.lower()`` does."""
    char = chunk[index]
    if char != chars.CAPITAL_SIGMA:
        return char.lower()
    before = next((chars.case_class(c) for c in reversed(chunk[:index])
                   if chars.case_class(c) != chars.CASE_IGNORABLE), None)
    after = next((chars.case_class(c) for c in chunk[index + 1:]
                  if chars.case_class(c) != chars.CASE_IGNORABLE), None)
    final = before == chars.CASED and after != chars.CASED
    return chars.FINAL_SIGMA if final else chars.SMALL_SIGMA
