"""Tiny learnable pretraining TFRecords and a vocab for the training tests."""

from __future__ import annotations

import os

import numpy as np

from keras_bert.pretraining_data.example_encoder import PretrainingExampleEncoder

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB_SIZE = 64
MASK_ID = 4


def write_vocab(path: str) -> str:
    """[PAD] [UNK] [CLS] [SEP] [MASK] then w5..w63, one per line."""
    tokens = SPECIAL_TOKENS + [f"w{i}" for i in range(len(SPECIAL_TOKENS), VOCAB_SIZE)]
    with open(path, "w") as f:
        f.write("\n".join(tokens) + "\n")
    return path


def _instance(rng, max_seq_length: int, max_predictions_per_seq: int):
    """Segment A counts up from a random token; B continues it (label 0) or is random (1)."""
    words = VOCAB_SIZE - len(SPECIAL_TOKENS)
    length_a = int(rng.integers(3, (max_seq_length - 3) // 2 + 1))
    length_b = int(rng.integers(2, max_seq_length - 3 - length_a + 1))
    start = int(rng.integers(0, words))
    a = [len(SPECIAL_TOKENS) + (start + i) % words for i in range(length_a)]
    is_random_next = bool(rng.random() < 0.5)
    b_start = int(rng.integers(0, words)) if is_random_next else start + length_a
    b = [len(SPECIAL_TOKENS) + (b_start + i) % words for i in range(length_b)]
    ids = [2] + a + [3] + b + [3]
    candidates = [i for i, t in enumerate(ids) if t > 3]
    count = min(max_predictions_per_seq, max(1, round(0.15 * len(candidates))))
    positions = sorted(rng.choice(candidates, size=count, replace=False).tolist())
    labels = [ids[p] for p in positions]
    for p in positions:
        draw = rng.random()
        ids[p] = MASK_ID if draw < 0.8 else (int(rng.integers(5, VOCAB_SIZE)) if draw < 0.9
                                             else ids[p])
    return ids, len(a) + 2, positions, labels, is_random_next


def write_records(directory: str, num_files: int = 2, records_per_file: int = 64,
                  max_seq_length: int = 32, max_predictions_per_seq: int = 5,
                  seed: int = 0, v2_feature_names: bool = False) -> str:
    """Writes num_files TFRecord files of masked instances; returns their glob."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    encoder = PretrainingExampleEncoder(VOCAB_SIZE, max_seq_length, max_predictions_per_seq,
                                        v2_feature_names)
    os.makedirs(directory, exist_ok=True)
    for index in range(num_files):
        path = os.path.join(directory, f"part-{index:02d}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for _ in range(records_per_file):
                ids, len_a, positions, labels, is_random = _instance(
                    rng, max_seq_length, max_predictions_per_seq)
                writer.write(encoder.encode(ids, num_segment_a_tokens=len_a,
                                            masked_lm_positions=positions,
                                            masked_lm_ids=labels, is_random_next=is_random))
    return os.path.join(directory, "part-*.tfrecord")

