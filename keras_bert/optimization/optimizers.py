"""BERT's optimizers: AdamW and LAMB with weight-decay exclusions and global-norm clipping.

``create_optimizer`` builds what google-research/bert's ``optimization.py`` builds (AdamW, lr 1e-4,
beta1 0.9, beta2 0.999, epsilon 1e-6, weight decay 0.01 except on LayerNorm and biases, linear
warmup then linear decay, clipping by global norm 1.0) as a Keras 3 optimizer that works in
``model.compile`` and in custom loops under any ``tf.distribute`` strategy.

Four differences from stock Keras optimizers, all for BERT:
- AdamW's ``epsilon`` is the one of Adam's Algorithm 1 (Kingma and Ba), added to the
  bias-corrected ``sqrt(v_hat)`` as ``torch.optim.AdamW`` adds it, not Keras' "epsilon hat" on the
  uncorrected ``sqrt(v)``. Keras' form is ``epsilon / sqrt(1 - beta_2^t)`` in Algorithm 1's
  terms: 32x the given epsilon at the first step, 3.2x at step 100, 1.6x at step 500. Early in
  fine-tuning that damps the update of every weight whose gradient is near 1e-5, the median in
  MiniLM's (benchmarks/README.md, "Accuracy").
- Exclusions match the variable *path* (``transformer_layer_0/attention_layer_norm/gamma``), not
  just the short name (``gamma``), so Google's patterns ("layer_norm", "LayerNorm", "bias") work.
- Under a multi-replica strategy the gradients are summed across replicas *before* clipping, so
  the clipped norm is the norm of the global-batch gradient (stock Keras 3.15 clips each replica's
  partial gradient), and training on N replicas matches training on one with the same batch.
- ``learning_rate_multipliers`` scale the rate of the variables whose path matches a pattern: a
  freshly initialised head (a classifier's feature layers) learns at a higher rate than the
  pretrained encoder, as it must to learn anything in a few fine-tuning epochs.

``BertAdamW`` runs its Adam step as TensorFlow's fused ``ResourceApplyAdam`` kernel.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf
from keras import ops

from keras_bert import keras_internals
from keras_bert.optimization import OPTIMIZERS
from keras_bert.optimization.schedules import WarmupPolynomialDecay

# google-research/bert's AdamWeightDecayOptimizer exclusions, plus our layer names.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("layer_norm", "LayerNorm", "bias")


def _sum_over_replicas(grads: list) -> list:
    """All-reduces (sums) gradients across replicas when called in a multi-replica context."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return grads
    present = [g for g in grads if g is not None]
    reduced = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
    return [None if g is None else next(reduced) for g in grads]


class _BertOptimizerMixin(keras_internals.OptimizerHooks):
    """Path-based weight-decay exclusion and reduce-then-clip; mixed into Keras optimizers.

    Keras' private hooks are reached only through ``keras_internals`` (one tested adapter).

    ``aggregate_gradients = False`` says the caller passes gradients already summed over
    replicas (the pretraining loop does, to log the global norm); it is not part of the config.
    """

    aggregate_gradients = True

    def _init_exclusions(self, exclude_from_weight_decay: Sequence[str] | None,
                         learning_rate_multipliers: dict[str, float] | None = None,
                         learning_rate=None) -> None:
        # BERT's schedule when the optimizer runs on one (None otherwise): a later fit restarts
        # it for its own steps (``WarmupPolynomialDecay.restart``).
        self.schedule = learning_rate if isinstance(learning_rate, WarmupPolynomialDecay) else None
        self.exclude_from_weight_decay_patterns = list(exclude_from_weight_decay or ())
        self.learning_rate_multipliers = {str(k): float(v) for k, v
                                          in (learning_rate_multipliers or {}).items()}

    def _multiplier(self, variable) -> float:
        """The learning-rate multiplier of the first pattern matching the path (1 if none)."""
        return self._multipliers.get(keras_internals.variable_key(self, variable), 1.0)

    def _variable_learning_rate(self, learning_rate, variable):
        """``learning_rate`` times the variable's multiplier."""
        multiplier = self._multiplier(variable)
        return learning_rate if multiplier == 1.0 else learning_rate * multiplier

    def _matches(self, variable, patterns: Sequence[str]) -> bool:
        return bool(patterns) and re.search("|".join(patterns), variable.path) is not None

    def build(self, var_list):
        if not self.built:
            self.exclude_from_weight_decay(var_list=[
                v for v in var_list if self._matches(v, self.exclude_from_weight_decay_patterns)])
            self._multipliers = {}
            for v in var_list:
                for pattern, multiplier in self.learning_rate_multipliers.items():
                    if re.search(pattern, v.path) is not None:
                        self._multipliers[keras_internals.variable_key(self, v)] = multiplier
                        break
        super().build(var_list)

    def reduce_gradients_before_clipping(self, grads: list) -> list:
        # Keras clips right before the update step; summing here (and not again in
        # `reduce_gradients`) makes global-norm clipping see the global gradient.
        return _sum_over_replicas(grads) if self.aggregate_gradients else grads

    def reduce_gradients(self, grads_and_vars):
        return list(grads_and_vars)  # summed in reduce_gradients_before_clipping

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["exclude_from_weight_decay"] = self.exclude_from_weight_decay_patterns
        config["learning_rate_multipliers"] = dict(self.learning_rate_multipliers)
        return config


