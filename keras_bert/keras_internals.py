"""The one place keras_bert touches private Keras names: its optimizers' and its int8 layers'.

Keras 3 has no public API for what BERT's optimizers need:
- the Adam moment variables of one model variable (BertAdamW runs TensorFlow's fused
  ``ResourceApplyAdam`` on them; BertLamb runs its own step): ``adam_slots``;
- a key per variable that Keras itself uses for its slot tables: ``variable_key``;
- whether Keras' weight-decay exclusions leave a variable decayed: ``is_decayed``;
- three steps inside ``optimizer.apply``: summing gradients over replicas, clipping, and
  decoupled weight decay. ``OptimizerHooks`` overrides the private methods Keras calls for them
  and hands each to a public-named method that the BERT optimizers define
  (``reduce_gradients_before_clipping``, ``reduce_gradients``, ``decay_outside_step``).

Nor for what the int8 path of quantized models (``layers/int8.py``) needs:
- the int8 kernel and per-column scales that ``Dense.quantize("int8")`` leaves, and whether
  Keras quantizes that layer's inputs per row as the int8 path does: ``int8_dense_weights``;
- every layer of a model, nested ones included, as ``Model.quantize`` visits them:
  ``sublayers``;
- each layer's own policy where a model was rebuilt from a ``DTypePolicyMap`` (how a quantized
  encoder's config brings its int8 layers back): ``resolve_policy_maps``;
- new variables on a layer already built (Keras locks a layer's state once built, and its own
  ``quantize`` unlocks it the same way), for the static int8 input scales that calibration
  adds: ``adding_state``;
- one garbage collection for a whole ``quantize``: Keras' ``Layer.__delattr__`` runs a full
  ``gc.collect()`` for every variable it drops, and ``quantize`` drops each float kernel (73
  full collections for BERT-base, each as long as the process's heap is large):
  ``collecting_once``.

Everything private is read here and nowhere else; tests/test_keras_internals.py runs
each against the installed Keras (names present, called by ``apply``, slots equal to the
moments Keras' own Adam computes, the int8 weights giving Keras' own int8 output), so a Keras
upgrade that moves one fails there, by name, instead of silently changing training or
inference. Written against Keras 3.15.
"""

from __future__ import annotations

import contextlib
import gc

import keras

# The private methods OptimizerHooks overrides; each must exist on Keras' base optimizer.
HOOKS = ("_clip_gradients", "_all_reduce_sum_gradients", "_apply_weight_decay")
# The private attributes and methods the functions below read.
READS = ("_momentums", "_velocities", "_get_variable_index", "_var_key", "_use_weight_decay")
# What Dense.quantize("int8") adds to a Dense (Dense._int8_build), and the layer walk
# Model.quantize uses: read by int8_dense_weights and sublayers.
INT8_READS = ("kernel_scale", "inputs_quantizer", "_flatten_layers")
# Where a layer keeps its dtype policy (what Layer.dtype_policy returns): resolve_policy_maps
# writes it.
POLICY_ATTRIBUTE = "_dtype_policy"
# Where a layer tracks its variables and sublayers (locked once built): adding_state unlocks it.
TRACKER_ATTRIBUTE = "_tracker"
# The activation quantizer that int8_dense_weights accepts: Keras' default for int8 Dense,
# one symmetric scale per row, 127 / max |row|.
INT8_ROW_RANGE = (-127, 127)


def adam_slots(optimizer: keras.optimizers.Optimizer, variable) -> tuple:
    """(first moment, second moment) variables of ``variable`` in an Adam-family optimizer."""
    index = optimizer._get_variable_index(variable)
    return optimizer._momentums[index], optimizer._velocities[index]


def variable_key(optimizer: keras.optimizers.Optimizer, variable):
    """The key Keras uses for ``variable`` (the same for a distributed variable's replicas)."""
    return optimizer._var_key(variable)


def is_decayed(optimizer: keras.optimizers.Optimizer, variable) -> bool:
    """Whether Keras' weight-decay exclusions (``exclude_from_weight_decay``) leave it decayed."""
    return bool(optimizer._use_weight_decay(variable))


