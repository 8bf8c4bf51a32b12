"""Intermediate matching for distilled students (issue 38): does matching the teacher's hidden
states, besides its outputs, lift a student cut from the teacher's own layers?

Takes the work directory of benchmarks/distillation.py (one dataset and seed: its data, its
fine-tuned teacher saved as ``models-DATASET-SEED/teacher``, its students' test predictions in
``trained.json``) and distils each student again per variant, on the recipe of
``keras_bert.distill`` (the same student from ``student_of``, the same soft targets, plan,
optimizer, batches and seed), with one loss added:

- ``none``: ``keras_bert.distill`` itself (the row to compare with);
- ``cls:BETA`` (Patient KD, Sun et al., 2019, "PKD-Skip"): BETA times the squared distance
  between the L2-normalised [CLS] states of the student's layers below its top one and those of
  the teacher layers they were cut from (``kept_layers``), the teacher's computed once per text;
- ``tokens:BETA`` (TinyBERT's hidden-state loss, Jiao et al., 2020): BETA times the mean squared
  error between every student layer's states and its teacher layer's, over the real tokens; the
  teacher runs inside each step (twice a step's cost: a measurement, not a recipe).

The student is trained through a functional view of itself with a second output (its matched
states, read from the encoder's call in the task model's graph), so the weights trained are the
student's own. Each student trains in its own process on one intra-op thread (``--parallel`` at
once) and is scored on the test texts.

Usage (from the repository root, after benchmarks/distillation.py with --workdir DIR):
    python benchmarks/distillation_intermediate.py --workdir DIR --dataset trec6 \\
        --learning_rate 1e-4 --variants none cls:10 cls:100 tokens:1
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.distillation_augment import (  # noqa: E402
    earlier_run, load_job, run, workdir_parser)

VARIANTS = ("none", "cls:10", "cls:100", "tokens:1")


def _normalized_cls(states):
    import tensorflow as tf
    return tf.concat([tf.math.l2_normalize(state[:, 0], axis=-1) for state in states], axis=-1)


def _teacher_cls(teacher, rows, teacher_layers: list[int]) -> np.ndarray:
    """The teacher's normalised [CLS] states at ``teacher_layers`` for each row, once."""
    import tensorflow as tf

    @tf.function(reduce_retracing=True)
    def states(batch):
        outputs = teacher.encoder(batch, training=False)["encoder_outputs"]
        return _normalized_cls([outputs[j] for j in teacher_layers])

    parts = []
    for start in range(0, len(rows), 64):
        packed = teacher.pack_batch(rows[start:start + 64])
        length = int(tf.reduce_max(tf.reduce_sum(packed["input_mask"], -1)))
        parts.append(states({k: v[:, :length] for k, v in packed.items()}).numpy())
    return np.concatenate(parts)


def _student_states(student) -> list:
    """The student's per-layer states as tensors of its own functional graph: the outputs of
    the encoder's call there (Keras orders a dict's outputs by key: encoder_outputs first)."""
    node = student.encoder._inbound_nodes[-1]  # Keras internal: the call in the task's graph
    return list(node.outputs[:student.encoder.bert_config.num_hidden_layers])


def _view(student, teacher, mode: str, pairs: list[tuple[int, int]]):
    import keras
    import tensorflow as tf
    states = _student_states(student)
    if mode == "cls":
        matched = keras.layers.Lambda(_normalized_cls, name="matched_cls")(
            [states[i] for i, _ in pairs])
        return keras.Model(student.input, {"output": student.output, "hidden": matched})
    teacher.encoder.trainable = False

    class TokenMatch(keras.layers.Layer):
        """Per row: the mean over matched layers' pairs of the squared error per token (mean
        over the hidden axis), averaged over the row's real tokens."""

        def call(self, ids, mask, types, student_states):
            theirs = teacher.encoder({"input_word_ids": ids, "input_mask": mask,
                                      "input_type_ids": types}, training=False)
            theirs = theirs["encoder_outputs"]
            weights = tf.cast(mask, tf.float32)[..., None]
            total = 0.0
            for i, j in pairs:
                error = tf.reduce_mean(tf.square(student_states[i]
                                                 - tf.stop_gradient(theirs[j])), -1,
                                       keepdims=True)
                total += (tf.reduce_sum(error * weights, axis=[1, 2])
                          / tf.reduce_sum(weights, axis=[1, 2]))
            return total[:, None]

    inputs = student.input
    matched = TokenMatch(name="token_match")(inputs["input_word_ids"], inputs["input_mask"],
                                             inputs["input_type_ids"], states)
    return keras.Model(student.input, {"output": student.output, "hidden": matched})


