"""SQuAD features: each question with windows of its context, packed as ``[CLS] question [SEP]
context window [SEP]``, with the answer's token positions and every context token's character span.

The windows follow google-research/bert's ``run_squad.py`` (``max_seq_length``, ``doc_stride``,
``max_query_length``, and its "max context" rule for tokens seen in several windows). Answers are
mapped through the tokenizer's character offsets instead of whitespace-split words, so the text of
a predicted span is cut straight from the original context, with its original spacing and case.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from keras_bert.tasks.squad.reader import SquadExample
from keras_bert.errors import DataError
from keras_bert.tokenization.packing import INPUT_NAMES


@dataclasses.dataclass(frozen=True)
class SquadFeature:
    """One window of one example, ready for the model.

    Args:
        example_index: the index of the example in the list given to ``make_squad_features``.
        window_index: which window of that example's context this is.
        input_word_ids, input_mask, input_type_ids: the packed ids, ``max_seq_length`` long.
        token_spans: per position, the (start, end) character span of the token in the context;
            None for [CLS], the question, [SEP] and padding.
        token_is_max_context: per position, whether this window gives that context token more
            context on both sides than any other window (answers may only start there).
        start_position, end_position: the answer's first and last positions; 0 ([CLS]) when the
            question is unanswerable or the answer is not inside this window.
    """
    example_index: int
    window_index: int
    input_word_ids: list[int]
    input_mask: list[int]
    input_type_ids: list[int]
    token_spans: list[tuple[int, int] | None]
    token_is_max_context: list[bool]
    start_position: int
    end_position: int


def answer_token_span(offsets: Sequence[tuple[int, int]], start: int, end: int
                      ) -> tuple[int, int] | None:
    """First and last token overlapping characters [start, end), or None if no token does.

    >>> answer_token_span([(0, 3), (4, 8), (8, 10), (11, 12)], 4, 10)
    (1, 2)
    """
    first = next((i for i, (_, e) in enumerate(offsets) if e > start), None)
    last = next((i for i in reversed(range(len(offsets))) if offsets[i][0] < end), None)
    if first is None or last is None or last < first:
        return None
    return first, last


def window_starts(num_tokens: int, window: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of the sliding windows over ``num_tokens`` tokens, as run_squad.py makes.

    >>> window_starts(10, 4, 3)
    [(0, 4), (3, 4), (6, 4)]
    """
    spans, start = [], 0
    while start < num_tokens:
        length = min(num_tokens - start, window)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, stride)
    return spans or [(0, 0)]


def is_max_context(spans: list[tuple[int, int]], span_index: int, position: int) -> bool:
    """Whether window ``span_index`` has the most context around token ``position``.

    The score of a window is min(left context, right context) + 0.01 * window length; the first
    window with the highest score wins (run_squad.py's ``_check_is_max_context``).
    """
    best_score, best_index = None, None
    for index, (start, length) in enumerate(spans):
        end = start + length - 1
        if not start <= position <= end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return best_index == span_index


def make_squad_features(examples: Sequence[SquadExample], tokenizer, max_seq_length: int = 384,
                        doc_stride: int = 128, max_query_length: int = 64) -> list[SquadFeature]:
    """Tokenizes the examples and cuts their contexts into overlapping windows.

    Args:
        examples: SQuAD examples (``read_squad``).
        tokenizer: a ``keras_bert.tokenization.BertTokenizer``.
        max_seq_length: the packed length of every feature.
        doc_stride: how far each window starts after the previous one, in tokens.
        max_query_length: questions longer than this many tokens are truncated.

    Returns:
        The features of all examples, in order; an example yields one or more.

    Raises:
        ValueError: ``max_seq_length`` leaves no room for context.
        DataError: an answer has no token (e.g. it is only whitespace), with its file and line.
    """
    if max_seq_length <= max_query_length + 3:
        raise ValueError(f"max_seq_length={max_seq_length} must exceed max_query_length="
                         f"{max_query_length} + 3 to leave room for the context")
    features = []
    for example_index, example in enumerate(examples):
        query_ids = tokenizer.convert_tokens_to_ids(
            tokenizer.tokenize(example.question)[:max_query_length])
        context = tokenizer.tokenize_with_offsets(example.context)
        answer_span = None
        if example.answers and not example.is_impossible:
            answer = example.answers[0]
            answer_span = answer_token_span(context.offsets, answer.start, answer.end)
            if answer_span is None:
                raise DataError(f"question {example.qas_id!r}: answer {answer.text!r} has no "
                                f"token in the context (only whitespace or dropped characters); "
                                f"fix or remove the answer", example.path, example.line)
        max_tokens_for_doc = max_seq_length - len(query_ids) - 3
        spans = window_starts(len(context.ids), max_tokens_for_doc, doc_stride)
        prefix = [tokenizer.cls_id, *query_ids, tokenizer.sep_id]
        for window_index, (start, length) in enumerate(spans):
            ids = prefix + context.ids[start:start + length] + [tokenizer.sep_id]
            types = [0] * len(prefix) + [1] * (length + 1)
            token_spans = [None] * len(prefix) + list(context.offsets[start:start + length])
            max_context = [False] * len(prefix) + [
                is_max_context(spans, window_index, start + i) for i in range(length)]
            start_position = end_position = 0
            if answer_span and start <= answer_span[0] and answer_span[1] < start + length:
                start_position = answer_span[0] - start + len(prefix)
                end_position = answer_span[1] - start + len(prefix)
            padding = max_seq_length - len(ids)
            features.append(SquadFeature(
                example_index, window_index,
                ids + [tokenizer.pad_id] * padding, [1] * len(ids) + [0] * padding,
                types + [0] * padding, token_spans + [None] * (padding + 1),
                max_context + [False] * (padding + 1), start_position, end_position))
    return features


def stack_features(features: Sequence[SquadFeature]) -> tuple[dict, dict]:
    """(encoder inputs, span labels) as int32 arrays: [num_features, seq] and [num_features]."""
    x = {name: np.asarray([getattr(f, name) for f in features], dtype=np.int32)
         for name in INPUT_NAMES}
    y = {"start_positions": np.asarray([f.start_position for f in features], dtype=np.int32),
         "end_positions": np.asarray([f.end_position for f in features], dtype=np.int32)}
    return x, y
