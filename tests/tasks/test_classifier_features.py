"""BertClassifier with numeric and categorical features beside the text, on a tiny random BERT:
the feature layer's numbers, learning statistics in fit, dict/DataFrame/TextExample inputs,
missing values, errors that name the feature, `.keras` and get_config round trips, and the
text-only classifier left as it was. The MiniLM proof that features help is
test_features_minilm.py."""

import os

import keras
import numpy as np
import pandas as pd
import pytest

from keras_bert import BertClassifier, BertPreprocessor
from keras_bert.tasks.classification import glue
from keras_bert.tasks.classification import jsonl
from keras_bert.errors import DataError
from keras_bert.tasks.input_examples import TextExample
from keras_bert.layers import TabularFeatures
from tests.tasks.tiny_checkpoint import VOCAB, tiny_encoder

TEXTS = ["the movie was good", "a terrible film", "good", "the meal was bad and the film awful"]
DATA = {"text": TEXTS, "age": [10.0, 50.0, None, 30.0], "country": ["fr", "us", None, 3]}


def preprocessor():
    return BertPreprocessor(vocabulary=VOCAB, seq_length=16)


def classifier(**kwargs):
    kwargs.setdefault("numeric_features", ["age"])
    kwargs.setdefault("categorical_features", ["country"])
    return BertClassifier(tiny_encoder(), 2, preprocessor=preprocessor(),
                          label_names=["neg", "pos"], **kwargs)


def trained(**kwargs):
    model = classifier(**kwargs)
    model.compile(learning_rate=1e-3)
    model.fit({k: v * 4 for k, v in DATA.items()}, ["pos", "neg", "pos", "neg"] * 4,
              batch_size=4, epochs=1, verbose=0)
    return model


def test_feature_layer_normalises_flags_missing_and_looks_up_categories():
    layer = TabularFeatures({"age": {"mean": 40.0, "variance": 100.0}, "stars": None},
                            {"country": {"vocabulary": ["fr", "us"], "embedding_dim": 3}})
    layer.adapt({"stars": np.array([1.0, 3.0, np.nan, 5.0])})
    assert layer.numeric_features["stars"] == {"mean": 3.0, "variance": pytest.approx(8 / 3)}
    out = layer({"age": np.array([50.0, np.nan, 20.0], "float32"),
                 "stars": np.array([5.0, 3.0, np.nan], "float32"),
                 "country": np.array(["us", "", "de"])}).numpy()
    assert out.shape == (3, 2 * 2 + 3) == (3, layer.output_width)
    np.testing.assert_allclose(out[:, :2], [[1.0, 2 / np.sqrt(8 / 3)], [0.0, 0.0], [-2.0, 0.0]],
                               rtol=1e-6)
    np.testing.assert_array_equal(out[:, 2:4], [[0, 0], [1, 0], [0, 1]])  # missing flags
    table = layer.embeddings["country"].embeddings.numpy()
    np.testing.assert_array_equal(out[:, 4:], table[[3, 0, 1]])  # us, missing, unknown
    assert layer.category_rows("country", ["fr", "us", "", None, "de"]).tolist() == [2, 3, 0, 0, 1]


def test_learned_vocabulary_keeps_the_most_frequent_values():
    layer = TabularFeatures(categorical_features={"city": {"max_categories": 2}})
    layer.adapt({"city": np.array(["b", "a", "c", "a", "", "b", "a"], object)})
    assert layer.categorical_features["city"]["vocabulary"] == ["a", "b"]
    assert layer.category_rows("city", ["a", "b", "c", ""]).tolist() == [2, 3, 1, 0]
    restored = TabularFeatures.from_config(layer.get_config())
    assert restored.category_rows("city", ["a", "b", "c"]).tolist() == [2, 3, 1]
    with pytest.raises(ValueError, match="'city' has no value in the training data"):
        TabularFeatures(categorical_features=["city"]).adapt({"city": np.array(["", ""])})
    with pytest.raises(ValueError, match="numeric feature 'age' is named twice"):
        TabularFeatures(["age", "age"])
    with pytest.raises(ValueError, match="'my age' is not a valid input name"):
        TabularFeatures(["my age"])
    with pytest.raises(ValueError, match="give both 'mean' and 'variance'"):
        TabularFeatures({"age": {"mean": 3.0}})
    with pytest.raises(ValueError, match="max_categories=1 must be >= 1 and hold the vocab"):
        TabularFeatures(categorical_features={"city": {"vocabulary": ["a", "b"],
                                                       "max_categories": 1}})


