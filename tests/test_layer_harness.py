"""One harness for every public layer and model, in the spirit of keras-hub's
``keras_hub/src/tests/test_case.py``.

Each subject is one row of ``SUBJECTS``: how to build it small (constructor arguments other than
the defaults), its call arguments, and the outputs it must give (structure, shapes, dtype under
float32 and under ``mixed_float16``). Four checks run over every row:

* ``run_layer_test``: build and call give the expected shapes and dtypes, finite values; a
  symbolic call (``compute_output_spec``) gives the same shapes and dtypes; a second call makes
  no weights; the ``training=True`` path gives the same shapes and dtypes.
* ``run_serialization_test``: ``get_config`` holds the constructor arguments; ``from_config``
  and the registered-name route (``serialize_keras_object`` -> ``deserialize_keras_object``, as
  ``load_model`` does) give the same class with an equal config, and, with the weights copied
  over, equal outputs.
* ``run_model_saving_test``: ``.keras`` save and ``keras.saving.load_model`` give the same class,
  an equal config and equal outputs (atol 1e-5); a layer is saved inside a functional model.
* ``run_precision_test``: under the global ``mixed_float16`` policy the subject builds and runs
  with that policy, its variables stay float32, its outputs have the dtype the code documents
  (float16, or float32 for pooling, heads' logits and task outputs) and stay close to a float32
  subject's with the same weights.

Adding a layer is adding a row. Subjects are imported through the package's stable public names
only (``keras_bert.layers``, ``keras_bert.tokenization`` and the top-level ``keras_bert``)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
from typing import Any, Callable

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert
from keras_bert import layers as bert_layers
from keras_bert import tokenization as bert_tokenization

# Tiny sizes: every subject builds and saves in well under a second.
VOCAB, HIDDEN, HEADS, INTERMEDIATE, LAYERS, MAX_POSITIONS = 60, 32, 2, 64, 2, 32
BATCH, SEQ = 2, 8
ENCODER_KWARGS = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, intermediate_size=INTERMEDIATE,
                      max_position_embeddings=MAX_POSITIONS)
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
              "dog", "ran", "!", ".", "##s", "un", "##known"]


# ============================================================================ the harness
@dataclasses.dataclass(frozen=True)
class Out:
    """One expected output: its shape, its dtype under float32, and under mixed_float16 (None:
    float16 for a float output, unchanged otherwise)."""
    shape: tuple
    dtype: str = "float32"
    mixed_dtype: str | None = None

    def dtype_under(self, mixed: bool) -> str:
        if not mixed:
            return self.dtype
        if self.mixed_dtype is not None:
            return self.mixed_dtype
        return "float16" if self.dtype == "float32" else self.dtype


def _dtype(x) -> str:
    return keras.backend.standardize_dtype(x.dtype)


def _tensors(args):
    """Call arguments as tensors (string arrays as tf.string: Keras does not convert those, and
    a nested argument may not mix tensors and arrays)."""
    def convert(a):
        if isinstance(a, np.ndarray) and a.dtype.kind in "OUS":
            return tf.constant(a.astype(str).tolist(), tf.string)
        return tf.convert_to_tensor(a)
    return keras.tree.map_structure(convert, args)


def call_subject(subject, args, **kwargs):
    """``subject(*args, **kwargs)`` with the arrays converted."""
    return subject(*_tensors(args), **kwargs)


def takes_training(subject) -> bool:
    """Whether ``subject.call`` has a ``training`` argument (every model has)."""
    return isinstance(subject, keras.Model) or "training" in inspect.signature(
        subject.call).parameters


def assert_outputs(outputs, expected, mixed: bool = False):
    """``outputs`` has ``expected``'s structure, and each leaf its shape and dtype."""
    keras.tree.assert_same_structure(outputs, expected)
    if isinstance(expected, dict):
        assert sorted(outputs) == sorted(expected)
    for out, spec in zip(keras.tree.flatten(outputs), keras.tree.flatten(expected)):
        assert tuple(out.shape) == spec.shape, (tuple(out.shape), spec)
        assert _dtype(out) == spec.dtype_under(mixed), (_dtype(out), spec, mixed)


