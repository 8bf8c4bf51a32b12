"""keras-bert on a GPU (marker ``gpu``; tests/gpu/conftest.py skips them where TensorFlow sees no
GPU): fine-tuning in float32, mixed_float16 (loss scaling) and mixed_bfloat16, with XLA, a few
pretraining steps, ``predict``, the raw-text export made on the GPU and then served by TF
Serving's graph-mode loader on a CPU, and what int8 quantization does on a GPU machine. Each
test asserts where the model's variables live and the numbers a user would see.

benchmarks/gpu_check.sh runs these; its dry run (GPU_CHECK_DRY=1) runs them on the CPU.
"""

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert import BertClassifier, BertConfig, BertEncoder, BertPreprocessor
from keras_bert.export import export_model, saved_model_op_types
from keras_bert.layers.int8 import check_int8_kernel
from keras_bert.quickstart import sentiment_examples
from tests.serving.graph_mode import GraphModeModel

pytestmark = pytest.mark.gpu

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LABELS = ["negative", "positive"]
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# GPUs run float32 matmuls in TensorFloat-32 by default (TensorFlow's default from Ampere on:
# 10-bit mantissas, float32 sums), so a tiny model's probabilities on the GPU differ from the
# same model's on a CPU by about 1e-4; this bound leaves room for that and nothing more.
TF32_ATOL = 2e-3
# int8 against float32 probabilities (tests/export/test_int8.py's bound).
INT8_ATOL = 0.05


@pytest.fixture(scope="module")
def data():
    """64 templated movie reviews (32 positive, 32 negative) and their labels."""
    return sentiment_examples(64, seed=1)


@pytest.fixture(scope="module")
def preprocessor(data):
    """Raw text -> ids of length 32 over the reviews' own words (no pretrained vocabulary)."""
    words = sorted({w for text in data[0] for w in re.findall(r"\w+|[^\w\s]", text.lower())})
    return BertPreprocessor(vocabulary=SPECIAL_TOKENS + words, seq_length=32)


def tiny_encoder(vocab_size: int, dtype=None) -> BertEncoder:
    keras.utils.set_random_seed(0)
    return BertEncoder(vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=128,
                       max_position_embeddings=64, dtype=dtype)


def classifier(preprocessor, dtype=None, with_preprocessor: bool = True) -> BertClassifier:
    """A 2-layer classifier with random weights; mean pooling, from which a random model learns
    the reviews in a few epochs (the pooler's tanh on [CLS] learns much more slowly)."""
    return BertClassifier(tiny_encoder(len(preprocessor.vocabulary), dtype), 2,
                          preprocessor=preprocessor if with_preprocessor else None,
                          label_names=LABELS, pooling="mean")


def fit_losses(model, x, y, epochs: int = 6, jit_compile="auto") -> list[float]:
    """Fine-tunes (lr 3e-3: a tiny random model) and returns each epoch's loss."""
    model.compile(learning_rate=3e-3, jit_compile=jit_compile)
    return model.fit(x, y, batch_size=16, epochs=epochs, verbose=0, seed=0).history["loss"]


def device_type(name: str) -> str:
    """"GPU" or "CPU" from a device name such as /job:localhost/replica:0/task:0/device:GPU:0."""
    return re.search(r"device:([A-Z]+):", name, re.IGNORECASE)[1].upper()


def assert_on(device: str, variables) -> None:
    placed = {device_type(v.value.device) for v in variables}
    assert placed == {device}, f"variables on {placed}, expected {device}"


@pytest.fixture
def device_memory(device):
    """Returns the device's peak memory use in bytes since the test started (None on the CPU):
    above 0 when the test's work ran there."""
    if device != "GPU":
        return lambda: None
    tf.config.experimental.reset_memory_stats("GPU:0")
    return lambda: tf.config.experimental.get_memory_info("GPU:0")["peak"]


