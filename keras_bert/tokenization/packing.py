"""Input packing in Python: Google's pair truncation and the ``[CLS] a [SEP] b [SEP]`` layout with
segment ids, mask and padding (the TF Hub encoder inputs)."""

from __future__ import annotations

# The encoder's inputs (TF Hub's names), in the order every packed batch lists them.
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def truncate_pair(ids_a: list[int], ids_b: list[int] | None, max_length: int) -> None:
    """Truncates in place, as Google's ``_truncate_seq_pair``: while the pair is too long, drop
    the last item of the longer list (of ``ids_b`` on a tie).

    >>> a, b = [1, 2, 3, 4, 5], [6, 7]
    >>> truncate_pair(a, b, 5); a, b
    ([1, 2, 3], [6, 7])
    """
    ids_b = [] if ids_b is None else ids_b
    while len(ids_a) + len(ids_b) > max_length:
        (ids_a if len(ids_a) > len(ids_b) else ids_b).pop()


def pack_ids(ids_a: list[int], ids_b: list[int] | None, seq_length: int | None, *,
             cls_id: int, sep_id: int, pad_id: int) -> dict[str, list[int]]:
    """Packs one or two id lists into the encoder inputs.

    Args:
        ids_a: the first segment's token ids.
        ids_b: the second segment's, or None. An empty second segment is no second segment
            (``[CLS] a [SEP]``), as Google's run_classifier.py packs a text_b that is empty or
            tokenizes to nothing.
        seq_length: truncate (Google's way) and pad to this length; None for neither.
        cls_id, sep_id, pad_id: the special token ids.

    Returns:
        ``input_word_ids``, ``input_mask`` (1 for real tokens) and ``input_type_ids`` (0 for
        [CLS], a and its [SEP]; 1 for b and its [SEP]).

    >>> pack_ids([7, 8], [9], 6, cls_id=1, sep_id=2, pad_id=0)["input_type_ids"]
    [0, 0, 0, 0, 1, 1]
    >>> pack_ids([7, 8], [], 6, cls_id=1, sep_id=2, pad_id=0)["input_word_ids"]
    [1, 7, 8, 2, 0, 0]
    """
    ids_a = list(ids_a)
    ids_b = list(ids_b) if ids_b else None
    if seq_length is not None:
        budget = seq_length - (2 if ids_b is None else 3)
        if budget < 0:
            raise ValueError(f"seq_length={seq_length} leaves no room for [CLS] and [SEP]")
        truncate_pair(ids_a, ids_b, budget)
    word_ids = [cls_id, *ids_a, sep_id]
    type_ids = [0] * len(word_ids)
    if ids_b is not None:
        word_ids += [*ids_b, sep_id]
        type_ids += [1] * (len(ids_b) + 1)
    mask = [1] * len(word_ids)
    padding = 0 if seq_length is None else seq_length - len(word_ids)
    return {"input_word_ids": word_ids + [pad_id] * padding,
            "input_mask": mask + [0] * padding,
            "input_type_ids": type_ids + [0] * padding}
