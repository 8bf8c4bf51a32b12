"""The one place keras_bert touches private Keras optimizer names.

Keras 3 has no public API for what BERT's optimizers need:
- the Adam moment variables of one model variable (BertAdamW runs TensorFlow's fused
  ``ResourceApplyAdam`` on them; BertLamb runs its own step): ``adam_slots``;
- a key per variable that Keras itself uses for its slot tables: ``variable_key``;
- whether Keras' weight-decay exclusions leave a variable decayed: ``is_decayed``;
- three steps inside ``optimizer.apply``: summing gradients over replicas, clipping, and
  decoupled weight decay. ``OptimizerHooks`` overrides the private methods Keras calls for them
  and hands each to a public-named method that the BERT optimizers define
  (``reduce_gradients_before_clipping``, ``reduce_gradients``, ``decay_outside_step``).

Everything private is read here and nowhere else; tests/training/test_keras_internals.py runs
each against the installed Keras (names present, called by ``apply``, slots equal to the
moments Keras' own Adam computes), so a Keras upgrade that moves one fails there, by name,
instead of silently changing training. Written against Keras 3.15.
"""

from __future__ import annotations

import keras

# The private methods OptimizerHooks overrides; each must exist on Keras' base optimizer.
HOOKS = ("_clip_gradients", "_all_reduce_sum_gradients", "_apply_weight_decay")
# The private attributes and methods the functions below read.
READS = ("_momentums", "_velocities", "_get_variable_index", "_var_key", "_use_weight_decay")


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
