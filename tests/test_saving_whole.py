"""Every write of ours appears whole or not at all: a save that fails part-way (here a disk that
fills, simulated with a file-size limit in a child process: ``RLIMIT_FSIZE`` with SIGXFSZ
ignored, so a write past it fails with "File too large") leaves the earlier file or directory
as it was and loadable, leaves no scratch file behind, and says what it was writing, where and
why in one line."""

import hashlib
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from keras_bert import BertClassifier, BertPreprocessor
from keras_bert.checkpoints.saving import save_checkpoint
from keras_bert.export import export_model
from tests.tasks.tiny_checkpoint import VOCAB, tiny_encoder

REPO = pathlib.Path(__file__).resolve().parent.parent
TEXTS = ["a fine day", "rain again"]

CHILD = textwrap.dedent("""
    import json, os, resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    import keras
    import keras_bert
    from keras_bert.checkpoints.saving import save_checkpoint
    from keras_bert.export import export_model
    from keras_bert.tasks.checkpoint_models import convert_checkpoint

    work, limit = sys.argv[1], int(sys.argv[2])
    model = keras.saving.load_model(os.path.join(work, "c.keras"))
    model.predict(["warm up"], verbose=0)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    attempts = {
        "save": lambda: model.save(os.path.join(work, "c.keras")),
        "keras": lambda: save_checkpoint(model, os.path.join(work, "keras"), "keras",
                                         overwrite=True),
        "hf": lambda: save_checkpoint(model, os.path.join(work, "hf"), "hf", overwrite=True),
        "google": lambda: save_checkpoint(model, os.path.join(work, "google"), "google",
                                          overwrite=True),
        "convert": lambda: convert_checkpoint(os.path.join(work, "hf"),
                                              os.path.join(work, "converted"), "keras",
                                              overwrite=True),
        "export": lambda: export_model(model, os.path.join(work, "models"), "m"),
        "model.export": lambda: model.export(os.path.join(work, "exported")),
    }
    results = {}
    for name, attempt in attempts.items():
        try:
            attempt()
            results[name] = "written"
        except Exception as e:
            results[name] = f"{type(e).__name__}: {e}"
    print("RESULTS " + json.dumps(results))
""")


def digest(path: pathlib.Path) -> dict:
    """{relative file: sha256} of a file or a directory tree."""
    if path.is_file():
        return {".": hashlib.sha256(path.read_bytes()).hexdigest()}
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_full_disk_leaves_every_earlier_output_whole(tmp_path):
    model = BertClassifier(tiny_encoder(), 2, preprocessor=BertPreprocessor(
        vocabulary=VOCAB, seq_length=16), label_names=["neg", "pos"])
    expected = model.predict(TEXTS, verbose=0)
    model.save(tmp_path / "c.keras")
    for fmt in ("keras", "hf", "google"):
        save_checkpoint(model, tmp_path / fmt, fmt)
    save_checkpoint(model, tmp_path / "converted", "keras")
    export_model(model, tmp_path / "models", "m", version=1)
    model.export(tmp_path / "exported")
    before = {name: digest(tmp_path / name)
              for name in ("c.keras", "keras", "hf", "google", "converted", "models", "exported")}
    limit = (tmp_path / "c.keras").stat().st_size // 2  # well below every weights file
    result = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(limit)],
                            cwd=REPO, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    line = next((l for l in result.stdout.splitlines() if l.startswith("RESULTS ")), None)
    assert line, result.stdout[-2000:] + result.stderr[-4000:]
    results = json.loads(line[len("RESULTS "):])
    for name, outcome in results.items():
        assert outcome.startswith("SaveError: could not "), (name, outcome)
        assert "File too large" in outcome and "\n" not in outcome, (name, outcome)
    assert "to '" + str(tmp_path / "c.keras") + "'" in results["save"]
    # The earlier outputs are byte for byte what they were, and nothing else is left there.
    for name, files in before.items():
        assert digest(tmp_path / name) == files, name
    assert sorted(os.listdir(tmp_path)) == sorted(before)
    assert sorted(os.listdir(tmp_path / "models" / "m")) == ["1"]
    import keras
    np.testing.assert_allclose(keras.saving.load_model(tmp_path / "c.keras").predict(
        TEXTS, verbose=0), expected, atol=1e-6)
    np.testing.assert_allclose(BertClassifier.from_pretrained(tmp_path / "hf").predict(
        TEXTS, verbose=0), expected, atol=1e-5)