@keras.saving.register_keras_serializable(package="keras_bert")
class BertAdamW(_BertOptimizerMixin, keras.optimizers.AdamW):
    """Keras AdamW whose weight-decay exclusions match variable paths (see the module docstring).

    Decoupled weight decay as in google-research/bert (``w -= lr * weight_decay * w`` besides the
    Adam step); unlike Google's optimizer, the Adam moments are bias-corrected, and ``epsilon`` is
    added to ``sqrt(v_hat)`` as in ``torch.optim.AdamW`` (see the module docstring):
    ``w -= lr * m_hat / (sqrt(v_hat) + epsilon)``.

    Args:
        exclude_from_weight_decay: regular expressions; a variable whose path matches one is not
            decayed. Default: LayerNorm parameters and biases.
        learning_rate_multipliers: {path pattern: factor}; a variable whose path matches a
            pattern steps at the learning rate times the factor (the first match counts).
        **kwargs: ``keras.optimizers.AdamW`` arguments (learning_rate, weight_decay, beta_1,
            beta_2, epsilon, global_clipnorm, gradient_accumulation_steps, ...).

    Example:
    >>> optimizer = BertAdamW(learning_rate=1e-4, weight_decay=0.01, epsilon=1e-6)
    >>> optimizer.get_config()["exclude_from_weight_decay"]
    ['layer_norm', 'LayerNorm', 'bias']
    """

    def __init__(self, exclude_from_weight_decay: Sequence[str] | None =
                 DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                 learning_rate_multipliers: dict[str, float] | None = None, **kwargs):
        super().__init__(**kwargs)
        self._init_exclusions(exclude_from_weight_decay, learning_rate_multipliers,
                              kwargs.get("learning_rate"))

    # Decayed in update_step, with scalars computed once per step (Keras' own decay evaluates
    # the learning-rate schedule again for every variable).
    decay_outside_step = False

    def apply(self, grads, trainable_variables=None):
        # A plain dict of this trace's tensors, kept out of Keras' and tf.Module's tracking.
        object.__setattr__(self, "_step_scalars", {})
        try:
            return super().apply(grads, trainable_variables)
        finally:
            object.__setattr__(self, "_step_scalars", {})

    def _scalars(self, learning_rate, multiplier: float, dtype, device: str) -> dict:
        """This step's scalars for the variables of ``dtype`` on ``device`` (and the rate times
        ``multiplier``), computed for the first such variable, not for every one: about ten
        ops per variable otherwise, a hundred variables at BERT-base."""
        scalars = self.__dict__.setdefault("_step_scalars", {}).get((dtype, device))
        if scalars is None:
            local_step = tf.cast(self.iterations + 1, dtype)
            beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
            beta2_power = tf.pow(beta_2, local_step)
            rate = tf.cast(learning_rate, dtype)
            scalars = self._step_scalars[(dtype, device)] = dict(
                beta1_power=tf.pow(beta_1, local_step), beta2_power=beta2_power,
                beta1=beta_1, beta2=beta_2,
                epsilon=tf.cast(self.epsilon, dtype) * tf.sqrt(1.0 - beta2_power),
                decay=rate * tf.cast(self.weight_decay or 0.0, dtype), rates={1.0: rate})
        rates = scalars["rates"]
        if multiplier not in rates:
            rates[multiplier] = rates[1.0] * multiplier
        return {**scalars, "lr": rates[multiplier]}

    def update_step(self, gradient, variable, learning_rate):
        """Decoupled weight decay (``w -= lr * weight_decay * w``, at the schedule's rate, as
        Keras decays), then the Adam step as TensorFlow's fused ResourceApplyAdam kernel, in
        one sweep over the variable and its moments instead of about a dozen (about half the
        CPU time of the whole update with decay and clipping; benchmarks/README.md). The kernel
        computes ``lr_t * m / (sqrt(v) + eps)`` with ``lr_t = lr * sqrt(1 - beta_2^t) / (1 -
        beta_1^t)``; given ``eps = epsilon * sqrt(1 - beta_2^t)`` that is ``lr * m_hat /
        (sqrt(v_hat) + epsilon)``. (With amsgrad, Keras' own step, epsilon hat.)"""
        variable = variable.value if isinstance(variable, keras.Variable) else variable
        scalars = self._scalars(learning_rate, self._multiplier(variable), variable.dtype,
                                variable.device)
        if self.weight_decay and keras_internals.is_decayed(self, variable):
            variable.assign_sub(variable * scalars["decay"])
        if self.amsgrad:
            return super().update_step(gradient, variable, scalars["lr"])
        momentum, velocity = keras_internals.adam_slots(self, variable)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=momentum.value.handle, v=velocity.value.handle,
            beta1_power=scalars["beta1_power"], beta2_power=scalars["beta2_power"],
            lr=scalars["lr"], beta1=scalars["beta1"], beta2=scalars["beta2"],
            epsilon=scalars["epsilon"],
            grad=tf.cast(tf.convert_to_tensor(gradient), variable.dtype))


