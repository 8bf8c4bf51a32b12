"""BertTokenClassifier: BERT fine-tuned for tagging (NER): a softmax over the tags at every
WordPiece, trained and read on the first piece of each word."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
from keras import ops

from keras_bert.tasks.ner.alignment import (IGNORED_LABEL, TaggedFeature, align_words_windows,
                                     entity_spans, merge_window_tags, stack_tagged)
from keras_bert.tasks.input_examples import TaggedSentence
from keras_bert.checkpoints.stored_head import StoredHead
from keras_bert.layers.task_heads import TokenClassificationHead
from keras_bert.models.encoder import BertEncoder
from keras_bert.tokenization.packing import INPUT_NAMES
from keras_bert.export.saved_model import ExportsRawText
from keras_bert.models.task import BertTask

logger = logging.getLogger(__name__)


@keras.saving.register_keras_serializable(package="keras_bert")
class FirstPieceAccuracy(keras.metrics.Mean):
    """Tag accuracy over positions whose label is not IGNORED_LABEL (first pieces of words)."""

    def __init__(self, name="accuracy", **kwargs):
        super().__init__(name=name, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        correct = ops.cast(ops.equal(ops.cast(ops.argmax(y_pred, axis=-1), "int32"), y_true),
                           "float32")
        weight = ops.cast(ops.not_equal(y_true, IGNORED_LABEL), "float32")
        return super().update_state(correct, sample_weight=weight)


@keras.saving.register_keras_serializable(package="keras_bert")
class BertTokenClassifier(ExportsRawText, BertTask):
    """BERT with a softmax over ``label_names`` at every position, for NER and other tagging.

    Each word's tag is learned and predicted on its first WordPiece; its other pieces, [CLS],
    [SEP] and padding have label -1 and are left out of the loss and the accuracy.

    Args:
        encoder: a BertEncoder.
        label_names: the tags (e.g. ``["O", "B-PER", "I-PER", ...]``), saved with the model.
        preprocessor: a BertPreprocessor; its vocabulary and casing drive word alignment and
            its ``seq_length`` the packed length.
        dropout: dropout before the tag layer (0.1).
        window_stride: sentences longer than ``seq_length`` are cut into overlapping windows
            of whole words, each starting this many WordPieces after the previous one (None:
            half of ``seq_length - 2``); training uses every window, and each word's prediction
            comes from the window where it has the most context, in ``predict_tags`` and in
            the raw-text ``serving_default`` of its export (``keras_bert.tasks.ner.export``).

    Inputs: packed ids; ``fit``/``evaluate`` take TaggedSentences (``read_conll``) or word
    lists with ``y`` tag lists; ``predict_tags`` and ``predict_entities`` take words or raw text.

    Outputs: float32 tag probabilities [batch, seq, num_labels].

    ``from_pretrained(path, label_names, seq_length=128, **kwargs)`` builds one on a
    checkpoint's encoder, or loads a saved one (see ``BertTask.from_pretrained``).

    Example:
    >>> import numpy as np
    >>> encoder = BertEncoder(vocab_size=50, hidden_size=16, num_hidden_layers=1,
    ...                       num_attention_heads=2, intermediate_size=32)
    >>> tagger = BertTokenClassifier(encoder, ["O", "B-PER", "I-PER"])
    >>> ids = np.array([[2, 7, 8, 3]], dtype="int32")
    >>> tagger.predict({"input_word_ids": ids, "input_mask": np.ones_like(ids),
    ...                 "input_type_ids": np.zeros_like(ids)}, verbose=0).shape
    (1, 4, 3)
    """

    token_level_labels = True
    head_arguments = ("label_names",)
    checkpoint_tasks = ("token_classification",)
    finetune_task = "ner"
    uses_pooler = False

    def __init__(self, encoder: BertEncoder, label_names: Sequence[str], preprocessor=None,
                 dropout: float = 0.1, window_stride: int | None = None, **kwargs):
        if len(label_names) < 2 or len(set(label_names)) != len(label_names):
            raise ValueError(f"label_names must be at least two distinct tags, got "
                             f"{list(label_names)}")
        # === Layers ===
        head = TokenClassificationHead(len(label_names), dropout,
                                       encoder.bert_config.initializer_range,
                                       dtype=encoder.dtype_policy, name="tagger")
        softmax = keras.layers.Softmax(dtype="float32", name="probabilities")
        # === Functional model ===
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in INPUT_NAMES}
        outputs = softmax(head(encoder(inputs)["sequence_output"]))
        super().__init__(inputs=inputs, outputs=outputs, encoder=encoder,
                         preprocessor=preprocessor, **kwargs)
        # === Config ===
        self.head = head
        self.label_names = [str(n) for n in label_names]
        self.dropout = dropout
        if window_stride is not None and window_stride < 1:
            raise ValueError(f"window_stride must be at least 1, got {window_stride}")
        self.window_stride = window_stride

    def checkpoint_head(self) -> StoredHead:
        """BertForTokenClassification's head: a tag's logit at every position."""
        return StoredHead("token_classification", "a BertTokenClassifier",
                          num_labels=len(self.label_names), label_names=self.label_names,
                          layer=self.head.dense)

    @classmethod
    def head_arguments_of(cls, head: StoredHead) -> dict[str, Any]:
        """A checkpoint's tagger fixes the tags (``id2label``; LABEL_0... where it names none)."""
        names = head.label_names or [f"LABEL_{i}" for i in range(head.num_labels)]
        if not head.label_names:
            logger.warning("%s names no tags (id2label); the tags are called %s", head.source,
                           ", ".join(names))
        return {"label_names": names}

    @property
    def seq_length(self) -> int:
        return self.preprocessor.seq_length if self.preprocessor is not None else 128

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(ignore_class=IGNORED_LABEL)

    def default_metrics(self):
        return [FirstPieceAccuracy()]

    # ------------------------------------------------------------------------ alignment
    def align(self, x, y=None) -> list[TaggedFeature]:
        """Aligns sentences: TaggedSentences, word lists (with ``y`` tag lists) or raw strings
        (split into words at whitespace and punctuation, as the tokenizer does). Returns the
        rows: one per sentence, or one per window of a sentence longer than ``seq_length``."""
        return [feature for windows in self.align_windows(x, y) for feature in windows]

    def align_windows(self, x, y=None) -> list[list[TaggedFeature]]:
        """As ``align``, grouped per sentence: each sentence's windows."""
        x = [x] if isinstance(x, str) else list(x)
        aligned = []
        for index, item in enumerate(x):
            tags = None if y is None else y[index]
            path = line = None
            if isinstance(item, TaggedSentence):
                words, pieces = item.words, None
                tags, path, line = item.tags if y is None else tags, item.path, item.line
            elif isinstance(item, str):
                words, pieces, _ = self._split_text(item)
            else:
                words, pieces = list(item), None
            aligned.append(align_words_windows(self.tokenizer, words, pieces, tags,
                                               self.label_names, self.seq_length,
                                               self.window_stride, path, line))
        return aligned

    def _split_text(self, text: str):
        """(words, piece ids per word, character span per word) of raw text."""
        tokenized = self.tokenizer.tokenize_with_offsets(text)
        grouped: dict[int, tuple[list[int], int, int]] = {}
        for token_id, (start, end), word in zip(tokenized.ids, tokenized.offsets,
                                                tokenized.word_ids):
            pieces, first, _ = grouped.get(word, ([], start, end))
            grouped[word] = (pieces + [token_id], first, end)
        words = [text[first:end] for _, first, end in grouped.values()]
        pieces = [p for p, _, _ in grouped.values()]
        spans = [(first, end) for _, first, end in grouped.values()]
        return words, pieces, spans

    def to_arrays(self, x, y=None):
        """Sentences as packed rows, one per window (see ``BertTask.to_arrays``).

        Args:
            x: a raw text, or a list of TaggedSentences (``read_conll``; their tags serve
                when ``y`` is None), of word lists or of raw texts; or packed ids.
            y: one tag list per sentence, of ``label_names``.

        Returns:
            ``(x, y)``: packed int32 ids [windows, seq] (one row per window of
            ``seq_length`` WordPieces; ``align`` gives the windows) and int32 tag indices
            [windows, seq], IGNORED_LABEL (-1) where a position is not a word's first piece;
            y is None when the sentences have no tags.
        """
        if isinstance(x, dict):
            return x, y
        x = [x] if isinstance(x, str) else list(x)
        inputs, labels = stack_tagged(self.align(x, y))
        labelled = y is not None or all(isinstance(s, TaggedSentence) and s.tags is not None
                                        for s in x)
        return inputs, (labels if labelled else None)

    def pack_batch(self, x):
        return x

    def soft_targets(self) -> str:
        return "softmax"

    def distillation_rows(self, x, labels=None):
        """The windows of the sentences, tags on first pieces where a sentence has them
        (``labels``: a tag list per sentence, None for one without; TaggedSentences' own tags
        when ``labels`` is None), and every word's first piece scored, as ``fit`` aligns them
        (see ``BertTask.distillation_rows``)."""
        x = [x] if isinstance(x, str) else list(x)
        if labels is not None and len(labels) != len(x):
            raise ValueError(f"got {len(x)} sentences but {len(labels)} tag lists")
        features = self.align(x, labels)
        rows, y = stack_tagged(features)
        scored = np.zeros(y.shape, bool)
        for row, feature in enumerate(features):
            starts = [s for s in feature.word_starts if s >= 0]
            scored[row, starts] = True
        labelled = y != IGNORED_LABEL
        return rows, (y if labelled.any() else None), labelled, scored

    # ------------------------------------------------------------------------ prediction
    def predict_tags(self, x, batch_size: int | None = None) -> list[list[str]]:
        """One tag per word for each sentence (TaggedSentences, word lists or raw strings)."""
        aligned = self.align_windows(x)
        flat = [feature for windows in aligned for feature in windows]
        probabilities = self.predict(stack_tagged(flat)[0], batch_size=batch_size, verbose=0)
        tags, row = [], 0
        for windows in aligned:
            tags.append(merge_window_tags(probabilities[row:row + len(windows)], windows,
                                          self.label_names))
            row += len(windows)
        return tags

    def predict_entities(self, texts: Sequence[str], batch_size: int | None = None
                         ) -> list[list[dict]]:
        """The entities in each raw text: ``{"type", "text", "start", "end"}`` with character
        offsets into the text (``text[start:end]``), grouped by conlleval's rules."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        all_tags = self.predict_tags(texts, batch_size)
        results = []
        for text, tags in zip(texts, all_tags):
            _, _, spans = self._split_text(text)
            results.append([{"type": kind, "start": spans[first][0], "end": spans[last][1],
                             "text": text[spans[first][0]:spans[last][1]]}
                            for kind, first, last in entity_spans(tags)])
        return results

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "label_names": self.label_names,
                "dropout": self.dropout, "window_stride": self.window_stride}
