"""How much bfloat16 can give on this CPU at all: BERT-base's forward pass (random weights) as a
plain tf.function in float32, in mixed_bfloat16 (float32 weights, bf16 compute: what
`export --mixed_precision bf16` serves) and in pure bfloat16 (bf16 weights: no per-call casts,
the ceiling for any bf16 export). Medians of several calls, all in one run.

    python benchmarks/bf16_ceiling.py --batch 32 --length 16
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf

from keras_bert.models.encoder import BertEncoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=16, help="tokens per row")
    parser.add_argument("--calls", type=int, default=7)
    args = parser.parse_args()
    shape = (args.batch, args.length)
    inputs = {"input_word_ids": tf.constant(np.random.default_rng(0).integers(1000, 2000, shape),
                                            tf.int32),
              "input_mask": tf.ones(shape, tf.int32), "input_type_ids": tf.zeros(shape, tf.int32)}
    medians = {}
    for name, dtype in (("float32", None), ("mixed_bfloat16", "mixed_bfloat16"),
                        ("bfloat16", "bfloat16")):
        encoder = BertEncoder(dtype=dtype)  # BERT-base
        encoder(inputs)
        forward = tf.function(lambda x: tf.cast(encoder(x)["pooled_output"], tf.float32),
                              autograph=False)
        forward(inputs).numpy()
        times = []
        for _ in range(args.calls):
            start = time.perf_counter()
            forward(inputs).numpy()
            times.append(time.perf_counter() - start)
        medians[name] = float(np.median(times))
    print(f"BERT-base, batch {args.batch} x {args.length} tokens, median of {args.calls} calls")
    for name, seconds in medians.items():
        print(f"  {name:<15} {seconds * 1000:7.1f} ms   {medians['float32'] / seconds:.2f}x "
              f"float32")


if __name__ == "__main__":
    main()
