"""BertQuestionAnswerer: BERT fine-tuned for extractive question answering (SQuAD 1.1 and 2.0):
start and end vectors score every token, and the best valid span is cut from the context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np

from keras_bert.tasks.squad.reader import SquadExample
from keras_bert.tasks.squad.answers import postprocess_squad
from keras_bert.tasks.squad.features import make_squad_features, stack_features
from keras_bert.checkpoints.stored_head import StoredHead
from keras_bert.layers.task_heads import PADDING_LOGIT, SpanHead
from keras_bert.models.encoder import BertEncoder
from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.export.saved_model import ExportsRawText
from keras_bert.models.task import BertTask


@keras.saving.register_keras_serializable(package="keras_bert")
class BertQuestionAnswerer(ExportsRawText, BertTask):
    """BERT with SQuAD's span head: ``start_logits`` and ``end_logits`` over the sequence.

    Questions with long contexts are cut into windows of ``seq_length`` tokens that start
    ``doc_stride`` tokens apart (questions keep at most ``max_query_length`` tokens); answers
    are chosen over all windows (see ``keras_bert.tasks.squad.answers``); the raw-text
    ``serving_default`` of its export cuts the same windows in the graph and answers over all
    of them (``keras_bert.tasks.squad.export``). Unanswerable questions (SQuAD 2.0) point at
    [CLS].

    Args:
        encoder: a BertEncoder.
        preprocessor: a BertPreprocessor; its vocabulary and casing tokenize questions and
            contexts (with character offsets) and its ``seq_length`` is the window length.
        doc_stride: tokens between the starts of consecutive windows (128).
        max_query_length: question tokens kept (64).

    Inputs: packed ids; ``fit``/``evaluate`` take SquadExamples (``read_squad``);
    ``predict_answers`` takes SquadExamples or (question, context) pairs.

    Outputs (a dict): ``start_logits`` and ``end_logits``, float32 [batch, seq]; padding
    positions score ``PADDING_LOGIT`` (-10000), so that a window's loss does not depend on how
    far its batch is padded (``fit`` pads each batch to a bucket length). The loss is the mean
    of the start and end cross-entropies, as in Google's run_squad.py.

    ``from_pretrained(path, seq_length=384, **kwargs)`` builds one on a checkpoint's encoder,
    or loads a saved one (see ``BertTask.from_pretrained``).

    Example:
    >>> import numpy as np
    >>> encoder = BertEncoder(vocab_size=50, hidden_size=16, num_hidden_layers=1,
    ...                       num_attention_heads=2, intermediate_size=32)
    >>> qa = BertQuestionAnswerer(encoder)
    >>> ids = np.array([[2, 7, 3, 8, 9, 3]], dtype="int32")
    >>> out = qa.predict({"input_word_ids": ids, "input_mask": np.ones_like(ids),
    ...                   "input_type_ids": np.array([[0, 0, 0, 1, 1, 1]], "int32")}, verbose=0)
    >>> out["start_logits"].shape, out["end_logits"].shape
    ((1, 6), (1, 6))
    """

    default_seq_length = 384  # from_pretrained's, as Google's run_squad.py
    checkpoint_tasks = ("question_answering",)
    finetune_task = "squad"
    uses_pooler = False
    sequence_padding = {"start_logits": PADDING_LOGIT, "end_logits": PADDING_LOGIT}

    def __init__(self, encoder: BertEncoder, preprocessor=None, doc_stride: int = 128,
                 max_query_length: int = 64, **kwargs):
        # === Layers ===
        head = SpanHead(encoder.bert_config.initializer_range, dtype=encoder.dtype_policy,
                        name="span")
        start_identity = keras.layers.Identity(dtype="float32", name="start_logits")
        end_identity = keras.layers.Identity(dtype="float32", name="end_logits")
        # === Functional model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUT_NAMES}
        start, end = head(encoder(inputs)["sequence_output"], input_mask=inputs["input_mask"])
        outputs = {"start_logits": start_identity(start), "end_logits": end_identity(end)}
        super().__init__(inputs=inputs, outputs=outputs, encoder=encoder,
                         preprocessor=preprocessor, **kwargs)
        # === Config ===
        self.head = head
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length

    @property
    def seq_length(self) -> int:
        return (self.preprocessor.seq_length if self.preprocessor is not None
                else self.default_seq_length)

    def default_loss(self):
        return {name: keras.losses.SparseCategoricalCrossentropy(from_logits=True)
                for name in ("start_logits", "end_logits")}

    def compile(self, *args, **kwargs):
        kwargs.setdefault("loss_weights", {"start_logits": 0.5, "end_logits": 0.5})
        super().compile(*args, **kwargs)

    def make_features(self, examples: Sequence[SquadExample]):
        """The windows of ``examples`` (see ``keras_bert.tasks.squad.features``)."""
        return make_squad_features(examples, self.tokenizer, self.seq_length, self.doc_stride,
                                   self.max_query_length)

    def checkpoint_head(self) -> StoredHead:
        """run_squad.py's and BertForQuestionAnswering's span head: start and end logits."""
        return StoredHead("question_answering", "a BertQuestionAnswerer", layer=self.head.dense)

    def to_arrays(self, x, y=None):
        """Questions as packed windows of their contexts (see ``BertTask.to_arrays``).

        Args:
            x: SquadExamples (``read_squad``) or (question, context) pairs; or packed ids.
            y: ignored for examples: their answers are the labels.

        Returns:
            ``(x, y)``: packed int32 ids [windows, seq] (``make_features``; a long context
            gives several windows) and ``{"start_logits": int32 [windows], "end_logits":
            int32 [windows]}``, the answer's first and last token (0, [CLS], where the window
            holds no answer), or None when an example has no answer and is not impossible.
        """
        if isinstance(x, dict):
            return x, y
        examples = _as_examples(x)
        inputs, positions = stack_features(self.make_features(examples))
        labelled = all(e.answers or e.is_impossible for e in examples)
        labels = {"start_logits": positions["start_positions"],
                  "end_logits": positions["end_positions"]}
        return inputs, (labels if labelled else None)

    def pack_batch(self, x):
        return x

    def soft_targets(self) -> str:
        return "logits"

    def distillation_rows(self, x, labels=None):
        """The windows of the questions' contexts, with the answer's start and end where the
        example has an answer (or is impossible); the labels are the examples' answers, so
        ``labels`` must be None (see ``BertTask.distillation_rows``)."""
        if labels is not None:
            raise ValueError("a BertQuestionAnswerer's labels are its SquadExamples' answers; "
                             "pass labels=None (examples without answers are unlabelled)")
        examples = _as_examples(x)
        features = self.make_features(examples)
        rows, positions = stack_features(features)
        labelled = np.array([bool(examples[f.example_index].answers
                                  or examples[f.example_index].is_impossible)
                             for f in features], bool)
        y = {"start_logits": positions["start_positions"],
             "end_logits": positions["end_positions"]}
        return rows, (y if labelled.any() else None), labelled, None

    def predict_answers(self, examples, n_best_size: int = 20, max_answer_length: int = 30,
                        version_2_with_negative: bool = False,
                        null_score_diff_threshold: float = 0.0, batch_size: int | None = None):
        """Answers questions: ``({qas_id: text}, {qas_id: n-best list}, {qas_id: null diff})``.

        Args:
            examples: SquadExamples, or (question, context) pairs (ids "0", "1", ...).
            n_best_size: candidates kept per feature and in the n-best list.
            max_answer_length: the longest answer, in tokens.
            version_2_with_negative: allow "no answer" (SQuAD 2.0).
            null_score_diff_threshold: how much the null score must beat the best span.
            batch_size: rows per ``predict`` batch (default: Keras').
        """
        examples = _as_examples(examples)
        features = self.make_features(examples)
        logits = self.predict(stack_features(features)[0], batch_size=batch_size, verbose=0)
        return postprocess_squad(examples, features, logits["start_logits"],
                                 logits["end_logits"], n_best_size, max_answer_length,
                                 version_2_with_negative, null_score_diff_threshold)

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "doc_stride": self.doc_stride,
                "max_query_length": self.max_query_length}


def _as_examples(x) -> list[SquadExample]:
    items = list(x)
    if items and not isinstance(items[0], SquadExample):
        if any(len(pair) != 2 for pair in items):
            raise ValueError("expected SquadExamples or (question, context) pairs")
        items = [SquadExample(str(i), question, context)
                 for i, (question, context) in enumerate(items)]
    return items

