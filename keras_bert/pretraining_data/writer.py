"""Writes BERT pretraining TFRecords from raw text: parallel, memory-bounded, reproducible, atomic.

The behaviour of each instance follows google-research/bert's create_pretraining_data.py. The
corpus is streamed in windows of whole documents (`window_bytes` of text); worker processes turn
each window into `dupe_factor` rounds of masked instances, shuffled within the window; the main
process writes the records in window order, round-robin over the output files, under temporary
names that are renamed to the final names only once every file is complete. Random next segments
come from another document of the same window. The same inputs, seed and options give
byte-identical files whatever the number of workers.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import multiprocessing
import os
import time

import tqdm

from keras_bert import fileio
from keras_bert.pretraining_data.corpus import read_document_windows, resolve_input_files
from keras_bert.pretraining_data.worker import (InstanceOptions, InstanceStatistics,
                                                WindowProcessor, init_worker, process_window)
from keras_bert.pretraining_data.tfrecord import TFRecordFileWriter
from keras_bert.pretraining_data.vocab_checks import check_vocab
from keras_bert.tokenization.tokenizer import BertTokenizer

logger = logging.getLogger(__name__)

TEMP_SUFFIX = ".incomplete"


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig:
    """Everything that decides the output files (and, for num_workers, only the speed).

    Args:
        input_file: comma-separated paths or globs, local or gs://.
        vocab_file: the WordPiece vocabulary, one token per line.
        output_file: comma-separated output paths, filled round-robin; or leave empty and give
            `output_dir` and `num_shards`.
        output_dir: directory for `num_shards` files named pretraining-00000-of-0000N.tfrecord.
        num_shards: number of files written to `output_dir`.
        num_workers: worker processes; 0 means one per CPU core.
        gzip: GZIP-compress the TFRecord files.
        window_bytes: text per window; bounds memory and is the pool random next segments come
            from. Part of what decides the output.
        do_lower_case: lower-case and strip accents while tokenizing (uncased vocabularies).
        instance: how instances are built, masked and serialized.
    """

    input_file: str
    vocab_file: str
    output_file: str = ""
    output_dir: str = ""
    num_shards: int = 1
    num_workers: int = 0
    gzip: bool = False
    window_bytes: int = 1 << 19
    do_lower_case: bool = True
    instance: InstanceOptions = dataclasses.field(default_factory=InstanceOptions)

    def output_files(self) -> list[str]:
        """The final output paths, in round-robin order."""
        if bool(self.output_file) == bool(self.output_dir):
            raise ValueError("give exactly one of --output_file and --output_dir")
        if self.output_file:
            paths = [path.strip() for path in self.output_file.split(",") if path.strip()]
            repeated = sorted({path for path in paths if paths.count(path) > 1})
            if repeated:
                raise ValueError(f"--output_file names {', '.join(repeated)} more than once")
            return paths
        if self.num_shards < 1:
            raise ValueError(f"--num_shards must be at least 1, got {self.num_shards}")
        suffix = ".tfrecord.gz" if self.gzip else ".tfrecord"
        return [f"{self.output_dir.rstrip('/')}/pretraining-{i:05d}-of-{self.num_shards:05d}"
                f"{suffix}" for i in range(self.num_shards)]


@dataclasses.dataclass
class PretrainingDataSummary(InstanceStatistics):
    """What a run wrote, for the end-of-run report."""

    output_files: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def report(self) -> str:
        """A few lines: counts, the masked share, the masking split and the random-next share."""
        masked = self.masking.mask + self.masking.random + self.masking.kept
        coin_tosses = self.instances - self.one_sentence_pairs

        def share(part: int, whole: int) -> str:
            return f"{100.0 * part / whole:.2f}%" if whole else "n/a"

        return "\n".join([
            f"documents: {self.documents:,}   instances: {self.instances:,}   "
            f"({self.instances / max(self.seconds, 1e-9):,.0f}/s over {self.seconds:.1f} s)",
            f"tokens: {self.corpus_tokens:,} in the corpus, {self.instance_tokens:,} in instances",
            f"masked: {masked:,} = {share(masked, self.maskable_tokens)} of non-special tokens; "
            f"[MASK] {share(self.masking.mask, masked)}, random {share(self.masking.random, masked)}"
            f", kept {share(self.masking.kept, masked)}",
            f"random next segments: {share(self.random_next, self.instances)}; "
            f"{share(self.random_next - self.one_sentence_pairs, coin_tosses)} of pairs from "
            f"chunks of 2+ sentences (one-sentence chunks, "
            f"{share(self.one_sentence_pairs, self.instances)} of pairs, always take one, as in "
            f"Google's script)",
            f"wrote {len(self.output_files)} file(s): {', '.join(self.output_files[:3])}"
            + (" ..." if len(self.output_files) > 3 else ""),
        ])


def create_pretraining_data(config: PretrainingDataConfig,
                            tokenizer: BertTokenizer | None = None,
                            progress: bool = True) -> PretrainingDataSummary:
    """Writes the pretraining TFRecords that `config` describes.

    Args:
        config: inputs, outputs and options.
        tokenizer: a `BertTokenizer`; by default one is built from `config.vocab_file`.
        progress: show a progress bar (documents and instances per second) on stderr.

    Returns:
        The run's summary, also logged.

    Raises:
        FileNotFoundError: an input or the vocabulary is missing.
        ValueError: bad options, invalid UTF-8, a vocabulary that does not match
            `do_lower_case`, or a corpus without any document; the message names the file.
    """
    options = config.instance
    if options.max_seq_length < 5:
        raise ValueError(f"--max_seq_length must be at least 5 ([CLS] A [SEP] B [SEP] with one "
                         f"token each), got {options.max_seq_length}")
    if options.max_predictions_per_seq < 1 or options.dupe_factor < 1:
        raise ValueError("--max_predictions_per_seq and --dupe_factor must be at least 1")
    if not 0.0 <= options.masked_lm_prob <= 1.0 or not 0.0 <= options.short_seq_prob <= 1.0:
        raise ValueError("--masked_lm_prob and --short_seq_prob must lie in [0, 1]")
    if config.num_workers < 0 or config.window_bytes < 1:
        raise ValueError("--num_workers must be at least 0 (0: one per core) and --window_bytes "
                         "at least 1")
    output_files = config.output_files()
    input_files = resolve_input_files(config.input_file)
    if tokenizer is None:
        tokenizer = BertTokenizer(config.vocab_file, lower_case=config.do_lower_case)
    check_vocab(tokenizer.vocab, config.do_lower_case, config.vocab_file)
    num_workers = config.num_workers or _available_cores()
    logger.info("reading %d input file(s) with %d worker(s); writing %d file(s)",
                len(input_files), num_workers, len(output_files))

    summary = PretrainingDataSummary(output_files=output_files)
    start = time.perf_counter()
    windows = enumerate(read_document_windows(input_files, config.window_bytes))
    with _AtomicRecordWriters(output_files, config.gzip) as writers, tqdm.tqdm(
            unit=" documents", disable=not progress, dynamic_ncols=True) as bar:
        for result in _process_windows(windows, tokenizer, options, num_workers):
            writers.write(result.records)
            summary.add(result.statistics)
            elapsed = max(time.perf_counter() - start, 1e-9)
            bar.update(result.statistics.documents)
            bar.set_postfix(instances=summary.instances,
                            instances_per_s=f"{summary.instances / elapsed:,.0f}")
        if summary.instances == 0:
            raise ValueError(f"no documents in {', '.join(input_files)}: the corpus must have one "
                             f"sentence per line and a blank line between documents")
        writers.commit()
    summary.seconds = time.perf_counter() - start
    logger.info("pretraining data summary:\n%s", summary.report())
    return summary


def _available_cores() -> int:
    """The cores this process may run on (its affinity), else the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _process_windows(windows, tokenizer: BertTokenizer, options: InstanceOptions,
                     num_workers: int):
    """Yields each window's result, in window order, with at most a few windows in memory."""
    if num_workers == 1:
        processor = WindowProcessor(tokenizer, options)
        for window_index, window in windows:
            yield processor.process(window_index, window)
        return
    # Workers only run pure Python; forking spares them re-importing modules and re-reading the
    # vocabulary, and tokenizing once first builds the tokenizer's lazy tables once, for all.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    tokenizer.tokenize("Warm-up.")
    max_in_flight = 2 * num_workers
    with concurrent.futures.ProcessPoolExecutor(
            num_workers, mp_context=multiprocessing.get_context(method),
            initializer=init_worker, initargs=(tokenizer, options)) as pool:
        pending: collections.deque[concurrent.futures.Future] = collections.deque()
        try:
            for window_index, window in windows:
                pending.append(pool.submit(process_window, window_index, window))
                if len(pending) >= max_in_flight:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


