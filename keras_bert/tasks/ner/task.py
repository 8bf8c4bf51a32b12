"""``keras-bert finetune --task ner``: CoNLL-2003-style files, a BertTokenClassifier tagging each
word's first WordPiece, scored with conlleval's entity-level F1."""

from __future__ import annotations

from keras_bert.tasks.base import CommonOptions, Task, collected_label_names, require_vocabulary
from keras_bert.tasks.ner.conll import read_conll, write_conll
from keras_bert.tasks.ner.metrics import entity_scores


class NerTask(Task):
    name = "ner"
    primary_metric = "f1"
    help = "a tag per word (CoNLL-2003 files), scored by entity"

    def read_examples(self, path: str, options: CommonOptions, with_labels: bool = True) -> list:
        return read_conll(path, with_labels=with_labels)

    def label_names(self, train_examples, options: CommonOptions) -> list[str]:
        if options.labels:
            return list(options.labels)
        tags = collected_label_names(train_examples, options, "tags")
        return ["O"] + [t for t in tags if t != "O"]

    def build_model(self, init_checkpoint: str, labels, train_examples, options: CommonOptions,
                    lower_case: bool | None = None):
        from keras_bert.tasks.ner.model import BertTokenClassifier
        return require_vocabulary(BertTokenClassifier.from_pretrained(
            init_checkpoint, labels, options.seq_length, lower_case=lower_case), init_checkpoint)

    def evaluate(self, model, examples, options: CommonOptions, batch_size: int):
        predicted = model.predict_tags(examples, batch_size=batch_size)
        return (entity_scores([e.tags for e in examples], predicted),
                {"dev_predictions.conll": lambda path: write_conll(path, examples, predicted)})


TASKS = [NerTask()]
