"""Small helpers shared by the tests (import as `from tests.helpers import ...`)."""

import numpy as np


def random_inputs(batch=3, seq=12, vocab_size=97, seed=0, pad_rows=True):
    """int32 encoder inputs with [CLS]=2 first, some padded rows and a second segment."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, size=(batch, seq)).astype(np.int32)
    ids[:, 0] = 2
    mask = np.ones_like(ids)
    types = np.zeros_like(ids)
    for row in range(batch):
        length = seq - (row * 3 if pad_rows else 0)
        length = max(length, 3)
        mask[row, length:] = 0
        ids[row, length:] = 0
        types[row, length // 2:length] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
