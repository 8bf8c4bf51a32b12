"""The per-window work of the pretraining-data writer: tokenize, build instances, mask, serialize.

Runs in worker processes in pure Python (no TensorFlow), and frames each record as TFRecord
writes it, so that the main process only concatenates bytes. The result of a window depends
only on the window's text, its index, and the options: each window's randomness comes from its
own RNG seeded from (random_seed, window index, dupe round), so the output does not depend on
how many workers there are or which worker gets which window.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import random

from keras_bert.pretraining_data.example_encoder import PretrainingExampleEncoder
from keras_bert.pretraining_data.instances import InstanceBuilder, create_segment_pairs
from keras_bert.pretraining_data.masking import MaskingCounts, StaticMasker
from keras_bert.pretraining_data.tfrecord import frame_record
from keras_bert.tokenization.tokenizer import BertTokenizer

# Distinct words whose ids a processor remembers before it starts over.
_MAX_CACHED_WORDS = 1 << 17


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """How instances are built, masked and serialized (the script's flags of the same names)."""

    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 10
    random_seed: int = 12345
    do_whole_word_mask: bool = False
    v2_feature_names: bool = False


@dataclasses.dataclass
class InstanceStatistics:
    """Counts over written instances: the numbers of the end-of-run summary."""

    documents: int = 0
    instances: int = 0
    corpus_tokens: int = 0  # tokens of the tokenized corpus, once
    instance_tokens: int = 0  # tokens of the instances, [CLS] and [SEP] included
    maskable_tokens: int = 0  # tokens of the instances that masking may choose
    random_next: int = 0
    one_sentence_pairs: int = 0  # pairs whose B had to be random (see `SegmentPair`)
    masking: MaskingCounts = dataclasses.field(default_factory=MaskingCounts)

    def add(self, other: InstanceStatistics) -> None:
        for field in dataclasses.fields(InstanceStatistics):
            if field.name == "masking":
                self.masking.add(other.masking)
            else:
                setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass
class WindowResult:
    """What one window produced: its records (serialized, shuffled, framed as TFRecords: see
    `keras_bert.pretraining_data.tfrecord.frame_record`) and their statistics."""

    records: list[bytes]
    statistics: InstanceStatistics


def derive_seed(random_seed: int, *parts: object) -> int:
    """A 64-bit seed that depends only on the user's seed and `parts` (stable across runs)."""
    key = "/".join(str(part) for part in (random_seed, *parts)).encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little")


class WindowProcessor:
    """Turns a window of raw documents into shuffled, serialized pretraining records.

    Args:
        tokenizer: a `keras_bert.tokenization.BertTokenizer`.
        options: the instance options.
    """

    def __init__(self, tokenizer: BertTokenizer, options: InstanceOptions) -> None:
        self.tokenizer = tokenizer
        self.options = options
        self._word_ids: dict[str, list[int]] = {}
        vocab = tokenizer.vocab
        continuation_ids = None
        if options.do_whole_word_mask:
            continuation_ids = frozenset(i for token, i in vocab.items() if token.startswith("##"))
        masker = StaticMasker(vocab_size=len(vocab), mask_token_id=tokenizer.mask_id,
                              masked_lm_prob=options.masked_lm_prob,
                              max_predictions_per_seq=options.max_predictions_per_seq,
                              continuation_ids=continuation_ids)
        self.builder = InstanceBuilder(cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
                                       masker=masker)
        self.encoder = PretrainingExampleEncoder(
            vocab_size=len(vocab), max_seq_length=options.max_seq_length,
            max_predictions_per_seq=options.max_predictions_per_seq,
            v2_feature_names=options.v2_feature_names)

    def tokenize_documents(self, window: list[list[str]]) -> list[list[list[int]]]:
        """[num_documents][num_lines] text -> [num_documents][num_sentences][num_tokens] ids.

        Sentences that tokenize to nothing are dropped, then documents left empty.
        """
        documents = []
        for lines in window:
            sentences = [ids for ids in map(self.token_ids, lines) if ids]
            if sentences:
                documents.append(sentences)
        return documents

    def token_ids(self, text: str) -> list[int]:
        """The ids of `tokenizer.tokenize(text)`, with each word's ids memoized."""
        word_ids = self._word_ids
        ids: list[int] = []
        for word in self.tokenizer.basic_tokenize(text):
            pieces = word_ids.get(word)
            if pieces is None:
                if len(word_ids) >= _MAX_CACHED_WORDS:
                    word_ids.clear()
                pieces = word_ids[word] = self.tokenizer.convert_tokens_to_ids(
                    self.tokenizer.wordpiece.tokenize(word))
            ids += pieces
        return ids

    def process(self, window_index: int, window: list[list[str]]) -> WindowResult:
        """Builds `dupe_factor` rounds of instances from the window and shuffles them together."""
        options = self.options
        documents = self.tokenize_documents(window)
        records: list[bytes] = []
        statistics = InstanceStatistics(
            documents=len(documents),
            corpus_tokens=sum(len(s) for document in documents for s in document))
        encode = self.encoder.encode
        for dupe_round in range(options.dupe_factor):
            rng = random.Random(derive_seed(options.random_seed, window_index, dupe_round))
            for document_index in range(len(documents)):
                for tokens_a, tokens_b, is_random_next, from_one_sentence in create_segment_pairs(
                        documents, document_index, options.max_seq_length,
                        options.short_seq_prob, rng):
                    instance, counts = self.builder.build(tokens_a, tokens_b, is_random_next, rng)
                    records.append(encode(
                        instance.input_ids, instance.num_segment_a_tokens,
                        instance.masked_lm_positions, instance.masked_lm_ids, is_random_next))
                    statistics.instance_tokens += len(instance.input_ids)
                    statistics.maskable_tokens += len(instance.input_ids) - 3
                    statistics.random_next += is_random_next
                    statistics.one_sentence_pairs += from_one_sentence
                    statistics.masking.add(counts)
        statistics.instances = len(records)
        random.Random(derive_seed(options.random_seed, window_index, "shuffle")).shuffle(records)
        return WindowResult([frame_record(record) for record in records], statistics)


# The processor of this worker process, set once by `init_worker`.
_processor: WindowProcessor | None = None


def init_worker(tokenizer: BertTokenizer, options: InstanceOptions) -> None:
    """Process-pool initializer: builds this worker's processor."""
    global _processor
    # What a forked worker inherits (modules, the vocabulary) is never garbage: keep it
    # out of the collector's passes, which also spares copying the pages it lives on.
    gc.freeze()
    _processor = WindowProcessor(tokenizer, options)


def process_window(window_index: int, window: list[list[str]]) -> WindowResult:
    """Process-pool task: one window, with the processor `init_worker` built."""
    assert _processor is not None, "init_worker must run first"
    return _processor.process(window_index, window)
