"""The in-graph BertPreprocessor: the same ids as the Python tokenizer on the hard cases and the
real vocabulary, Google's pair truncation, tf.data, Keras saving (in memory and in files),
SavedModel and XLA marking."""

import gc
import itertools
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert import BertPreprocessor as TopLevelPreprocessor
from keras_bert.tokenization import (BertPackerLayer, BertPreprocessor, BertTokenizer,
                                     BertTokenizerLayer, tokenizer_layer)
from keras_bert.tokenization.packing import pack_ids
from tests.tokenization.hard_cases import HARD_CASES, VOCABULARY

TEXTS = ["Hello world!", "Héllo wörld — ΟΔΟΣ 中文 \x00ß", "", "a" * 300,
         "Tokenization isn't unaffable.", "  \t  ", "naïve café résumé"]


@pytest.fixture(scope="module")
def hard_preprocessors():
    return {lower: BertPreprocessor(vocabulary=VOCABULARY, lower_case=lower, seq_length=16)
            for lower in (True, False)}


@pytest.fixture(scope="module")
def minilm_preprocessor(minilm_dir):
    return BertPreprocessor.from_pretrained(minilm_dir, seq_length=16)


@pytest.fixture(scope="module")
def minilm_tokenizer(minilm_dir):
    return BertTokenizer.from_pretrained(minilm_dir)


def test_hard_cases_in_graph(hard_preprocessors):
    ids = {token: i for i, token in enumerate(VOCABULARY)}
    texts = tf.constant([case[1] for case in HARD_CASES])
    for lower, column in ((True, 2), (False, 3)):
        got = hard_preprocessors[lower].tokenize(texts).to_list()
        for case, row in zip(HARD_CASES, got):
            assert [VOCABULARY[i] for i in row] == case[column], (case[0], lower)
            assert row == [ids[t] for t in case[column]]


def test_stock_tensorflow_text_tokenizers_disagree_with_google():
    """Why the layer does its own normalization: the stock tokenizers fail these hard cases."""
    vocab_table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(VOCABULARY, tf.range(len(VOCABULARY), dtype=tf.int64)),
        num_oov_buckets=1)
    stock = {"FastBertTokenizer": tf_text.FastBertTokenizer(VOCABULARY,
                                                            lower_case_nfd_strip_accents=True),
             "BertTokenizer": tf_text.BertTokenizer(vocab_table, lower_case=True)}
    cases = {case[0]: case for case in HARD_CASES}
    for name in ("control and format characters are deleted", "no NFKC: sharp s stays",
                 "no NFKC: full-width letters are not folded",
                 "final sigma at the end of a word", "a word of exactly 200 characters is split"):
        _, text, expected, _ = cases[name]
        for tokenizer in stock.values():
            ids = tokenizer.tokenize(tf.constant([text])).flat_values.numpy().tolist()
            assert [VOCABULARY[i] if i < len(VOCABULARY) else None for i in ids] != expected


def test_same_ids_as_python_on_the_real_vocab(minilm_preprocessor, minilm_tokenizer):
    got = minilm_preprocessor.tokenize(tf.constant(TEXTS)).to_list()
    assert got == [minilm_tokenizer.convert_tokens_to_ids(minilm_tokenizer.tokenize(t))
                   for t in TEXTS]
    assert got[0] == [7592, 2088, 999]
    assert got[3] == [100]


def test_invalid_utf8_is_dropped_like_python(minilm_preprocessor, minilm_tokenizer):
    raw = [b"hel\xfflo w\xe2\x82orld", b"\xc0\xaf\xed\xa0\x80ok"]
    got = minilm_preprocessor.tokenize(tf.constant(raw)).to_list()
    assert got == [[7592, 2088], [7929]]
    assert got == [minilm_tokenizer.convert_tokens_to_ids(minilm_tokenizer.tokenize(r))
                   for r in raw]