def worker(job: dict) -> dict:
    import tensorflow as tf
    import keras_bert
    from keras_bert.finetuning.distillation.augmentation import augmented_texts
    from keras_bert.finetuning.distillation.loss import SoftTargetLoss
    from keras_bert.finetuning.distillation.student import kept_layers, student_of
    from keras_bert.finetuning.distillation.targets import distillation_data
    from keras_bert.recipe.fit import plan_for
    data, teacher, rate = load_job(job)
    names = data["label_names"]
    texts = data["train_texts"]
    labels = [names[i] for i in data["train_labels"]]
    layers, seed = job["layers"], job["seed"]
    mode, _, beta = job["variant"].partition(":")
    wall, cpu = time.perf_counter(), time.process_time()
    if mode == "none":
        student = keras_bert.distill(teacher, texts, labels, num_layers=layers,
                                     augment=job["augment"], seed=seed, verbose=2, **rate)
    else:
        if job["augment"]:
            texts = texts + augmented_texts(texts, job["augment"], seed)[0]
            labels = labels + [None] * (len(texts) - len(labels))
        student = student_of(teacher, num_layers=layers)
        kept = kept_layers(teacher.encoder.bert_config.num_hidden_layers, layers)
        # PKD-Skip leaves out the top layer, whose [CLS] feeds the head the outputs match.
        pairs = list(enumerate(kept))[:-1] if mode == "cls" else list(enumerate(kept))
        kind = teacher.soft_targets()
        loss = SoftTargetLoss(kind)
        student.compile(loss=loss, metrics=[], **rate)
        examples = distillation_data(teacher, texts, labels)
        if mode == "cls":
            hidden = _teacher_cls(teacher, examples.x, [j for _, j in pairs])
        else:
            hidden = np.zeros((examples.rows, 1), np.float32)  # the loss is the view's output
        view = _view(student, teacher, mode, pairs)
        targets = {"output": examples.targets, "hidden": hidden}
        plan = plan_for(student, examples.x, targets, seed=seed, arrays=True)

        def hidden_loss(y_true, y_pred):
            if mode == "tokens":
                return y_pred[:, 0]
            return tf.reduce_sum(tf.square(y_true - y_pred), axis=-1)

        with student.distribute_strategy.scope():
            optimizer = plan.make_optimizer()
            view.compile(optimizer=optimizer, loss={"output": loss, "hidden": hidden_loss},
                         loss_weights={"output": 1.0, "hidden": float(beta)})
            optimizer.build(view.trainable_variables)
        view.fit(plan.make_dataset(), epochs=plan.settings.epochs, verbose=2,
                 callbacks=plan.callbacks(), shuffle=False)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    predictions = student.predict(data["test_texts"], batch_size=64, verbose=0).argmax(-1)
    return {"accuracy": float(np.mean(predictions == np.array(data["test_labels"]))),
            "train_seconds": wall, "train_cpu_seconds": cpu}


def _stem(job: dict) -> str:
    return (f"intermediate-{job['dataset']}-{job['seed']}-{job['augment']}-{job['layers']}-"
            f"{job['variant'].replace(':', '')}")


def main() -> None:
    parser = workdir_parser(__doc__, augment=0)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS),
                        help="none, cls:BETA or tokens:BETA")
    parser.add_argument("--student_seed", type=int,
                        help="the students' seed (shuffling, dropout, copies), the teacher "
                             "staying --seed's (default: --seed)")
    args = parser.parse_args()
    if args.worker:
        with open(args.worker) as f:
            print(json.dumps(worker(json.load(f))), flush=True)
        return
    for variant in args.variants:
        mode, _, beta = variant.partition(":")
        if not (variant == "none" or (mode in ("cls", "tokens") and beta)):
            parser.error(f"--variants: {variant!r} is not none, cls:BETA or tokens:BETA")
    data_path, teacher, labels, earlier = earlier_run(parser, args)
    seed = args.seed if args.student_seed is None else args.student_seed
    jobs = [{"data": data_path, "teacher": teacher, "seed": seed, "layers": layers,
             "variant": variant, "augment": args.augment, "learning_rate": args.learning_rate,
             "dataset": args.dataset} for layers in args.layers for variant in args.variants]
    with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
        results = list(pool.map(lambda job: run(job, args.workdir, _stem(job), __file__),
                                jobs))

    teacher_accuracy = float(np.mean(np.array(earlier["predictions"]["teacher"]) == labels))
    print(f"{args.dataset}, seed {args.seed} (students {seed}), augment={args.augment}: teacher "
          f"{100 * teacher_accuracy:.1f}%")
    print("| student | variant | test accuracy % (of the teacher's) | train CPU s |")
    print("|---|---|---:|---:|")
    for job, result in zip(jobs, results):
        print(f"| {job['layers']} layers | {job['variant']} | {100 * result['accuracy']:.1f} "
              f"({100 * result['accuracy'] / teacher_accuracy:.1f}%) | "
              f"{result['train_cpu_seconds']:.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": {k: v for k, v in vars(args).items() if k != "worker"},
                       "teacher_accuracy": teacher_accuracy,
                       "students": [{**job, **result} for job, result in zip(jobs, results)]},
                      f, indent=1)


if __name__ == "__main__":
    main()