def as_array(x) -> np.ndarray:
    """A NumPy array of an output; a ragged one padded with -1 (which no id equals)."""
    if isinstance(x, tf.RaggedTensor):
        x = x.to_tensor(default_value=-1)
    return np.asarray(x)


def assert_same_outputs(actual, desired, atol=1e-5, rtol=0.0):
    keras.tree.assert_same_structure(actual, desired)
    for a, d in zip(keras.tree.flatten(actual), keras.tree.flatten(desired)):
        a, d = as_array(a), as_array(d)
        assert a.shape == d.shape and a.dtype == d.dtype, (a.shape, a.dtype, d.shape, d.dtype)
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a.astype(np.float32), d.astype(np.float32),
                                       atol=atol, rtol=rtol)
        else:
            np.testing.assert_array_equal(a, d)


def as_json(config):
    """A config as a .keras file stores it (tuples become lists)."""
    return json.loads(json.dumps(config))


def copy_weights(source, target) -> None:
    """The default state copy: ``target.set_weights(source.get_weights())``."""
    weights = source.get_weights()
    assert len(target.weights) == len(weights)
    target.set_weights(weights)


def symbolic_inputs(args):
    """keras.Input placeholders shaped like ``args`` (batch axis free)."""
    def placeholder(a, name=None):
        a = np.asarray(a)
        dtype = "string" if a.dtype.kind in "OUS" else keras.backend.standardize_dtype(a.dtype)
        return keras.Input(shape=a.shape[1:], dtype=dtype, name=name)

    def placeholders(arg):
        if isinstance(arg, dict):  # named as a functional model's dict inputs must be
            return {name: placeholder(value, name) for name, value in arg.items()}
        return keras.tree.map_structure(placeholder, arg)
    return tuple(placeholders(arg) for arg in args)


def wrap_layer(layer, args) -> keras.Model:
    """A functional model whose only computation is ``layer(*args)``, for saving a layer."""
    inputs = symbolic_inputs(args)
    outputs = layer(*inputs)
    if isinstance(outputs, tuple):  # a functional model gives its outputs back as a list
        outputs = list(outputs)
    return keras.Model(inputs[0] if len(inputs) == 1 else list(inputs), outputs)


def call_wrapper(model, args):
    args = _tensors(args)
    return model(args[0] if len(args) == 1 else list(args))


def run_layer_test(factory: Callable[[], Any], args: tuple, expected, is_model: bool = False):
    """Builds ``factory()``, calls it on ``args`` and checks the outputs' shapes and dtypes, the
    same from a symbolic call (for a layer: its ``compute_output_spec``), and that building made
    every weight. Returns (subject, outputs)."""
    subject = factory()
    outputs = call_subject(subject, args)
    assert subject.built
    assert_outputs(outputs, expected)
    for out in keras.tree.flatten(outputs):
        if _dtype(out).startswith("float"):
            assert np.all(np.isfinite(np.asarray(out))), "non-finite outputs"
    # A symbolic call (functional model inputs with a free batch axis) gives the same specs.
    symbolic = subject(*symbolic_inputs(args))
    keras.tree.assert_same_structure(symbolic, outputs)
    for spec, out in zip(keras.tree.flatten(symbolic), keras.tree.flatten(outputs)):
        assert isinstance(spec, keras.KerasTensor)
        assert len(spec.shape) == len(out.shape)
        assert all(s is None or s == o for s, o in zip(spec.shape, out.shape)), (spec, out.shape)
        assert _dtype(spec) == _dtype(out), (spec, out.dtype)
    if not is_model:
        # Calling again adds no weights: everything was made by build.
        count = len(subject.weights)
        call_subject(subject, args)
        assert len(subject.weights) == count
    if takes_training(subject):  # the training path (dropout, fused LayerNorm) gives the same
        assert_outputs(call_subject(subject, args, training=True), expected)
    return subject, outputs