def test_packing_single_and_pairs(minilm_preprocessor, minilm_tokenizer):
    out = minilm_preprocessor(tf.constant(TEXTS))
    expected = minilm_tokenizer.encode_batch(TEXTS, seq_length=16)
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        assert out[name].dtype == tf.int32
        np.testing.assert_array_equal(out[name], expected[name])
    pairs = TEXTS[::-1]
    out = minilm_preprocessor((tf.constant(TEXTS), tf.constant(pairs)))
    expected = minilm_tokenizer.encode_batch(TEXTS, pairs, seq_length=16)
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(out[name], expected[name])
    np.testing.assert_array_equal(out["input_word_ids"][0, :5], [101, 7592, 2088, 999, 102])


def test_python_and_numpy_texts_give_the_same_ids_as_tensors(minilm_preprocessor):
    pairs = TEXTS[::-1]
    single = minilm_preprocessor(tf.constant(TEXTS))["input_word_ids"].numpy()
    pair = minilm_preprocessor((tf.constant(TEXTS), tf.constant(pairs)))["input_word_ids"]
    for texts in (TEXTS, tuple(TEXTS), np.array(TEXTS)):  # a list of strings is one batch
        np.testing.assert_array_equal(minilm_preprocessor(texts)["input_word_ids"], single)
    for segments in ((TEXTS, pairs), [np.array(TEXTS), pairs]):  # a pair of batches
        np.testing.assert_array_equal(minilm_preprocessor(segments)["input_word_ids"], pair)
    np.testing.assert_array_equal(minilm_preprocessor("Hello world!")["input_word_ids"],
                                  single[:1])


def test_pair_truncation_matches_googles_loop_on_every_length():
    seq_length = 9
    preprocessor = BertPreprocessor(vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"],
                                    seq_length=seq_length)
    lengths = list(itertools.product(range(10), range(10)))
    ids_a = tf.ragged.constant([[10 + i for i in range(a)] for a, _ in lengths], dtype=tf.int32)
    ids_b = tf.ragged.constant([[50 + i for i in range(b)] for _, b in lengths], dtype=tf.int32)
    out = preprocessor.pack(ids_a, ids_b)
    for row, (a, b) in enumerate(lengths):
        expected = pack_ids(list(range(10, 10 + a)), list(range(50, 50 + b)), seq_length,
                            cls_id=2, sep_id=3, pad_id=0)
        for name, values in expected.items():
            assert out[name][row].numpy().tolist() == values, (a, b, name)


def test_works_in_tf_data(minilm_preprocessor, minilm_tokenizer):
    dataset = tf.data.Dataset.from_tensor_slices(TEXTS).batch(3).map(minilm_preprocessor)
    rows = np.concatenate([batch["input_word_ids"].numpy() for batch in dataset])
    np.testing.assert_array_equal(
        rows, minilm_tokenizer.encode_batch(TEXTS, seq_length=16)["input_word_ids"])
    ragged = tf.data.Dataset.from_tensor_slices(TEXTS).batch(4).map(minilm_preprocessor.tokenize)
    assert next(iter(ragged)).to_list()[0] == [7592, 2088, 999]


@pytest.fixture
def another_process(monkeypatch):
    """This process as another one sees it: no config made here has named a vocabulary, so
    only a .keras file's assets (or set_vocabulary) can bring one."""
    monkeypatch.setattr(tokenizer_layer, "_NAMED_VOCABULARIES", {})