@pytest.fixture
def global_policy():
    """Sets Keras' global dtype policy for one test."""
    yield keras.mixed_precision.set_global_policy
    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture(scope="module")
def trained(device, data, preprocessor):
    """A float32 classifier fine-tuned on the reviews on the device, so that its outputs spread
    out: comparisons of its probabilities then mean something."""
    model = classifier(preprocessor)
    fit_losses(model, *data)
    assert_on(device, model.weights)
    probabilities = model.predict(data[0], verbose=0)
    assert np.ptp(probabilities[:, 0]) > 0.2, "the fixture's classifier did not learn"
    return model


def serve_on_cpu(path: str, texts: list[str], out_dir) -> dict[str, np.ndarray]:
    """``serving_default`` of the SavedModel at ``path`` in a process that sees no GPU, through
    TF Serving's graph-mode loader (tests/gpu/serve_on_cpu.py)."""
    outputs = os.path.join(str(out_dir), "served_on_cpu.npz")
    result = subprocess.run(
        [sys.executable, "-m", "tests.gpu.serve_on_cpu", path, outputs, *texts],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "2",
             "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1])["devices"] == ["CPU"]
    with np.load(outputs, allow_pickle=True) as served:  # string outputs are object arrays
        return {name: served[name] for name in served.files}


# ================================================================================ fine-tuning
@pytest.mark.parametrize("policy", ["float32", "mixed_float16", "mixed_bfloat16"])
def test_fine_tuning_on_the_device(device, device_memory, data, preprocessor, global_policy,
                                   policy):
    """Keras' way to fine-tune in mixed precision: the global policy, which the task model
    takes too, so that compile wraps the optimizer in a LossScaleOptimizer for float16."""
    global_policy(policy)
    model = classifier(preprocessor)
    losses = fit_losses(model, *data)
    assert_on(device, model.weights)
    assert device_memory() != 0
    assert all(w.dtype == "float32" for w in model.trainable_weights)
    compute = {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}
    assert model.encoder.dtype_policy.compute_dtype == compute[policy]
    loss_scaled = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert loss_scaled == (policy == "mixed_float16"), type(model.optimizer).__name__
    if loss_scaled:
        assert np.isfinite(float(model.optimizer.dynamic_scale))
    assert all(np.isfinite(losses)) and losses[-1] < losses[0] - 0.1, losses
    probabilities = model.predict(data[0][:4], verbose=0)
    assert probabilities.dtype == np.float32 and np.isfinite(probabilities).all()


def test_a_mixed_float16_encoder_fine_tunes_with_loss_scaling(data, preprocessor):
    """The documented per-model way (``BertEncoder(dtype=...)``, ``from_pretrained(dtype=)``)
    must scale the loss as well: float16 gradients underflow without it."""
    model = classifier(preprocessor, dtype="mixed_float16")
    losses = fit_losses(model, *data, epochs=1)
    assert np.isfinite(losses).all()
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)


def test_fine_tuning_with_xla(device, device_memory, data, preprocessor):
    """``jit_compile=True`` on packed ids. (A model that holds a BertPreprocessor is never
    XLA-compiled: its string ops cannot be, so Keras turns jit_compile off with a warning.)"""
    model = classifier(preprocessor, with_preprocessor=False)
    packed = {k: np.asarray(v) for k, v in preprocessor(tf.constant(data[0])).items()}
    labels = np.array([LABELS.index(label) for label in data[1]], "int32")
    losses = fit_losses(model, packed, labels, jit_compile=True)
    assert model.jit_compile is True
    assert_on(device, model.weights)
    assert device_memory() != 0
    assert all(np.isfinite(losses)) and losses[-1] < losses[0] - 0.1, losses