def int8_dense_weights(dense: keras.layers.Layer) -> tuple | None:
    """(kernel, kernel_scale) of a Dense that ``quantize("int8")`` left as Keras' int8 Dense
    with its default activation quantizer; None for any other layer (float, another mode,
    LoRA, a custom quantizer, a Dense subclass).

    Keras then computes, per input row x [in] with s_x = 127 / max |x|, and kernel_scale
    [units] = q / max |W[:, j]| per column, q the weight quantizer's bound (127 by default, 63
    for ours; kernel [in, units] int8 = round(W * kernel_scale)):
    ``y = (round(x * s_x) @ kernel) / (s_x * kernel_scale) + bias``.
    """
    if (type(dense) is not keras.layers.Dense or dense.quantization_mode != "int8"
            or dense.lora_enabled):
        return None
    quantizer = getattr(dense, "inputs_quantizer", None)
    if (type(quantizer) is not keras.quantizers.AbsMaxQuantizer
            or tuple(quantizer.value_range) != INT8_ROW_RANGE
            or quantizer.output_dtype != "int8"):
        return None
    return dense.kernel, dense.kernel_scale


def sublayers(layer: keras.layers.Layer) -> list:
    """Every layer inside ``layer``, nested ones included, ``layer`` itself not."""
    return list(layer._flatten_layers(include_self=False, recursive=True))


def resolve_policy_maps(model: keras.layers.Layer) -> None:
    """Gives every layer inside ``model`` that holds a ``DTypePolicyMap`` its own entry of it.

    A layer constructed with ``dtype=`` a DTypePolicyMap keeps the whole map and looks its own
    policy up by path for ``quantization_mode`` and ``compute_dtype``; but Keras' int8 Dense and
    Embedding read ``dtype_policy.quantization_mode`` when they save (the map's default, float32),
    so a loaded int8 model failed to save again ("Invalid dtype: object"). Each layer then holds
    the policy Keras already looked up for it; nothing it computes changes.
    """
    for layer in sublayers(model):
        policy = getattr(layer, POLICY_ATTRIBUTE)
        if isinstance(policy, keras.dtype_policies.DTypePolicyMap) and layer.path:
            setattr(layer, POLICY_ATTRIBUTE, policy[layer.path])


@contextlib.contextmanager
def adding_state(layer: keras.layers.Layer):
    """Within it, ``layer`` (built, so locked) may take new variables (``add_weight``); it is
    locked again afterwards if it was before."""
    tracker = getattr(layer, TRACKER_ATTRIBUTE)
    locked = tracker.locked
    tracker.unlock()
    try:
        yield
    finally:
        if locked:
            tracker.lock()


@contextlib.contextmanager
def collecting_once():
    """Within it, ``gc.collect()`` does nothing; one full collection runs on leaving it.

    Keras' ``Layer.__delattr__`` collects after removing each variable so that its buffer is
    freed soon; ``Model.quantize`` removes every float kernel it replaces, so quantizing a model
    paid one full collection per layer (a quarter of a second each in a process holding a few
    traced models). One collection afterwards frees the same buffers."""
    collect = gc.collect
    gc.collect = lambda generation=2: 0
    try:
        yield
    finally:
        gc.collect = collect
        collect()


class OptimizerHooks:
    """Mixed in before a Keras optimizer: routes Keras' private hooks to public-named methods.

    ``reduce_gradients_before_clipping(grads) -> grads`` runs just before global-norm clipping,
    ``reduce_gradients(grads_and_vars) -> grads_and_vars`` replaces Keras' own all-reduce, and
    ``decay_outside_step`` (a bool attribute) says whether Keras applies decoupled weight decay
    outside ``update_step``. The defaults keep Keras' behaviour.
    """

    decay_outside_step = True

    def reduce_gradients_before_clipping(self, grads: list) -> list:
        return grads

    def reduce_gradients(self, grads_and_vars):
        return super()._all_reduce_sum_gradients(grads_and_vars)

    def _clip_gradients(self, grads):
        return super()._clip_gradients(self.reduce_gradients_before_clipping(list(grads)))

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return self.reduce_gradients(grads_and_vars)

    def _apply_weight_decay(self, variables):
        if self.decay_outside_step:
            return super()._apply_weight_decay(variables)
        return None
