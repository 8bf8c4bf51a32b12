"""A tiny random BERT checkpoint with a small uncased vocabulary, for fast fine-tuning tests."""

import os

WORDS = """the a an is was of in on to and or not no yes it this that he she they we i you
john mary paris london berlin france germany lives works visited went born city capital river
movie film book meal good bad great awful nice terrible fine poor very really quite who what
where when which how old year years man woman dog cat sat ran ate down up away home
""".split()
PUNCTUATION = list(".,!?;:'\"()-")
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + PUNCTUATION
         + [str(d) for d in range(10)] + ["##s", "##ed", "##er", "##ing", "##0", "##1", "##2"])


def write_vocab(directory):
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(VOCAB) + "\n")
    return path


def tiny_encoder(seed=0):
    import keras
    from keras_bert import BertEncoder
    keras.utils.set_random_seed(seed)
    return BertEncoder(vocab_size=len(VOCAB), hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=128, max_position_embeddings=128)


def tiny_checkpoint(directory, fmt="google", seed=0):
    """Writes a tiny encoder and its vocab.txt as a `fmt` checkpoint in `directory`."""
    import tempfile
    from keras_bert.checkpoints.saving import save_checkpoint
    scratch = tempfile.mkdtemp()
    save_checkpoint(tiny_encoder(seed), directory, fmt, vocabulary=write_vocab(scratch),
                    lower_case=True)
    return directory