# ================================================================================ pretraining
@pytest.mark.parametrize("mixed_precision, jit_compile", [("fp16", True), ("bf16", False)])
def test_pretraining_steps(device, device_memory, tmp_path, mixed_precision, jit_compile):
    """80 steps of ``run_pretraining`` on learnable records (tests/pretraining/records.py), under
    the strategy it picks on this machine: OneDeviceStrategy on the one GPU."""
    from keras_bert.pretraining.run import PretrainingSettings, run_pretraining
    from keras_bert.distribute import get_strategy
    from tests.pretraining.records import VOCAB_SIZE, write_records, write_vocab

    strategy = get_strategy()
    if device == "GPU":
        assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
    pattern = write_records(str(tmp_path / "records"))
    config = PretrainingSettings(
        input_files=pattern, output_dir=str(tmp_path / "run"),
        bert_config=BertConfig(vocab_size=VOCAB_SIZE, hidden_size=64, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=128,
                               max_position_embeddings=64),
        max_seq_length=32, max_predictions_per_seq=5, train_batch_size=16, num_train_steps=80,
        num_warmup_steps=8, learning_rate=2e-3, steps_per_loop=20, save_checkpoints_steps=80,
        mixed_precision=mixed_precision, jit_compile=jit_compile,
        vocab_file=write_vocab(str(tmp_path / "vocab.txt")), export=False, progress=False)
    result = run_pretraining(config, strategy=strategy)
    assert_on(device, result.model.weights)
    assert device_memory() != 0
    assert result.model.encoder.dtype_policy.name == {"fp16": "mixed_float16",
                                                      "bf16": "mixed_bfloat16"}[mixed_precision]
    assert all(v.dtype == "float32" for v in result.model.trainable_weights)
    saved = [name for name, _ in tf.train.list_variables(result.checkpoint)]
    assert any("dynamic_scale" in name for name in saved) == (mixed_precision == "fp16")
    mlm_losses = []
    for path in tf.io.gfile.glob(str(tmp_path / "run" / "summaries" / "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            mlm_losses += [(event.step, float(tf.make_ndarray(value.tensor)))
                           for value in event.summary.value if value.tag == "mlm_loss"]
    losses = [loss for _, loss in sorted(mlm_losses)]
    assert len(losses) == 4 and np.isfinite(losses).all()
    # Segments count upwards: the masked-LM task is learnable (as in test_pretrain.py on CPU).
    assert losses[-1] < losses[0] - 0.5, losses


# ==================================================================== predict and the export
def test_predict_on_the_device(device, trained, data, preprocessor):
    """``predict`` (rows sorted by length, run in chunks) gives the model's own outputs."""
    texts = data[0][:20]
    got = trained.predict(texts, verbose=0)
    direct = np.asarray(trained(preprocessor(tf.constant(texts)), training=False))
    assert got.shape == (20, 2)
    np.testing.assert_allclose(got, direct, atol=TF32_ATOL)
    np.testing.assert_allclose(got.sum(1), 1.0, atol=1e-5)
    assert trained.predict_labels(texts) == [LABELS[i] for i in got.argmax(1)]
    assert_on(device, trained.weights)


def test_export_made_on_the_device_serves_on_a_cpu(trained, data, tmp_path):
    """The raw-text export traced where the variables live on the GPU loads in a CPU-only
    process through TF Serving's loader and gives the Keras model's probabilities."""
    texts = data[0][:8]
    path = export_model(trained, str(tmp_path / "models"), "classifier")
    served = serve_on_cpu(path, texts, tmp_path)
    np.testing.assert_allclose(served["probabilities"], trained.predict(texts, verbose=0),
                               atol=TF32_ATOL)


# ======================================================================================= int8
def quantized_copy_of(model, preprocessor, with_preprocessor: bool = True) -> BertClassifier:
    """A new classifier with ``model``'s weights, after ``quantize("int8")``."""
    copy = classifier(preprocessor, with_preprocessor=with_preprocessor)
    copy.set_weights(model.get_weights())
    copy.quantize("int8")
    return copy


def test_int8_quantize_and_predict_on_a_gpu_machine(device, trained, data, preprocessor):
    """``quantize("int8")`` on a model whose variables live on the GPU, then ``predict`` on raw
    text: oneDNN's int8 matmul has only a CPU kernel, which soft placement runs on the CPU."""
    texts = data[0][:8]
    quantized = quantized_copy_of(trained, preprocessor)
    got = quantized.predict(texts, verbose=0)
    difference = np.abs(got - trained.predict(texts, verbose=0)).max()
    assert 0 < difference < INT8_ATOL, difference
    float_weights = [v for v in quantized.weights if v.dtype == "float32"]
    assert_on(device, float_weights)


def test_int8_predict_on_packed_ids_under_kerass_default_jit_compile(device, trained, data,
                                                                     preprocessor):
    """A quantized model without a preprocessor: Keras' ``jit_compile="auto"`` would compile
    predict with XLA on a GPU machine, and XLA has no kernel for oneDNN's int8 matmul, so the
    int8 layers say they do not support XLA and predict runs unjitted."""
    packed = {k: np.asarray(v) for k, v in preprocessor(tf.constant(data[0][:8])).items()}
    quantized = quantized_copy_of(trained, preprocessor, with_preprocessor=False)
    got = quantized.predict(packed, verbose=0)
    difference = np.abs(got - trained.predict(data[0][:8], verbose=0)).max()
    assert 0 < difference < INT8_ATOL, difference


def test_int8_export_made_on_a_gpu_machine_serves_on_cpu_and_beside_the_gpu(device, trained,
                                                                            data, tmp_path):
    """``export_model(quantize="int8")`` on the GPU machine: the kernel check passes (x86-64
    TensorFlow has the CPU kernel), the export serves on a CPU-only machine, and in a session
    that sees the GPU (TF Serving's GPU build) the int8 matmuls run on the CPU, the rest on the
    GPU."""
    texts = data[0][:8]
    check_int8_kernel()
    path = export_model(trained, str(tmp_path / "models"), "int8", quantize="int8")
    assert "_QuantizedMatMul" in saved_model_op_types(path)
    served = serve_on_cpu(path, texts, tmp_path)["probabilities"]
    difference = np.abs(served - trained.predict(texts, verbose=0)).max()
    assert 0 < difference < INT8_ATOL, difference

    loaded = GraphModeModel(path)
    signature = loaded.signature_defs["serving_default"]
    metadata = tf.compat.v1.RunMetadata()
    beside = loaded.session.run(
        {name: output.name for name, output in signature.outputs.items()},
        {signature.inputs["text"].name: np.array(texts, object)},
        options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
        run_metadata=metadata)
    np.testing.assert_allclose(beside["probabilities"], served, atol=TF32_ATOL)
    placed = [(node.node_name, device_type(stats.device))
              for stats in metadata.step_stats.dev_stats for node in stats.node_stats]
    assert {where for name, where in placed if "Int8MatMul" in name} == {"CPU"}, placed
    assert any(where == device for _, where in placed)


def test_cli_quantize_int8_on_a_gpu_machine(trained, data, tmp_path):
    """``keras-bert export --quantize int8`` of a saved classifier, run where the GPU is
    visible, writes an export that serves on a CPU."""
    texts = data[0][:8]
    trained.save(tmp_path / "classifier.keras")
    result = subprocess.run(
        [sys.executable, "-m", "keras_bert.cli", "export", str(tmp_path / "classifier.keras"),
         str(tmp_path / "models"), "--model_name", "cli", "--quantize", "int8"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr[-3000:]
    path = str(tmp_path / "models" / "cli" / "1")
    assert f"exported cli to {path}" in result.stdout
    served = serve_on_cpu(path, texts, tmp_path)["probabilities"]
    difference = np.abs(served - trained.predict(texts, verbose=0)).max()
    assert 0 < difference < INT8_ATOL, difference
