"""``keras-bert finetune --task ner``: CoNLL-2003-style files, a BertTokenClassifier tagging each
word's first WordPiece, scored with conlleval's entity-level F1."""

from __future__ import annotations

from keras_bert.tasks.spec import CommonOptions, TaskSpec, collected_label_names, require_vocabulary
from keras_bert.tasks.ner.alignment import entity_spans
from keras_bert.tasks.ner.conll import read_conll, write_conll
from keras_bert.tasks.ner.metrics import entity_scores


class NerSpec(TaskSpec):
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

    def build_model(self, checkpoint, labels, train_examples, options: CommonOptions,
                    lower_case: bool | None = None):
        from keras_bert.tasks.ner.model import BertTokenClassifier
        return require_vocabulary(BertTokenClassifier.from_checkpoint(
            checkpoint, labels, options.seq_length, lower_case=lower_case), checkpoint)

    def evaluate(self, model, examples, options: CommonOptions, batch_size: int):
        predicted = model.predict_tags(examples, batch_size=batch_size)
        return (entity_scores([e.tags for e in examples], predicted),
                {"dev_predictions.conll": lambda path: write_conll(path, examples, predicted)})

    def examples_of_texts(self, texts) -> list[str]:
        return list(texts)

    def predict(self, model, examples, options: CommonOptions, batch_size: int) -> list[dict]:
        """Per sentence: its ``words``, the predicted ``tags`` (``true_tags`` where it has
        them) and ``entities``, {type, text, start, end} with ``start``/``end`` word indices
        (``words[start:end]``). Raw texts (str) give ``entities`` with character offsets, as
        ``BertTokenClassifier.predict_entities``."""
        if examples and isinstance(examples[0], str):
            return [{"text": text, "entities": entities} for text, entities in
                    zip(examples, model.predict_entities(examples, batch_size))]
        records = []
        for example, tags in zip(examples, model.predict_tags(examples, batch_size=batch_size)):
            record = {"words": example.words, "tags": tags,
                      "entities": [{"type": kind, "text": " ".join(example.words[first:last + 1]),
                                    "start": first, "end": last + 1}
                                   for kind, first, last in entity_spans(tags)]}
            if example.tags is not None:
                record["true_tags"] = example.tags
            records.append(record)
        return records


TASKS = [NerSpec()]