@pytest.mark.slow
def test_fit_learns_statistics_and_predictions_round_trip(tmp_path):
    model = trained()
    config = model.get_config()
    assert config["numeric_features"] == {"age": {"mean": 30.0,
                                                  "variance": pytest.approx(800 / 3)}}
    assert config["categorical_features"]["country"]["vocabulary"] == ["3", "fr", "us"]
    probabilities = model.predict(DATA, verbose=0)
    assert probabilities.shape == (4, 2)
    # The same rows as a DataFrame (pandas turns the ages into float64 with NaN).
    np.testing.assert_array_equal(model.predict(pd.DataFrame(DATA), verbose=0), probabilities)
    # predict groups rows by length; the model called on full-length packed ids agrees.
    packed = {k: v.numpy() for k, v in model.preprocessor(np.array(TEXTS)).items()}
    direct = model({**packed, "age": np.array([10, 50, np.nan, 30], "float32"),
                    "country": np.array(["fr", "us", "", "3"])})
    np.testing.assert_allclose(direct, probabilities, atol=1e-6)

    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert reloaded.feature_names == ["age", "country"]
    np.testing.assert_array_equal(reloaded.predict(DATA, verbose=0), probabilities)
    rebuilt = BertClassifier.from_config(model.get_config())
    rebuilt.set_weights(model.get_weights())
    np.testing.assert_allclose(rebuilt.predict(DATA, verbose=0), probabilities, atol=1e-6)
    assert rebuilt.get_config() == config


@pytest.mark.slow
def test_the_features_change_the_prediction():
    model = trained()
    base = model.predict(DATA, verbose=0)
    for name, values in (("age", [90.0, 1.0, 70.0, None]), ("country", ["us", "", "fr", "de"])):
        changed = model.predict({**DATA, name: values}, verbose=0)
        assert np.abs(changed - base).max() > 1e-4, name
    # A missing value is its own input: not the mean's row, not an unknown category's.
    missing = model.predict({**DATA, "age": [None] * 4}, verbose=0)
    mean = model.predict({**DATA, "age": [30.0] * 4}, verbose=0)
    assert np.abs(missing - mean).max() > 1e-5


def test_errors_name_the_feature():
    model = trained()
    with pytest.raises(ValueError, match="feature 'country' is missing from the input"):
        model.predict({"text": TEXTS, "age": DATA["age"]})
    with pytest.raises(ValueError, match=r"feature 'age', row 1: 'old' is not a number"):
        model.predict({**DATA, "age": [1, "old", 2, 3]})
    with pytest.raises(ValueError, match="also takes the features age, country"):
        model.predict(TEXTS)
    with pytest.raises(ValueError, match="the input has no 'text' column"):
        model.predict({"sentence": TEXTS, "age": DATA["age"], "country": DATA["country"]})
    with pytest.raises(ValueError, match="'age', 'country' are not known: fit the classifier"):
        classifier().predict(DATA)
    with pytest.raises(ValueError, match="feature name 'text' is taken by the text inputs"):
        classifier(numeric_features=["text"])
    with pytest.raises(ValueError, match="'age' is both numeric and categorical"):
        classifier(categorical_features=["age"])


def test_read_examples_carry_features_and_errors_name_file_and_line(tmp_path):
    tsv = tmp_path / "train.tsv"
    tsv.write_text("text\tage\tcountry\tlabel\nthe movie was good\t12\tfr\tpos\n"
                   "a terrible film\t\t\tneg\n")
    examples = glue.read_glue(str(tsv), feature_columns=["age", "country"])
    assert examples[1].features == {"age": "", "country": ""}
    model = classifier()
    model.compile(learning_rate=1e-3)
    model.fit(examples * 2, batch_size=2, epochs=1, verbose=0)
    as_dict = {"text": ["the movie was good", "a terrible film"], "age": [12, None],
               "country": ["fr", None]}
    np.testing.assert_array_equal(model.predict(examples, verbose=0),
                                  model.predict(as_dict, verbose=0))
    x, y = next(iter(model.make_dataset(examples, batch_size=2)))  # what fit reads
    assert y.numpy().tolist() == [1, 0] and np.isnan(x["age"][1])  # empty -> missing
    assert x["country"].numpy().tolist() == [b"fr", b""]

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "good", "label": "pos", "age": 3}\n'
                   '{"text": "bad", "label": "neg", "age": "old", "country": "fr"}\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2: feature 'age': 'old' is not a number"):
        model.predict(jsonl.read_jsonl(str(bad), feature_keys=["age", "country"]))
    with pytest.raises(DataError, match=r"missing feature column 'stars'"):
        glue.read_glue(str(tsv), feature_columns=["stars"])
    with pytest.raises(DataError, match="no line has the feature 'stars'"):
        jsonl.read_jsonl(str(bad), feature_keys=["stars"])
    with pytest.raises(DataError, match=r"dev\.tsv:4: the example has no feature 'age'"):
        model.predict([TextExample("good", None, "pos", "dev.tsv", 4)])


