"""The form inference traces in for OpenVINO's converter (``export.openvino``).

TensorFlow and OpenVINO fuse different graph patterns. For TensorFlow's oneDNN rewrites the
layers run their Dense layers on [batch * seq, hidden] (2D MatMul + bias, fused into one op)
and LayerNorm as ``FusedBatchNormV3`` over the rows (one ``_MklLayerNorm`` kernel). OpenVINO's
CPU plugin runs that LayerNorm as an MVN over a reshaped [1, rows, H, 1] tensor, and the
reshapes between the layers stand between each LayerNorm and the int8 quantization NNCF puts
after it, which then runs as a kernel of its own instead of inside the MVN's. Within
``openvino_form()``, float32 inference traces OpenVINO's forms instead: LayerNorm as
``layer_normalization.layer_norm_mvn`` (fused into one MVN) and the transformer blocks on
[batch, seq, hidden] throughout (its FullyConnected takes any rank). The numbers are the same
to float32 rounding.
"""

import contextlib

_active = [False]


def active() -> bool:
    """Whether ``openvino_form()`` is on (read by the layers when they trace)."""
    return _active[0]


@contextlib.contextmanager
def openvino_form():
    """Within it, the layers trace their inference in OpenVINO's forms (module docstring)."""
    before, _active[0] = _active[0], True
    try:
        yield
    finally:
        _active[0] = before
