"""Reader and writer for CoNLL-2003-style NER files: one word per line with its tag in the last
column, a blank line between sentences, ``-DOCSTART-`` lines between documents."""

from __future__ import annotations

import re

from keras_bert.fileio import atomic_write
from keras_bert.errors import DataError
from keras_bert.fileio import read_text_lines
from keras_bert.tasks.input_examples import TaggedSentence

# O, or a chunk prefix (IOB1, IOB2/BIO, IOBES) and an entity type: B-PER, I-LOC, E-ORG, S-MISC.
_TAG = re.compile(r"^(O|[BIES]-\S+)$")


def read_conll(path: str, with_labels: bool = True) -> list[TaggedSentence]:
    """Reads a CoNLL file into sentences of words and tags.

    Columns are separated by spaces or tabs; the word is the first column and the tag the last
    (CoNLL-2003 has ``word POS chunk NER``; ``word NER`` works too). Tags may use IOB1 (as
    CoNLL-2003 ships), BIO or IOBES; evaluation follows conlleval's chunk rules for all three.

    Args:
        path: the file (local or gs://).
        with_labels: whether lines carry a tag. False reads one word per line (extra columns
            are ignored) and returns sentences with ``tags=None``.

    Raises:
        DataError: a line without a tag column, or a tag that is not ``O`` or ``B-/I-/E-/S-TYPE``;
            the message names the file and line.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.txt")
    >>> _ = open(path, "w").write("-DOCSTART- -X- -X- O\\n\\n"
    ...                           "EU NNP B-NP B-ORG\\nrejects VBZ B-VP O\\n")
    >>> sentence = read_conll(path)[0]
    >>> sentence.words, sentence.tags, sentence.line
    (['EU', 'rejects'], ['B-ORG', 'O'], 3)
    """
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    start = None

    def flush():
        nonlocal words, tags, start
        if words:
            sentences.append(TaggedSentence(words, tags if with_labels else None, path, start))
        words, tags, start = [], [], None

    for line_number, line in enumerate(read_text_lines(path), start=1):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            flush()
            continue
        if with_labels:
            if len(fields) < 2:
                raise DataError(f"expected a word and a tag, found {line.strip()!r}; put the NER "
                                f"tag in the last column (or read with with_labels=False)",
                                path, line_number)
            if not _TAG.match(fields[-1]):
                raise DataError(f"tag {fields[-1]!r} is not 'O' or B-/I-/E-/S- followed by a "
                                f"type (e.g. B-PER); is the tag in the last column?",
                                path, line_number)
            tags.append(fields[-1])
        if start is None:
            start = line_number
        words.append(fields[0])
    flush()
    if not sentences:
        raise DataError("the file holds no sentences", path)
    return sentences


def write_conll(path: str, sentences: list[TaggedSentence], predicted: list[list[str]]) -> None:
    """Writes ``word gold predicted`` lines (conlleval's input), a blank line between sentences.

    Sentences without gold tags get ``O`` as the gold column. The file is written to a temporary
    name and renamed, so it never appears half-written.
    """
    if len(sentences) != len(predicted):
        raise ValueError(f"got {len(sentences)} sentences but {len(predicted)} predictions")
    lines = []
    for sentence, tags in zip(sentences, predicted):
        gold = sentence.tags or ["O"] * len(sentence.words)
        lines += [f"{w} {g} {p}" for w, g, p in zip(sentence.words, gold, tags)] + [""]
    with atomic_write(path) as f:
        f.write("\n".join(lines) + "\n")