def test_keras_model_saves_and_reloads(tmp_path, hard_preprocessors):
    preprocessor = hard_preprocessors[True]
    config = preprocessor.get_config()
    # The vocabulary is an asset of the .keras file (below); the config names it only.
    assert "vocabulary" not in config and config["lower_case"] is True
    assert config["seq_length"] == 16 and config["vocabulary_size"] == len(VOCABULARY)
    # In memory (clone_model, from_config(get_config())) the copy is complete.
    clone = BertPreprocessor.from_config(config)
    assert clone.get_config() == config and clone.vocabulary == VOCABULARY
    # A config from before the vocabulary became an asset holds the tokens, and is complete.
    old = BertPreprocessor.from_config({**config, "vocabulary": VOCABULARY})
    assert old.vocabulary == VOCABULARY

    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, preprocessor(inputs))
    texts = tf.constant(["Hello worlds!", "ΟΔΟΣ ß"])
    expected = model(texts)["input_word_ids"].numpy()
    assert [[VOCABULARY[i] for i in row[:6]] for row in expected] == [
        ["[CLS]", "hello", "world", "##s", "!", "[SEP]"],
        ["[CLS]", "οδος", "ß", "[SEP]", "[PAD]", "[PAD]"]]
    path = str(tmp_path / "model.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(reloaded(texts)["input_word_ids"], expected)


def test_in_memory_copies_do_not_depend_on_what_is_alive():
    """from_config finds a vocabulary that a config made in this process named, whether or not
    the preprocessor it came from is still alive."""
    config = BertPreprocessor(vocabulary=VOCABULARY + ["zebra"], seq_length=16).get_config()
    gc.collect()
    clone = BertPreprocessor.from_config(config)
    assert clone.vocabulary == VOCABULARY + ["zebra"] and clone.get_config() == config
    assert keras.models.clone_model(keras.Sequential([clone])).layers[0].vocabulary == \
        VOCABULARY + ["zebra"]


def test_a_config_from_another_process_waits_for_its_vocabulary(hard_preprocessors,
                                                                 another_process):
    other_config = BertPreprocessor(vocabulary=VOCABULARY + ["zebra"],
                                    seq_length=16).get_config()
    tokenizer_layer._NAMED_VOCABULARIES.clear()  # the config travelled; the tokens did not
    pending = BertPreprocessor.from_config(other_config)
    assert pending.get_config() == other_config
    with pytest.raises(ValueError, match=r"names its vocabulary \(67 tokens\) but does not "
                                         r"hold it: load the whole model"):
        pending(tf.constant(["hello"]))
    with pytest.raises(ValueError, match="names its vocabulary"):
        pending.with_seq_length(8)
    pending.set_vocabulary(VOCABULARY + ["zebra"])
    np.testing.assert_array_equal(
        pending(tf.constant(["Hello worlds!"]))["input_word_ids"],
        hard_preprocessors[True](tf.constant(["Hello worlds!"]))["input_word_ids"])


def test_keras_file_loads_in_another_process(tmp_path, another_process):
    """The .keras file carries the vocabulary as the tokenizer's asset; loading reads it, and
    the packer takes its [CLS], [SEP] and [PAD] ids (here not the usual ones)."""
    vocabulary = ["[UNK]", "hello", "[SEP]", "world", "[PAD]", "[CLS]", "!"]
    preprocessor = BertPreprocessor(vocabulary=vocabulary, seq_length=8, name="shuffled")
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, preprocessor(inputs))
    path = str(tmp_path / "shuffled.keras")
    model.save(path)
    assert "assets/layers/bert_preprocessor/tokenizer/vocab.txt" in \
        zipfile.ZipFile(path).namelist()
    tokenizer_layer._NAMED_VOCABULARIES.clear()
    reloaded = keras.saving.load_model(path)
    assert reloaded.get_layer("shuffled").vocabulary == vocabulary
    assert reloaded(tf.constant(["Hello world!"]))["input_word_ids"].numpy().tolist() == [
        [5, 1, 3, 6, 2, 4, 4, 4]]


def test_a_vocabulary_that_does_not_match_its_config_is_refused(tmp_path, another_process):
    config = BertPreprocessor(vocabulary=VOCABULARY, seq_length=16).get_config()
    tokenizer_layer._NAMED_VOCABULARIES.clear()
    pending = BertPreprocessor.from_config(config)
    (tmp_path / "tokenizer").mkdir()
    (tmp_path / "tokenizer" / "vocab.txt").write_text("".join(
        t + "\n" for t in VOCABULARY + ["zebra"]), encoding="utf-8")
    with pytest.raises(ValueError, match="does not match the one the model was saved with"):
        pending.load_assets(str(tmp_path))
    with pytest.raises(ValueError, match="names its vocabulary"):  # still waiting for it
        pending(tf.constant(["hello"]))