@pytest.mark.slow
def test_bucketed_fit_mean_pooling_and_no_hidden_layer():
    model = classifier(pooling="mean", feature_hidden_units=0,
                       numeric_features={"age": {"mean": 30.0, "variance": 400.0}},
                       categorical_features={"country": {"vocabulary": ["fr", "us"]}})
    assert not model.features.unadapted()
    assert "features_dense" not in [layer.name for layer in model.layers]
    # The head reads [mean-pooled text (64), age and its flag (2), country (min(50, 5 // 2))].
    assert model.head.dense.kernel.shape == (64 + 2 + 2, 2)
    model.compile(learning_rate=1e-3)
    history = model.fit({k: v * 4 for k, v in DATA.items()}, [1, 0, 1, 0] * 4, batch_size=4,
                        epochs=2, verbose=0, bucket_lengths=[8, 16])
    assert np.isfinite(history.history["loss"]).all()
    assert model.get_config()["pooling"] == "mean"


def test_text_only_classifier_is_unchanged():
    model = BertClassifier(tiny_encoder(), 3, preprocessor=preprocessor())
    assert model.feature_names == [] and model.features is None
    # The window settings (issue 52) are declared in every classifier's config.
    assert set(model.get_config()) == {"name", "trainable", "encoder", "preprocessor",
                                       "num_classes", "label_names", "dropout", "activation",
                                       "window_combination", "window_stride"}
    encoder_weights = {id(w) for w in model.encoder.weights}
    own = [w.path for w in model.weights if id(w) not in encoder_weights]
    assert own == ["classifier/logits/kernel", "classifier/logits/bias"]
    # A dict or DataFrame with a text column works for a text-only model too.
    frame = pd.DataFrame({"text": ["good film", "bad"], "text_pair": ["the meal", "a dog"]})
    np.testing.assert_array_equal(
        model.predict(frame, verbose=0),
        model.predict([("good film", "the meal"), ("bad", "a dog")], verbose=0))


@pytest.mark.slow
def test_finetune_cli_reads_feature_columns(tmp_path, capsys):
    from keras_bert.cli import main
    from tests.tasks.tiny_checkpoint import tiny_checkpoint
    checkpoint = tiny_checkpoint(str(tmp_path / "uncased_tiny"), "google")
    header = "text,age,country,label\n"
    rows = [f"the {w} was {a},{age},{country},{label}"
            for w in ("movie", "film", "book", "meal")
            for a, age, country, label in (("good", 20, "fr", "pos"), ("awful", "", "us", "neg"),
                                           ("nice", 70, "", "pos"))]
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    train.write_text(header + "\n".join(rows * 2) + "\n")
    dev.write_text(header + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    assert main(["finetune", "--task", "classification", "--init_checkpoint", checkpoint,
                 "--train_file", str(train), "--dev_file", str(dev), "--output_dir", str(out),
                 "--numeric_features", "age", "--categorical_features", "country",
                 "--epochs", "1", "--batch_size", "8", "--max_seq_length", "16",
                 "--no_progress"]) == 0
    model = BertClassifier.from_pretrained(str(out / "best_model"))
    features = model.get_config()
    assert features["numeric_features"] == {"age": {"mean": 45.0, "variance": 625.0}}
    assert features["categorical_features"]["country"]["vocabulary"] == ["fr", "us"]
    predicted = model.predict_labels({"text": ["the movie was good"], "age": [20],
                                      "country": ["fr"]})
    assert predicted[0] in ("neg", "pos")

    code = main(["finetune", "--task", "classification", "--init_checkpoint", checkpoint,
                 "--train_file", str(train), "--output_dir", str(tmp_path / "bad"),
                 "--numeric_features", "stars", "--no_progress"])
    assert code == 2
    assert f"{train}:1: missing feature column 'stars'" in capsys.readouterr().err


def test_feature_layers_learn_faster_than_the_encoder():
    from keras_bert.optimization.optimizers import BertAdamW, create_optimizer
    model = classifier()
    assert model.learning_rate_multipliers() and not BertClassifier(
        tiny_encoder(), 2).learning_rate_multipliers()
    optimizer = create_optimizer(1e-3, 10, 0, weight_decay=0.0,
                                 learning_rate_multipliers=model.learning_rate_multipliers())
    assert BertAdamW.from_config(optimizer.get_config()).learning_rate_multipliers == \
        optimizer.learning_rate_multipliers
    encoder_kernel = model.encoder.weights[3]
    dense = model.get_layer("features_dense").kernel
    before = [encoder_kernel.numpy(), dense.numpy()]
    optimizer.apply_gradients([(np.ones(encoder_kernel.shape, "float32"), encoder_kernel),
                               (np.ones(dense.shape, "float32"), dense)])
    # Adam's first step moves every weight by about the rate: 1e-3, and 30 times that.
    np.testing.assert_allclose(before[0] - encoder_kernel.numpy(), 1e-3, rtol=1e-2)
    np.testing.assert_allclose(before[1] - dense.numpy(), 3e-2, rtol=1e-2)