@keras.saving.register_keras_serializable(package="keras_bert")
class BertLamb(_BertOptimizerMixin, keras.optimizers.Lamb):
    """LAMB (You et al., 2019) as TF Model Garden implements it for BERT.

    Per variable: ``u = m_hat / (sqrt(v_hat) + epsilon) + weight_decay * w`` (decay only where not
    excluded), then ``w -= lr * r * u`` with the trust ratio ``r = ||w|| / ||u||`` (1 where either
    norm is 0, and for variables excluded from layer adaptation). Keras' own Lamb decays outside
    the trust ratio and cannot exclude variables.

    Args:
        exclude_from_weight_decay: path patterns not decayed (default: LayerNorm and biases).
        exclude_from_layer_adaptation: path patterns whose trust ratio is 1; None means the same
            as ``exclude_from_weight_decay``.
        learning_rate_multipliers: as in BertAdamW.
        **kwargs: ``keras.optimizers.Lamb`` arguments (learning_rate, beta_1, beta_2, epsilon,
            weight_decay, global_clipnorm, ...).

    Example:
    >>> optimizer = BertLamb(learning_rate=1e-3, weight_decay=0.01)
    >>> optimizer.get_config()["exclude_from_layer_adaptation"]
    ['layer_norm', 'LayerNorm', 'bias']
    """

    def __init__(self, exclude_from_weight_decay: Sequence[str] | None =
                 DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                 exclude_from_layer_adaptation: Sequence[str] | None = None,
                 learning_rate_multipliers: dict[str, float] | None = None, **kwargs):
        kwargs.setdefault("epsilon", 1e-6)
        super().__init__(**kwargs)
        self._init_exclusions(exclude_from_weight_decay, learning_rate_multipliers,
                              kwargs.get("learning_rate"))
        self.exclude_from_layer_adaptation_patterns = list(
            self.exclude_from_weight_decay_patterns if exclude_from_layer_adaptation is None
            else exclude_from_layer_adaptation)
        self._no_layer_adaptation: set = set()

    def build(self, var_list):
        if not self.built:
            self._no_layer_adaptation = {
                keras_internals.variable_key(self, v) for v in var_list
                if self._matches(v, self.exclude_from_layer_adaptation_patterns)}
        super().build(var_list)

    decay_outside_step = False  # LAMB decays inside update_step, before the trust ratio.

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        lr = ops.cast(self._variable_learning_rate(learning_rate, variable), dtype)
        gradient = ops.cast(gradient, dtype)
        local_step = ops.cast(self.iterations + 1, dtype)
        m, v = keras_internals.adam_slots(self, variable)
        self.assign_add(m, (gradient - m) * (1 - self.beta_1))
        self.assign_add(v, (ops.square(gradient) - v) * (1 - self.beta_2))
        m_hat = m / (1.0 - ops.power(ops.cast(self.beta_1, dtype), local_step))
        v_hat = v / (1.0 - ops.power(ops.cast(self.beta_2, dtype), local_step))
        update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        if self.weight_decay and keras_internals.is_decayed(self, variable):
            update = update + ops.cast(self.weight_decay, dtype) * variable
        if keras_internals.variable_key(self, variable) not in self._no_layer_adaptation:
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where((w_norm > 0) & (u_norm > 0), w_norm / ops.maximum(u_norm, 1e-30),
                              ops.ones_like(w_norm))
            update = update * ratio
        self.assign_sub(variable, lr * update)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["exclude_from_layer_adaptation"] = self.exclude_from_layer_adaptation_patterns
        return config


