"""Task-specific knowledge distillation (Hinton et al., 2015; DistilBERT, Sanh et al., 2019): a
fine-tuned teacher's outputs become the soft targets of a smaller student of the same task
class, trained by the one fine-tuning recipe (``keras_bert.recipe.fit``'s ``plan_for`` /
``fit_plan``: length grouping, AdamW on its schedule, BackupAndRestore with a seed).

Keras' own ``keras.distillation.Distiller`` is not used: it calls the teacher in every training
step (here the teacher runs once per text, before training, so a step costs what a student's
fine-tuning step costs), it wraps the student in a new model (so the student would not train
through its own ``fit`` recipe, nor save and export as itself), and its loss cannot weigh
labelled and unlabelled rows differently in one batch.

One module per part: ``run`` (``distill``, the whole run), ``student`` (``student_of``: the
student a run starts from, on ``config.kept_layers``), ``teacher`` (which models can teach,
``load_teacher``), ``targets`` (``distillation_data``: the teacher's outputs beside the labels),
``loss`` (``SoftTargetLoss`` and the metrics that read the same targets), ``augmentation``
(``augmented_texts``) and ``comparison`` (``compare``: teacher and student side by side).
``keras_bert.distill`` is ``run.distill``.
"""
