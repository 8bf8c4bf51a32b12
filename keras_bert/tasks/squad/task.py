"""``keras-bert finetune --task squad``: SQuAD 1.1/2.0 JSON, a BertQuestionAnswerer over windows
of each context, answers post-processed as Google's run_squad.py, scored with the official exact
match and F1."""

from __future__ import annotations

import dataclasses

from keras_bert.tasks.spec import CommonOptions, TaskSpec, packed_length, require_vocabulary
from keras_bert.tasks.squad.answers import nbest_to_json
from keras_bert.tasks.squad.metrics import squad_scores
from keras_bert.tasks.squad.reader import read_squad


@dataclasses.dataclass
class SquadOptions(CommonOptions):
    """The SQuAD settings, as Google's run_squad.py flags.

    Args:
        doc_stride: tokens between the starts of a long context's windows.
        max_query_length: questions are cut to this many tokens.
        n_best_size: start and end candidates per window.
        max_answer_length: longest answer in tokens.
        version_2_with_negative: SQuAD 2.0 (None: when the data has is_impossible questions).
        null_score_diff_threshold: SQuAD 2.0: answer only when the best span beats the null
            score by this.
    """
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool | None = None
    null_score_diff_threshold: float = 0.0


class SquadSpec(TaskSpec):
    name = "squad"
    primary_metric = "f1"
    default_seq_length = 384
    help = "extractive question answering (SQuAD 1.1 and 2.0 JSON)"
    options_class = SquadOptions

    def add_arguments(self, parser) -> None:
        squad = parser.add_argument_group("squad")
        squad.add_argument("--doc_stride", type=int, default=SquadOptions.doc_stride,
                           help="tokens between the starts of a long context's windows "
                                "(default: %(default)s)")
        squad.add_argument("--max_query_length", type=int, default=SquadOptions.max_query_length,
                           help="questions are cut to this many tokens (default: %(default)s)")
        squad.add_argument("--n_best_size", type=int, default=SquadOptions.n_best_size,
                           help="start and end candidates per window (default: %(default)s)")
        squad.add_argument("--max_answer_length", type=int,
                           default=SquadOptions.max_answer_length,
                           help="longest answer in tokens (default: %(default)s)")
        squad.add_argument("--version_2_with_negative", action="store_true",
                           default=SquadOptions.version_2_with_negative,
                           help="SQuAD 2.0 (default: when the data has is_impossible "
                                "questions)")
        squad.add_argument("--null_score_diff_threshold", type=float,
                           default=SquadOptions.null_score_diff_threshold,
                           help="SQuAD 2.0: answer only when the best span beats the null score "
                                "by this (default: %(default)s)")

    def read_examples(self, path: str, options: SquadOptions, with_labels: bool = True) -> list:
        return read_squad(path, with_answers=with_labels)

    def resolve_options(self, options: SquadOptions, example_lists) -> SquadOptions:
        options = super().resolve_options(options, example_lists)
        if options.version_2_with_negative is None:  # SQuAD 2.0 when a question has no answer
            options = dataclasses.replace(options, version_2_with_negative=any(
                e.is_impossible for examples in example_lists for e in examples))
        return options

    def build_model(self, checkpoint, labels, train_examples, options: SquadOptions,
                    lower_case: bool | None = None):
        from keras_bert.tasks.squad.model import BertQuestionAnswerer
        return require_vocabulary(BertQuestionAnswerer.from_checkpoint(
            checkpoint, options.seq_length, doc_stride=options.doc_stride,
            max_query_length=options.max_query_length, lower_case=lower_case), checkpoint)

    def evaluate(self, model, examples, options: SquadOptions, batch_size: int):
        squad_v2 = bool(options.version_2_with_negative)
        answers, nbest, null_diffs = model.predict_answers(
            examples, options.n_best_size, options.max_answer_length, squad_v2,
            options.null_score_diff_threshold, batch_size)
        gold = {e.qas_id: [a.text for a in e.answers] for e in examples}
        artifacts = {"predictions.json": answers, "nbest_predictions.json": nbest_to_json(nbest)}
        if squad_v2:
            artifacts["null_odds.json"] = null_diffs
        return squad_scores(gold, answers, squad_v2), artifacts

    def options_for(self, model, options: SquadOptions) -> SquadOptions:
        return dataclasses.replace(options, seq_length=packed_length(model))

    def predict(self, model, examples, options: SquadOptions, batch_size: int) -> list[dict]:
        """Per question: its ``id``, ``question`` and ``answer`` ("" when SQuAD 2.0 finds
        none), and ``true_answers`` where it has them."""
        answers, _, _ = model.predict_answers(
            examples, options.n_best_size, options.max_answer_length,
            bool(options.version_2_with_negative), options.null_score_diff_threshold,
            batch_size)
        records = []
        for example in examples:
            record = {"id": example.qas_id, "question": example.question,
                      "answer": answers[example.qas_id]}
            if example.answers:
                record["true_answers"] = [a.text for a in example.answers]
            records.append(record)
        return records

    def result_fields(self, options: SquadOptions) -> dict:
        return {"squad_version_2": bool(options.version_2_with_negative)}


TASKS = [SquadSpec()]