def test_composed_of_a_tokenizer_and_a_packer(hard_preprocessors):
    preprocessor = hard_preprocessors[False]
    assert isinstance(preprocessor.tokenizer, BertTokenizerLayer)
    assert isinstance(preprocessor.packer, BertPackerLayer)
    texts = tf.constant(TEXTS)
    assert preprocessor.tokenizer(texts).to_list() == preprocessor.tokenize(texts).to_list()
    packed = preprocessor.packer(preprocessor.tokenizer(texts))
    for name, value in preprocessor(texts).items():
        np.testing.assert_array_equal(packed[name], value)
    # set_vocabulary moves the packer to the new vocabulary's special ids.
    copy = BertPreprocessor(vocabulary=VOCABULARY, seq_length=4)
    copy.set_vocabulary(["[UNK]", "[SEP]", "[CLS]", "[PAD]", "a"])
    assert (copy.cls_id, copy.sep_id, copy.pad_id) == (2, 1, 3)
    assert copy(tf.constant(["a"]))["input_word_ids"].numpy().tolist() == [[2, 4, 1, 3]]


def test_not_xla_compilable(hard_preprocessors):
    from keras.src.trainers.trainer import model_supports_jit
    preprocessor = hard_preprocessors[True]
    assert preprocessor.supports_jit is False
    inputs = keras.Input(shape=(), dtype="string")
    assert model_supports_jit(keras.Model(inputs, preprocessor(inputs))) is False


def test_saved_model_round_trip(tmp_path, minilm_preprocessor):
    class Serving(tf.Module):
        def __init__(self, preprocessor):
            super().__init__()
            self.preprocessor = preprocessor

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def __call__(self, texts):
            return self.preprocessor(texts)

    tf.saved_model.save(Serving(minilm_preprocessor), str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    texts = tf.constant(TEXTS)
    np.testing.assert_array_equal(loaded(texts)["input_word_ids"],
                                  minilm_preprocessor(texts)["input_word_ids"])


def test_input_shapes_and_errors(hard_preprocessors):
    preprocessor = hard_preprocessors[True]
    column = preprocessor(tf.constant([["hello"], ["world"]]))["input_word_ids"]
    assert column.shape == (2, 16)
    assert column.numpy()[:, :3].tolist() == [[2, 5, 3], [2, 7, 3]]
    with pytest.raises(ValueError, match="one or two text tensors"):
        preprocessor((tf.constant(["a"]),) * 3)
    with pytest.raises(ValueError, match="give exactly one of"):
        BertPreprocessor()
    with pytest.raises(ValueError, match="packing needs them"):
        BertPreprocessor(vocabulary=["[UNK]", "a"])


def test_top_level_export():
    assert TopLevelPreprocessor is BertPreprocessor


def test_keep_special_tokens_in_graph(tmp_path, minilm_dir):
    keep = BertPreprocessor.from_pretrained(minilm_dir, seq_length=12, keep_special_tokens=True)
    default = BertPreprocessor.from_pretrained(minilm_dir, seq_length=12)
    texts = tf.constant(["The [MASK] sat.", "[CLS]x[SEP] [mask]"])
    # MiniLM's uncased vocabulary: [CLS] 101, [SEP] 102, [MASK] 103, "[" 1031, "]" 1033.
    assert keep.tokenize(texts).to_list() == [[1996, 103, 2938, 1012],
                                              [101, 1060, 102, 1031, 7308, 1033]]
    assert default.tokenize(texts).to_list()[0] == [1996, 1031, 7308, 1033, 2938, 1012]
    packed = keep((tf.constant(["a [MASK]"]), tf.constant(["[SEP]"])))
    assert packed["input_word_ids"].numpy()[0, :7].tolist() == [101, 1037, 103, 102, 102, 102, 0]
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, keep(inputs))
    path = str(tmp_path / "keep.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(reloaded(texts)["input_word_ids"],
                                  keep(texts)["input_word_ids"])