def config_holds(value, given) -> bool:
    """Whether a config value holds ``given``: equal, or for a dict, every given key with a value
    it holds (a config may fill in more, e.g. TabularFeatures' max_categories)."""
    if isinstance(given, dict):
        return isinstance(value, dict) and all(
            key in value and config_holds(value[key], v) for key, v in given.items())
    return value == given


def run_serialization_test(factory, args, copy_state=copy_weights, init_kwargs=None,
                           not_in_config=()):
    """Config round trip: ``get_config()`` holds every JSON-able ``init_kwargs`` value it was
    built with (but ``not_in_config``); ``from_config`` and the registered-name route give the
    same class with an equal config; once the state is copied (``copy_state(source, target)``,
    the weights by default) the outputs are equal."""
    original = factory()
    reference = call_subject(original, args)
    config = as_json(original.get_config())  # as a .keras file stores it
    for key, value in (init_kwargs or {}).items():
        try:
            value = as_json(value)
        except TypeError:
            continue  # a layer or model argument: its own row checks it
        if key not in not_in_config:
            assert key in config and config_holds(config[key], value), (key, value,
                                                                        config.get(key))

    restored = type(original).from_config(config)
    assert type(restored) is type(original)
    assert as_json(restored.get_config()) == config

    # The registered-name route that load_model takes ("keras_bert>Name").
    serialized = keras.saving.serialize_keras_object(original)
    assert serialized["registered_name"] == f"keras_bert>{type(original).__name__}"
    revived = keras.saving.deserialize_keras_object(as_json(serialized))
    assert type(revived) is type(original)
    assert as_json(revived.get_config()) == config

    if not restored.built:
        call_subject(restored, args)  # builds a layer, so it has weights to receive
    copy_state(original, restored)
    assert_same_outputs(call_subject(restored, args), reference)
    return restored