def create_optimizer(learning_rate: float, num_train_steps: int, num_warmup_steps: int,
                     weight_decay: float = 0.01, optimizer: str = "adamw",
                     clipnorm: float | None = 1.0, beta_1: float = 0.9, beta_2: float = 0.999,
                     epsilon: float = 1e-6, end_learning_rate: float = 0.0,
                     exclude_from_weight_decay: Sequence[str] = DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                     gradient_accumulation_steps: int | None = None,
                     loss_scale: bool = False,
                     learning_rate_multipliers: dict[str, float] | None = None,
                     start_step: int = 0) -> keras.optimizers.Optimizer:
    """BERT's optimizer: AdamW or LAMB on a linear warmup + linear decay schedule, clipped.

    Args:
        learning_rate: peak learning rate (BERT: 1e-4 pretraining; 5e-5, 3e-5, 2e-5 fine-tuning).
        num_train_steps: total optimizer updates; the rate decays linearly to
            ``end_learning_rate`` there.
        num_warmup_steps: linear warmup steps (BERT: 10,000 pretraining; ~10% fine-tuning).
        weight_decay: decoupled weight decay rate, not applied to LayerNorm and bias variables.
        optimizer: "adamw" (BERT) or "lamb" (large batches).
        clipnorm: clip the gradient to this *global* norm after summing over replicas (Google's
            ``clip_by_global_norm``); None disables clipping.
        beta_1, beta_2, epsilon: Adam/LAMB moment parameters.
        end_learning_rate: rate at ``num_train_steps``.
        exclude_from_weight_decay: variable-path patterns that are not decayed.
        gradient_accumulation_steps: for ``model.fit``: apply one update every this many batches
            (Keras' own accumulation; the schedule counts updates). The pretraining loop
            accumulates itself and leaves this None.
        loss_scale: wrap in ``keras.optimizers.LossScaleOptimizer`` (dynamic loss scaling, for
            float16 mixed precision in custom loops; ``model.compile`` adds it by itself).
        learning_rate_multipliers: {variable-path pattern: factor} for variables that learn
            faster (or slower) than ``learning_rate`` on the same schedule, e.g. a new head.
        start_step: the optimizer step at which the schedule starts (``WarmupPolynomialDecay``).

    Returns:
        A Keras 3 optimizer (BertAdamW, BertLamb or a LossScaleOptimizer around one); it is
        serializable with ``keras.saving``.

    Example:
    >>> optimizer = create_optimizer(1e-4, num_train_steps=1000, num_warmup_steps=100)
    >>> type(optimizer).__name__, float(optimizer.learning_rate)
    ('BertAdamW', 0.0)
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; expected one of "
                         f"{', '.join(OPTIMIZERS)}")
    if num_warmup_steps > num_train_steps:
        raise ValueError(f"num_warmup_steps={num_warmup_steps} exceeds "
                         f"num_train_steps={num_train_steps}; lower the warmup")
    schedule = WarmupPolynomialDecay(learning_rate, decay_steps=num_train_steps,
                                     warmup_steps=num_warmup_steps,
                                     end_learning_rate=end_learning_rate,
                                     start_step=start_step)
    kwargs = dict(learning_rate=schedule, weight_decay=weight_decay, beta_1=beta_1,
                  beta_2=beta_2, epsilon=epsilon, global_clipnorm=clipnorm,
                  gradient_accumulation_steps=gradient_accumulation_steps,
                  exclude_from_weight_decay=exclude_from_weight_decay,
                  learning_rate_multipliers=learning_rate_multipliers)
    result = (BertAdamW(**kwargs) if optimizer == "adamw" else BertLamb(**kwargs))
    if loss_scale:
        result = keras.optimizers.LossScaleOptimizer(result)
    return result
