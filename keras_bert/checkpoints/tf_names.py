"""The names transformers' TensorFlow classes give BERT's weights, as Hugging Face (PyTorch)
keys: in ``tf_model.h5`` (``tf_h5``) and in the ``model.safetensors`` that
``save_pretrained(safe_serialization=True)`` writes from a TF model (``hf_weights``; its
metadata says ``{"format": "tf"}``). Pure NumPy.

TF weight names become Hugging Face (PyTorch) keys by transformers' own rule
(``convert_tf_weight_name_to_pt_weight_name``), see ``hf_key``: the model's name (the first part) and ``:0`` go, a scope ``x___y`` is ``y``
(``mlm___cls`` -> ``cls``), ``_._`` separates a list index (``layer_._0`` -> ``layer.0``), and
the last part ``kernel``, ``embeddings`` or ``gamma`` is ``weight``, ``beta`` is ``bias``. A
Keras Dense kernel is [in, out] and a PyTorch Linear weight [out, in], so a 2-D ``kernel`` is
transposed. The keys then go through ``names`` as a PyTorch folder's do.

Example:
>>> hf_key("bert/encoder/layer_._0/attention/self/query/kernel:0")
('bert.encoder.layer.0.attention.self.query.weight', True)
>>> hf_key("mlm___cls/predictions/transform/LayerNorm/gamma:0")
('cls.predictions.transform.LayerNorm.weight', False)
"""

from __future__ import annotations

import numpy as np

_RESAVE = "download or save it again"
_NAMES = {"kernel": "weight", "embeddings": "weight", "gamma": "weight", "beta": "bias"}


def hf_key(tf_name: str) -> tuple[str, bool]:
    """The Hugging Face key of a TensorFlow weight name, and whether its value is transposed
    there (a Dense kernel: transposed when it is 2-D).

    Args:
        tf_name: the name without the model's, as a shard stores it
            (``bert/encoder/layer_._0/output/dense/kernel:0``, ``mlm___cls/predictions/bias:0``).
    """
    name = tf_name[:-2] if tf_name.endswith(":0") else tf_name
    parts = [part.split("___")[-1] for part in name.split("/") if part]
    parts = [piece for part in parts for piece in part.split("_._") if piece]
    last = parts[-1]
    parts[-1] = _NAMES.get(last, last)
    return ".".join(parts), last == "kernel"


def names_to_hf(stored: dict[str, np.ndarray], path: str) -> dict[str, np.ndarray]:
    """``stored`` ({TF name: array}) under Hugging Face keys, 2-D kernels transposed;
    ValueError naming ``path`` when two names that are one key hold different values."""
    values: dict[str, np.ndarray] = {}
    origin: dict[str, str] = {}
    for name, value in stored.items():
        key, transposed = hf_key(name)
        if transposed and value.ndim == 2:
            value = value.T
        value = np.ascontiguousarray(value)
        if key in values:
            if values[key].shape != value.shape or not np.array_equal(values[key], value):
                raise ValueError(f"{path!r} holds {origin[key]!r} and {name!r}, which are both "
                                 f"{key!r} but differ; {_RESAVE}")
            continue
        values[key], origin[key] = value, name
    return values