def run_model_saving_test(factory, args, tmp_path, is_model: bool, check_reloaded=None):
    """``.keras`` save and ``keras.saving.load_model``: the same class (the layer inside the
    wrapper for a layer) and the same outputs (atol 1e-5)."""
    subject = factory()
    if is_model:
        model = subject
        call = call_subject
    else:
        model = wrap_layer(subject, args)
        call = call_wrapper
    reference = call(model, args)
    path = str(tmp_path / "subject.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    if is_model:
        assert type(reloaded) is type(model)
        reloaded_subject = reloaded
    else:
        reloaded_subject = reloaded.get_layer(subject.name)
        assert type(reloaded_subject) is type(subject)
    assert as_json(reloaded_subject.get_config()) == as_json(subject.get_config())
    assert_same_outputs(call(reloaded, args), reference, atol=1e-5)
    if check_reloaded is not None:
        check_reloaded(subject, reloaded_subject)
    return reloaded


@contextlib.contextmanager
def global_policy(name: str):
    """The global dtype policy ``name`` inside the block; the previous one afterwards."""
    previous = keras.config.dtype_policy().name
    keras.mixed_precision.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_dtype_policy(previous)


@pytest.fixture
def mixed_float16():
    """The global mixed_float16 policy for one test; float32 again afterwards."""
    keras.mixed_precision.set_dtype_policy("mixed_float16")
    try:
        yield
    finally:
        keras.mixed_precision.set_dtype_policy("float32")


def run_precision_test(factory, args, expected, copy_state=copy_weights,
                       policy: str = "mixed_float16", atol=5e-2):
    """Under the global mixed_float16 policy (the caller sets it): the subject builds and runs,
    computes in float16 unless its outputs are documented float32, keeps float32 variables,
    gives outputs of the expected dtypes, and stays within ``atol`` (relative to the largest
    value) of a float32 subject with the same weights."""
    assert keras.config.dtype_policy().name == "mixed_float16"
    with global_policy("float32"):
        reference_subject = factory()
    reference = call_subject(reference_subject, args)
    assert all(_dtype(v) != "float16" for v in reference_subject.weights)

    subject = factory()
    outputs = call_subject(subject, args)
    assert subject.dtype_policy.name == policy
    assert_outputs(outputs, expected, mixed=True)
    for variable in subject.weights:
        # Mixed precision keeps float variables float32 (TabularFeatures' keys are int64).
        assert _dtype(variable) in ("float32", "int64", "int32"), (variable.path, variable.dtype)
    if subject.weights:
        assert any(_dtype(v) == "float32" for v in subject.weights)
    for out in keras.tree.flatten(outputs):
        if _dtype(out).startswith("float"):
            assert np.all(np.isfinite(np.asarray(out, np.float32))), "non-finite outputs"
    if takes_training(subject):
        assert_outputs(call_subject(subject, args, training=True), expected, mixed=True)

    if not subject.built:
        call_subject(subject, args)
    copy_state(reference_subject, subject)
    outputs = call_subject(subject, args)
    for mixed, full in zip(keras.tree.flatten(outputs), keras.tree.flatten(reference)):
        mixed, full = as_array(mixed), as_array(full)
        if full.dtype.kind == "f":
            scale = max(float(np.abs(full).max()), 1.0)
            np.testing.assert_allclose(mixed.astype(np.float32), full, atol=atol * scale)
        else:
            np.testing.assert_array_equal(mixed, full)
    return subject


# ============================================================================ inputs
def _rng(seed=0):
    return np.random.default_rng(seed)


def encoder_inputs(batch=BATCH, seq=SEQ, seed=0):
    """int32 TF Hub inputs: [CLS] first, a second segment, the last row padded."""
    rng = _rng(seed)
    ids = rng.integers(5, VOCAB, size=(batch, seq)).astype(np.int32)
    ids[:, 0] = 2
    mask = np.ones_like(ids)
    types = np.zeros_like(ids)
    types[:, seq // 2:] = 1
    mask[-1, seq - 3:] = 0
    ids[-1, seq - 3:] = 0
    types[-1, seq - 3:] = 0
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def hidden_states(batch=BATCH, seq=SEQ, width=HIDDEN, seed=1):
    return _rng(seed).normal(size=(batch, seq, width)).astype(np.float32)


def mask_bias():
    return np.asarray(bert_layers.attention_mask_bias(encoder_inputs()["input_mask"]))


def masked_lm_positions():
    return np.array([[1, 4, 6], [2, 3, 0]], np.int32)


def choice_inputs(num_choices=3):
    packed = encoder_inputs(batch=BATCH * num_choices, seed=3)
    return {k: v.reshape(BATCH, num_choices, SEQ) for k, v in packed.items()}


def texts():
    return np.array(["The cat sat on the mat!", "dogs ran unknown"], dtype=object)


def text_pairs():
    return (np.array(["the cat sat", "a dog"], dtype=object),
            np.array(["on the mat . the dog ran", ""], dtype=object))


def token_ids(length=5, seed=4):
    """Dense token ids [batch, length]. A dense input has no padding: the last row's trailing
    zeros are packed as tokens."""
    ids = _rng(seed).integers(5, len(VOCABULARY), size=(BATCH, length)).astype(np.int32)
    ids[-1, length - 2:] = 0
    return ids


def tabular_inputs():
    return {"age": np.array([31.0, np.nan], np.float32),
            "country": np.array(["fr", "zz"], dtype=object)}


# ============================================================================ factories
def seeded_table(**kwargs):
    """The word-embedding table for a standalone MaskedLMHead, seeded so that the same one is
    made every time: the head ties to the table without owning it (inside BertPretrainer it is
    the encoder's), and its from_config makes a new table from the saved config, so only a
    seeded table comes back the same from a config or a .keras file."""
    table = keras.layers.Embedding(
        VOCAB, HIDDEN, embeddings_initializer=keras.initializers.RandomNormal(stddev=0.5, seed=7),
        name="word_embeddings")
    table.build((None,))
    return bert_layers.MaskedLMHead(table, **kwargs)


def copy_vocabulary(source, target):
    """A preprocessor's or tokenizer's state is its vocabulary, which its config names but does
    not hold (a .keras asset)."""
    assert not target.weights
    target.set_vocabulary(list(source.vocabulary))


def same_vocabulary(original, reloaded):
    original = getattr(original, "preprocessor", original)
    reloaded = getattr(reloaded, "preprocessor", reloaded)
    assert type(reloaded) is type(original)
    assert isinstance(reloaded, (keras_bert.BertPreprocessor,
                                 bert_tokenization.BertTokenizerLayer))
    assert reloaded.vocabulary == original.vocabulary == VOCABULARY
    text = tf.constant(texts().tolist())
    assert_same_outputs(reloaded(text), original(text))


def encoder(**overrides):
    return keras_bert.BertEncoder(**{**ENCODER_KWARGS, "name": "encoder", **overrides})


def encoder_from_bert_config(**kwargs):
    return keras_bert.BertEncoder.from_bert_config(
        keras_bert.BertConfig(**ENCODER_KWARGS, hidden_act="gelu_exact", layer_norm_eps=1e-7),
        **kwargs)


def same_bert_config(original, reloaded):
    assert isinstance(reloaded.bert_config, keras_bert.BertConfig)
    assert reloaded.bert_config == original.bert_config
    assert reloaded.bert_config.hidden_act == "gelu_exact"


def on_encoder(task_class):
    """A factory for a task model on a fresh tiny encoder."""
    return lambda **kwargs: task_class(encoder(), **kwargs)


def classifier_with_preprocessor(**kwargs):
    return keras_bert.BertClassifier(
        encoder(), preprocessor=keras_bert.BertPreprocessor(**PREPROCESSOR_KWARGS), **kwargs)


# ============================================================================ the subjects
@dataclasses.dataclass
class Subject:
    """One row: ``make(**kwargs)`` builds the subject; ``args()`` its positional call arguments
    (NumPy, made fresh per test); ``expected`` a structure of ``Out`` as its outputs."""
    id: str
    make: Callable[..., Any]
    kwargs: dict
    args: Callable[[], tuple]
    expected: Any
    is_model: bool = False
    copy_state: Callable = copy_weights  # how from_config's copy gets the state
    check_reloaded: Callable | None = None  # more checks on (original, reloaded)
    not_in_config: tuple = ()  # constructor arguments deliberately not in get_config
    mixed_policy: str = "mixed_float16"  # the subject's own policy under the global mixed one
    slow: bool = False
    xfail: dict = dataclasses.field(default_factory=dict)  # check -> reason (a known bug)

    @property
    def factory(self) -> Callable[[], Any]:
        return functools.partial(self.make, **self.kwargs)


def _f32(*shape):  # a float output that stays float32 under mixed precision (documented)
    return Out(tuple(shape), "float32", "float32")


def _half(*shape):  # a float output computed in the policy's dtype
    return Out(tuple(shape))


def _int(*shape):
    return Out(tuple(shape), "int32")


PACKED = {name: _int(BATCH, SEQ) for name in ("input_word_ids", "input_mask", "input_type_ids")}
ENCODER_OUT = {"sequence_output": _half(BATCH, SEQ, HIDDEN), "pooled_output": _half(BATCH, HIDDEN),
               "encoder_outputs": [_half(BATCH, SEQ, HIDDEN)] * LAYERS}
TABULAR_KWARGS = dict(
    numeric_features={"age": {"mean": 40.0, "variance": 100.0}},
    categorical_features={"country": {"vocabulary": ["fr", "us", "de"], "embedding_dim": 3}})
PREPROCESSOR_KWARGS = dict(vocabulary=VOCABULARY, seq_length=SEQ, name="preprocessor")

# Constructor arguments other than their defaults, so that a config that drops one, or records
# it wrong, fails the config check.
LAYER_SUBJECTS = [
    Subject("BertDropout", bert_layers.BertDropout, dict(rate=0.2, seed=3, name="dropout"),
            lambda: (hidden_states(),), _half(BATCH, SEQ, HIDDEN)),
    Subject("BertEmbeddings", bert_layers.BertEmbeddings,
            dict(vocab_size=VOCAB, hidden_size=HIDDEN, max_position_embeddings=MAX_POSITIONS,
                 type_vocab_size=3, initializer_range=0.05, hidden_dropout_prob=0.2,
                 layer_norm_eps=1e-6,
                 name="embeddings"),
            lambda: (encoder_inputs()["input_word_ids"], encoder_inputs()["input_type_ids"] * 2),
            _half(BATCH, SEQ, HIDDEN)),
    # float32 whatever the policy: its dtype defaults to float32 (documented output float32).
    Subject("TabularFeatures", bert_layers.TabularFeatures,
            dict(TABULAR_KWARGS, name="tabular_features"), lambda: (tabular_inputs(),),
            _f32(BATCH, 2 + 3), mixed_policy="float32"),
    Subject("MaskedLMHead", seeded_table,
            dict(hidden_act="gelu_exact", initializer_range=0.05, layer_norm_eps=1e-6,
                 name="masked_lm"),
            lambda: (hidden_states(), masked_lm_positions()), _f32(BATCH, 3, VOCAB)),
    Subject("NextSentenceHead", bert_layers.NextSentenceHead,
            dict(hidden_size=HIDDEN, initializer_range=0.05, name="next_sentence"),
            lambda: (hidden_states()[:, 0],), _f32(BATCH, 2)),
    Subject("BertLayerNormalization", bert_layers.BertLayerNormalization,
            dict(epsilon=1e-6, name="layer_norm"), lambda: (hidden_states(),),
            _half(BATCH, SEQ, HIDDEN)),
    Subject("SentencePooling-mean", bert_layers.SentencePooling,
            dict(mode="mean", normalize=True, name="pooling"),
            lambda: (hidden_states(), encoder_inputs()["input_mask"]), _f32(BATCH, HIDDEN)),
    Subject("SentencePooling-cls", bert_layers.SentencePooling, dict(mode="cls", name="pooling"),
            lambda: (hidden_states(), encoder_inputs()["input_mask"]), _f32(BATCH, HIDDEN)),
    Subject("ClassificationHead", bert_layers.ClassificationHead,
            dict(num_classes=3, dropout=0.2, initializer_range=0.05, name="classifier"),
            lambda: (hidden_states()[:, 0],), _f32(BATCH, 3)),
    Subject("SpanHead", bert_layers.SpanHead, dict(initializer_range=0.05, name="span"),
            lambda: (hidden_states(),), (_f32(BATCH, SEQ), _f32(BATCH, SEQ))),
    Subject("TokenClassificationHead", bert_layers.TokenClassificationHead,
            dict(num_classes=5, dropout=0.2, initializer_range=0.05, name="tagger"),
            lambda: (hidden_states(),), _f32(BATCH, SEQ, 5)),
    Subject("BertSelfAttention", bert_layers.BertSelfAttention,
            dict(hidden_size=HIDDEN, num_attention_heads=4, initializer_range=0.05,
                 attention_probs_dropout_prob=0.2, name="attention"),
            lambda: (hidden_states(), mask_bias()), _half(BATCH, SEQ, HIDDEN)),
    Subject("TransformerBlock", bert_layers.TransformerBlock,
            dict(hidden_size=HIDDEN, num_attention_heads=4, intermediate_size=INTERMEDIATE,
                 hidden_act="gelu_exact", hidden_dropout_prob=0.2,
                 attention_probs_dropout_prob=0.3,
                 initializer_range=0.05, layer_norm_eps=1e-6, name="block"),
            lambda: (hidden_states(), mask_bias()), _half(BATCH, SEQ, HIDDEN)),
    # A layer with no weights: its state is the vocabulary, a .keras asset, not in the config.
    Subject("BertPreprocessor", keras_bert.BertPreprocessor,
            dict(PREPROCESSOR_KWARGS, lower_case=True), lambda: (texts(),), PACKED,
            copy_state=copy_vocabulary, check_reloaded=same_vocabulary,
            not_in_config=("vocabulary",)),
    Subject("BertPreprocessor-pairs-keep_special_tokens", keras_bert.BertPreprocessor,
            dict(PREPROCESSOR_KWARGS, lower_case=False, keep_special_tokens=True),
            lambda: (text_pairs(),), PACKED, copy_state=copy_vocabulary,
            check_reloaded=same_vocabulary, not_in_config=("vocabulary",)),
    Subject("BertTokenizerLayer", bert_tokenization.BertTokenizerLayer,
            dict(vocabulary=VOCABULARY, lower_case=True, name="tokenizer"), lambda: (texts(),),
            _int(BATCH, None), copy_state=copy_vocabulary, check_reloaded=same_vocabulary,
            not_in_config=("vocabulary",)),
    Subject("BertTokenizerLayer-cased-keep_special_tokens", bert_tokenization.BertTokenizerLayer,
            dict(vocabulary=VOCABULARY, lower_case=False, keep_special_tokens=True,
                 name="tokenizer"),
            lambda: (np.array(["The [MASK] sat!", "[CLS] dogs"], dtype=object),),
            _int(BATCH, None), copy_state=copy_vocabulary, check_reloaded=same_vocabulary,
            not_in_config=("vocabulary",)),
    Subject("BertPackerLayer", bert_tokenization.BertPackerLayer,
            dict(seq_length=SEQ, cls_id=2, sep_id=3, pad_id=0, name="packer"),
            lambda: (token_ids(),), PACKED),
    Subject("BertPackerLayer-pairs", bert_tokenization.BertPackerLayer,
            dict(seq_length=SEQ, cls_id=2, sep_id=3, pad_id=0, name="packer"),
            lambda: ((token_ids(), token_ids(3, seed=5)),), PACKED),
]

MODEL_SUBJECTS = [
    Subject("BertEncoder", encoder,
            dict(hidden_act="relu", hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.3,
                 type_vocab_size=3, initializer_range=0.05, layer_norm_eps=1e-6),
            lambda: (encoder_inputs(),), ENCODER_OUT, is_model=True),
    Subject("BertEncoder.from_bert_config(BertConfig)", encoder_from_bert_config,
            dict(name="encoder"), lambda: (encoder_inputs(),), ENCODER_OUT, is_model=True,
            check_reloaded=same_bert_config),
    Subject("BertPretrainer", on_encoder(keras_bert.BertPretrainer), dict(name="pretrainer"),
            lambda: (dict(encoder_inputs(), masked_lm_positions=masked_lm_positions()),),
            {"mlm_logits": _f32(BATCH, 3, VOCAB), "nsp_logits": _f32(BATCH, 2)}, is_model=True),
    Subject("BertClassifier", on_encoder(keras_bert.BertClassifier),
            dict(num_classes=3, label_names=["a", "b", "c"], dropout=0.2, activation="sigmoid",
                 name="classifier"),
            lambda: (encoder_inputs(),), _f32(BATCH, 3), is_model=True),
    Subject("BertClassifier-with-preprocessor", classifier_with_preprocessor,
            dict(num_classes=2, name="classifier"), lambda: (encoder_inputs(),), _f32(BATCH, 2),
            is_model=True, check_reloaded=same_vocabulary),
    Subject("BertClassifier-features-mean-regression", on_encoder(keras_bert.BertClassifier),
            dict(TABULAR_KWARGS, num_classes=1, pooling="mean", feature_hidden_units=16,
                 name="classifier"),
            lambda: (dict(encoder_inputs(), **tabular_inputs()),), _f32(BATCH, 1), is_model=True),
    Subject("BertTokenClassifier", on_encoder(keras_bert.BertTokenClassifier),
            dict(label_names=["O", "B-PER", "I-PER"], dropout=0.2, window_stride=3,
                 name="tagger"),
            lambda: (encoder_inputs(),), _f32(BATCH, SEQ, 3), is_model=True),
    Subject("BertQuestionAnswerer", on_encoder(keras_bert.BertQuestionAnswerer),
            dict(doc_stride=4, max_query_length=3, name="qa"), lambda: (encoder_inputs(),),
            {"start_logits": _f32(BATCH, SEQ), "end_logits": _f32(BATCH, SEQ)}, is_model=True),
    Subject("BertMultipleChoice", on_encoder(keras_bert.BertMultipleChoice),
            dict(num_choices=3, dropout=0.2, name="choice"), lambda: (choice_inputs(3),),
            _f32(BATCH, 3), is_model=True),
    Subject("BertEmbedder", on_encoder(keras_bert.BertEmbedder),
            dict(pooling="second_to_last_mean", normalize=True, feature_layers=[-1, -2],
                 name="embedder"),
            lambda: (encoder_inputs(),),
            {"embedding": _f32(BATCH, HIDDEN), "token_features": _f32(BATCH, SEQ, 2 * HIDDEN)},
            is_model=True),
]

SUBJECTS = LAYER_SUBJECTS + MODEL_SUBJECTS


def _params(check: str):
    params = []
    for s in SUBJECTS:
        marks = [pytest.mark.slow] if s.slow else []
        if check in s.xfail:
            marks.append(pytest.mark.xfail(reason=s.xfail[check], strict=True))
        params.append(pytest.param(s, id=s.id, marks=marks))
    return params


# ============================================================================ the checks
@pytest.mark.parametrize("subject", _params("build_and_call"))
def test_build_and_call(subject):
    run_layer_test(subject.factory, subject.args(), subject.expected, subject.is_model)


@pytest.mark.parametrize("subject", _params("config_round_trip"))
def test_config_round_trip(subject):
    run_serialization_test(subject.factory, subject.args(), subject.copy_state, subject.kwargs,
                           subject.not_in_config)


@pytest.mark.parametrize("subject", _params("keras_file_round_trip"))
def test_keras_file_round_trip(subject, tmp_path):
    run_model_saving_test(subject.factory, subject.args(), tmp_path, subject.is_model,
                          subject.check_reloaded)


@pytest.mark.parametrize("subject", _params("mixed_float16"))
def test_mixed_float16(subject, mixed_float16):
    run_precision_test(subject.factory, subject.args(), subject.expected, subject.copy_state,
                       subject.mixed_policy)


def test_mixed_policy_fixture_restored_float32():
    """Runs after the mixed_float16 cases: the fixture left the global policy float32."""
    assert keras.config.dtype_policy().name == "float32"


def test_every_public_layer_and_model_has_a_row():
    """A new public layer or model class fails here until it has a row in SUBJECTS."""
    tested = {type(s.factory()).__name__ for s in SUBJECTS}
    public_layers = {name for name in bert_layers.__all__ if name[0].isupper()}
    public_models = {"BertEncoder", "BertPretrainer", "BertClassifier", "BertTokenClassifier",
                     "BertQuestionAnswerer", "BertMultipleChoice", "BertEmbedder",
                     "BertPreprocessor"}
    assert public_layers | public_models <= tested, sorted((public_layers | public_models)
                                                           - tested)


def test_bert_config_round_trips(tmp_path):
    """BertConfig (a dataclass, not a layer; BertEncoder's row above builds from one): its dict,
    Google and Hugging Face JSON forms round-trip."""
    config = keras_bert.BertConfig(**ENCODER_KWARGS, hidden_act="gelu_exact", layer_norm_eps=1e-7)
    assert keras_bert.BertConfig(**config.to_dict()) == config
    assert keras_bert.BertConfig.from_dict(config.to_google_dict()) == config
    assert keras_bert.BertConfig.from_hf_dict(config.to_hf_dict()) == config
    path = str(tmp_path / "bert_config.json")
    config.to_json_file(path)
    assert keras_bert.BertConfig.from_json_file(path) == config
    assert keras_bert.BertEncoder.from_bert_config(config).bert_config == config
