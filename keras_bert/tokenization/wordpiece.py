"""Google's WordPiece: greedy longest-match-first splitting of one word into vocabulary pieces,
with ``##`` marking pieces that continue a word."""

from __future__ import annotations

from keras_bert.tokenization.vocab import UNK

SUFFIX_INDICATOR = "##"
# Google's max_input_chars_per_word: a longer word becomes [UNK] without being searched.
MAX_CHARS_PER_WORD = 200


class WordpieceTokenizer:
    """Splits basic-tokenizer words into WordPiece tokens exactly as Google's WordpieceTokenizer.

    A word longer than ``MAX_CHARS_PER_WORD`` characters, or one that cannot be covered by
    vocabulary pieces, becomes the single token ``[UNK]``. Results are memoized per word.

    Args:
        vocab: token -> id.
        unk_token: the token for words that cannot be split.
        cache_size: how many distinct words to remember before the memo is cleared.

    >>> WordpieceTokenizer({"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3}).tokenize("unaffable")
    ['un', '##aff', '##able']
    """

    def __init__(self, vocab: dict[str, int], unk_token: str = UNK, cache_size: int = 1 << 17):
        self.vocab = vocab
        self.unk_token = unk_token
        self.cache_size = cache_size
        # No vocabulary piece is longer than this, so no longer candidate can match.
        self._max_piece_chars = max(len(token) for token in vocab)
        self._cache: dict[str, list[str]] = {}

    def tokenize(self, word: str) -> list[str]:
        """Returns the WordPiece tokens of one word (no whitespace inside)."""
        pieces = self._cache.get(word)
        if pieces is None:
            if len(self._cache) >= self.cache_size:
                self._cache.clear()
            pieces = self._cache[word] = self._split(word)
        return pieces

    def split_with_spans(self, word: str) -> list[tuple[str, int, int]]:
        """Returns (token, start, end) with each token's character span in ``word``.

        [UNK] spans the whole word.

        >>> WordpieceTokenizer({"[UNK]": 0, "ab": 1, "##c": 2}).split_with_spans("abc")
        [('ab', 0, 2), ('##c', 2, 3)]
        """
        spans, start = [], 0
        for piece in self.tokenize(word):
            if piece == self.unk_token and start == 0:
                return [(piece, 0, len(word))]
            length = len(piece) - (len(SUFFIX_INDICATOR) if start > 0 else 0)
            spans.append((piece, start, start + length))
            start += length
        return spans

    def _split(self, word: str) -> list[str]:
        if len(word) > MAX_CHARS_PER_WORD:
            return [self.unk_token]
        if word in self.vocab:
            return [word]
        pieces, start = [], 0
        while start < len(word):
            prefix = SUFFIX_INDICATOR if start > 0 else ""
            end = min(len(word), start + self._max_piece_chars - len(prefix))
            while end > start and prefix + word[start:end] not in self.vocab:
                end -= 1
            if end == start:
                return [self.unk_token]
            pieces.append(prefix + word[start:end])
            start = end
        return pieces
