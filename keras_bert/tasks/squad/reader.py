"""Reader for SQuAD JSON files, versions 1.1 and 2.0 (unanswerable questions), with every answer
checked against its context so that a wrong ``answer_start`` fails at load time, not silently in
training."""

from __future__ import annotations

import dataclasses
import json

from keras_bert import fileio
from keras_bert.errors import DataError


@dataclasses.dataclass(frozen=True)
class SquadAnswer:
    """An answer span: ``context[start:start + len(text)] == text``."""
    text: str
    start: int

    @property
    def end(self) -> int:
        """One past the answer's last character."""
        return self.start + len(self.text)


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question about one context.

    Args:
        qas_id: the question id (the key of the predictions file).
        question: the question text.
        context: the paragraph.
        answers: the gold answers (the first is trained on; all count in evaluation). Empty
            for an unanswerable question.
        is_impossible: SQuAD 2.0's flag for questions the context does not answer.
        path, line: where the question is in the file (the line of its ``"id"``).
    """
    qas_id: str
    question: str
    context: str
    answers: tuple[SquadAnswer, ...] = ()
    is_impossible: bool = False
    path: str | None = None
    line: int | None = None


def _line_of(raw: str, qas_id: str, hint: int) -> tuple[int | None, int]:
    """(1-based line of ``"id": "<qas_id>"`` in the raw JSON, search position for the next id)."""
    for needle in (json.dumps(qas_id), qas_id):
        position = raw.find(needle, hint)
        if position >= 0:
            return raw.count("\n", 0, position) + 1, position + len(needle)
    return None, hint


def read_squad(path: str, with_answers: bool = True) -> list[SquadExample]:
    """Reads a SQuAD 1.1 or 2.0 JSON file.

    Args:
        path: the file (local or gs://), ``{"version": ..., "data": [{"paragraphs": [{"context":
            ..., "qas": [{"id", "question", "answers": [{"text", "answer_start"}],
            "is_impossible"}]}]}]}``.
        with_answers: whether answerable questions must have answers (training and
            evaluation files). False reads files without answers, for prediction.

    Returns:
        One SquadExample per question, in file order.

    Raises:
        DataError: malformed JSON, a missing field, an empty question or context, an answerable
            question without answers, or an answer that is not in its context at
            ``answer_start``; with the file and line.

    Example:
    >>> import json, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.json")
    >>> qa = {"id": "q1", "question": "Who?", "answers": [{"text": "Ada", "answer_start": 0}]}
    >>> _ = open(path, "w").write(json.dumps({"data": [{"paragraphs": [
    ...     {"context": "Ada wrote it.", "qas": [qa]}]}]}))
    >>> read_squad(path)[0].answers[0].end
    3
    """
    if not fileio.exists(path):
        raise FileNotFoundError(f"SQuAD file {path!r} does not exist")
    with fileio.open_file(path, "rb") as f:
        raw = f.read().decode("utf-8-sig")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise DataError(f"invalid JSON ({e.msg} at column {e.colno})", path, e.lineno) from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError('expected a SQuAD object {"version": ..., "data": [articles]}', path, 1)
    examples, search_from = [], 0
    for a, article in enumerate(data["data"]):
        for p, paragraph in enumerate(article.get("paragraphs", [])):
            where = f"data[{a}].paragraphs[{p}]"
            context = paragraph.get("context")
            if not isinstance(context, str) or not context.strip():
                raise DataError(f"{where}: 'context' is empty or missing", path)
            for q, qa in enumerate(paragraph.get("qas", [])):
                qas_id = str(qa.get("id", f"{where}.qas[{q}]"))
                line, search_from = _line_of(raw, qas_id, search_from)
                examples.append(_example(qa, qas_id, context, with_answers, path, line))
    if not examples:
        raise DataError("the file holds no questions", path)
    return examples


def _example(qa: dict, qas_id: str, context: str, with_answers: bool, path: str,
             line: int | None) -> SquadExample:
    question = qa.get("question")
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"question {qas_id!r} is empty or missing", path, line)
    is_impossible = bool(qa.get("is_impossible", False))
    answers = []
    for answer in qa.get("answers", []) if not is_impossible else []:
        text, start = answer.get("text"), answer.get("answer_start")
        if not isinstance(text, str) or not text or not isinstance(start, int):
            raise DataError(f"question {qas_id!r}: each answer needs a non-empty 'text' and an "
                            f"integer 'answer_start'", path, line)
        if context[start:start + len(text)] != text:
            found = context.find(text)
            hint = (f"the text occurs at character {found}; fix answer_start" if found >= 0
                    else "the text does not occur in the context at all")
            raise DataError(f"question {qas_id!r}: answer {text!r} is not in its context at "
                            f"answer_start={start} (the context there reads "
                            f"{context[start:start + len(text)]!r}); {hint}", path, line)
        answers.append(SquadAnswer(text, start))
    if with_answers and not is_impossible and not answers:
        raise DataError(f"question {qas_id!r} has no answers and is not marked is_impossible; "
                        f"add an answer or set \"is_impossible\": true (SQuAD 2.0)", path, line)
    return SquadExample(qas_id, question, context, tuple(answers), is_impossible, path, line)