class _AtomicRecordWriters:
    """TFRecord files written under temporary names and renamed only on `commit`.

    Records go round-robin over the files. On an error, or without `commit`, the temporary
    files are removed; a killed process leaves only temporary names, which a rerun overwrites.
    """

    def __init__(self, paths: list[str], gzip: bool) -> None:
        self.paths = paths
        self.gzip = gzip
        self.writers: list[TFRecordFileWriter] = []
        self.next_writer = 0
        self.committed = False

    def __enter__(self) -> _AtomicRecordWriters:
        try:
            for path in self.paths:
                directory = os.path.dirname(path)
                if directory:
                    fileio.makedirs(directory)
                self.writers.append(TFRecordFileWriter(path + TEMP_SUFFIX, self.gzip))
        except BaseException:  # e.g. an output directory that cannot be written
            self.__exit__(None, None, None)  # closes and removes the files opened so far
            raise
        return self

    def write(self, framed_records: list[bytes]) -> None:
        """Writes records already framed (`frame_record`), continuing the round-robin."""
        count = len(self.writers)
        start = self.next_writer
        for offset in range(min(count, len(framed_records))):
            index = (start + offset) % count
            self.writers[index].write_framed(b"".join(framed_records[offset::count]))
        self.next_writer = (start + len(framed_records)) % count

    def commit(self) -> None:
        for writer in self.writers:
            writer.close()
        for path in self.paths:
            fileio.rename(path + TEMP_SUFFIX, path, overwrite=True)
        self.committed = True

    def __exit__(self, *exc_info) -> None:
        if self.committed:
            return
        for writer in self.writers:
            writer.close()
        for path in self.paths:
            if fileio.exists(path + TEMP_SUFFIX):
                fileio.remove(path + TEMP_SUFFIX)
