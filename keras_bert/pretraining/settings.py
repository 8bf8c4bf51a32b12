"""The settings of a pretraining run, with BERT's defaults, validation and a JSON record."""

from __future__ import annotations

import dataclasses
import json

from keras_bert.config import BertConfig

MIXED_PRECISION = {None: None, "none": None, "bf16": "mixed_bfloat16",
                   "mixed_bfloat16": "mixed_bfloat16", "fp16": "mixed_float16",
                   "mixed_float16": "mixed_float16"}


@dataclasses.dataclass
class PretrainingSettings:
    """Settings of a pretraining run (defaults: the paper's, at sequence length 128).

    Args:
        input_files: comma-separated globs of pretraining TFRecords (local or gs://).
        output_dir: where checkpoints, summaries and the export go; a rerun resumes from it.
        bert_config: the architecture; may be None with ``init_checkpoint`` (its config is used).
        init_checkpoint: start from these weights (Google, HF or keras-bert directory), e.g. the
            sequence-length-128 phase when training the 512 phase. Ignored when resuming.
        max_seq_length, max_predictions_per_seq: the lengths the records were written with.
        train_batch_size: global examples per optimizer update, over all replicas and
            accumulation steps.
        num_train_steps, num_warmup_steps, learning_rate, optimizer, weight_decay, clip_norm:
            see ``create_optimizer``.
        gradient_accumulation_steps: micro-batches per update (memory per step / this).
        mixed_precision: None, "bf16" (TPUs, recent GPUs/CPUs) or "fp16" (with loss scaling).
        jit_compile: compile each replica's forward and backward pass with XLA (GPUs; TPUs
            compile the whole step anyway).
        vocab_file: copied into the export; required for ``dynamic_masking``.
        dynamic_masking: re-mask every batch (RoBERTa-style) instead of the records' masks.
        whole_word_mask, masked_lm_prob: dynamic masking options.
        seed: weight initialisation, dropout, shuffling and masking seed.
        deterministic: deterministic TensorFlow ops, for bit-exact reruns (slower on GPUs).
        shuffle_buffer_size: records held for shuffling.
        steps_per_loop: steps per compiled loop call; also the summary and logging interval.
        save_checkpoints_steps, keep_checkpoint_max: checkpoint interval and how many to keep.
        checkpoint_input_pipeline: save the input iterator, for exact resume.
        eval_input_files, eval_batch_size, max_eval_steps: evaluate at the end on these records
            (Google's run_pretraining.py defaults: batch 8, 100 steps), writing
            ``eval_results.txt`` as it does.
        eval_every_steps: also evaluate every this many steps (0: only at the end); the
            results go to ``summaries/eval`` under the training curves' names, so TensorBoard
            draws them on the same charts.
        init_optimizer_state: with ``init_checkpoint`` naming an earlier pretraining run (its
            output_dir), also take its optimizer state and step, so the learning-rate schedule
            goes on where it stopped (the paper's second phase at 512 tokens: steps run from
            the first phase's end to ``num_train_steps``). False: weights only, the schedule
            starts again at step 0 (what Google's run_pretraining.py does).
        export: write export/google and export/keras at the end.
        progress: show a progress bar (steps/s, ETA).

    Example:
    >>> config = PretrainingSettings("data/*.tfrecord", "runs/tiny",
    ...                              BertConfig.preset("L-2_H-128_A-2"))
    >>> config.validate(num_replicas=8)
    >>> config.train_batch_size // 8, config.learning_rate, config.num_warmup_steps
    (32, 0.0001, 10000)
    """

    input_files: str
    output_dir: str
    bert_config: BertConfig | None = None
    init_checkpoint: str | None = None
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    train_batch_size: int = 256
    num_train_steps: int = 1_000_000
    num_warmup_steps: int = 10_000
    learning_rate: float = 1e-4
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    clip_norm: float | None = 1.0
    gradient_accumulation_steps: int = 1
    mixed_precision: str | None = None
    jit_compile: bool = False
    vocab_file: str | None = None
    dynamic_masking: bool = False
    whole_word_mask: bool = False
    masked_lm_prob: float = 0.15
    seed: int = 12345
    deterministic: bool = False
    shuffle_buffer_size: int = 1000
    steps_per_loop: int = 100
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    checkpoint_input_pipeline: bool = True
    eval_input_files: str | None = None
    eval_batch_size: int = 8
    max_eval_steps: int = 100
    eval_every_steps: int = 0
    init_optimizer_state: bool = False
    export: bool = True
    progress: bool = True

    def validate(self, num_replicas: int = 1) -> None:
        """Raises ValueError naming the setting that cannot work."""
        if self.bert_config is None and not self.init_checkpoint:
            raise ValueError("give bert_config (e.g. --bert_config_file or --preset) or "
                             "init_checkpoint")
        if self.mixed_precision not in MIXED_PRECISION:
            raise ValueError(f"mixed_precision must be one of bf16, fp16 or none, got "
                             f"{self.mixed_precision!r}")
        for name in ("train_batch_size", "num_train_steps", "steps_per_loop",
                     "save_checkpoints_steps", "gradient_accumulation_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        parts = num_replicas * self.gradient_accumulation_steps
        if self.train_batch_size % parts:
            raise ValueError(f"train_batch_size={self.train_batch_size} is not divisible by "
                             f"{num_replicas} replica(s) x gradient_accumulation_steps="
                             f"{self.gradient_accumulation_steps}; make it a multiple of {parts}")
        if self.eval_every_steps < 0:
            raise ValueError(f"eval_every_steps must be 0 (only at the end) or positive, got "
                             f"{self.eval_every_steps}")
        if self.eval_every_steps and not self.eval_input_files:
            raise ValueError("eval_every_steps needs eval_input_files (--eval_input_file)")
        if self.init_optimizer_state and not self.init_checkpoint:
            raise ValueError("init_optimizer_state needs init_checkpoint: the earlier "
                             "pretraining run (its output_dir) to continue")
        if self.dynamic_masking and not self.vocab_file:
            raise ValueError("dynamic_masking needs vocab_file (the [MASK] id and the tokens)")

    def to_json(self) -> str:
        values = dataclasses.asdict(self)
        values["bert_config"] = self.bert_config.to_dict() if self.bert_config else None
        return json.dumps(values, indent=2, sort_keys=True)
