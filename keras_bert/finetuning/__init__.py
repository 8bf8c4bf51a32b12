"""Fine-tuning runs: ``keras-bert finetune``'s run (``finetune.run_finetune``, its tasks from
keras_bert.tasks, its strategy from keras_bert.distribute), the multi-worker loop, the per-epoch
dev evaluation and resume checkpoint, the training curves, and distillation
(``distillation.run.distill``)."""
