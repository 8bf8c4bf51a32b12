"""BERT's learning-rate schedule: linear warmup, then polynomial (by default linear) decay to zero.

This is google-research/bert's ``optimization.py`` schedule as a serializable Keras
``LearningRateSchedule``, so ``model.compile``/``.keras`` saves and custom loops use the same one.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to ``peak_learning_rate``, then polynomial decay to the end rate.

    As in google-research/bert, the decay is measured from step 0 over ``decay_steps`` (the total
    number of training steps) and the warmup overrides it for ``step < warmup_steps``:

        lr(step) = peak * step / warmup_steps                          if step < warmup_steps
        lr(step) = (peak - end) * (1 - min(step, decay_steps) / decay_steps) ** power + end
                                                                        otherwise

    ``step`` counts optimizer updates (Keras passes ``optimizer.iterations``) from
    ``start_step``: a later ``fit`` of a model whose optimizer has already taken steps runs a
    schedule of its own from where that optimizer is.

    Args:
        peak_learning_rate: the rate reached at the end of warmup (BERT: 1e-4 pretraining,
            2e-5..5e-5 fine-tuning).
        decay_steps: total number of training steps; the rate reaches ``end_learning_rate`` there.
        warmup_steps: number of warmup steps; 0 disables warmup.
        end_learning_rate: the final rate.
        power: 1.0 is linear decay.
        start_step: the optimizer step that is this schedule's step 0.

    Example:
    >>> schedule = WarmupPolynomialDecay(1e-4, decay_steps=100, warmup_steps=10)
    >>> [round(float(schedule(step)), 7) for step in (0, 5, 10, 55, 100, 200)]
    [0.0, 5e-05, 9e-05, 4.5e-05, 0.0, 0.0]
    """

    def __init__(self, peak_learning_rate: float, decay_steps: int, warmup_steps: int = 0,
                 end_learning_rate: float = 0.0, power: float = 1.0, start_step: int = 0,
                 name: str | None = None):
        super().__init__()
        self.peak_learning_rate = peak_learning_rate
        self.end_learning_rate = end_learning_rate
        self.power = power
        self.name = name
        # Variables, so that ``restart`` retargets a traced train step without tracing it again.
        self._steps = {key: keras.Variable(0, dtype="int64", trainable=False, name=key)
                       for key in ("start_step", "decay_steps", "warmup_steps")}
        self.restart(decay_steps, warmup_steps, start_step)

    def restart(self, decay_steps: int, warmup_steps: int = 0, start_step: int = 0) -> None:
        """Runs the schedule again over ``decay_steps`` steps from optimizer step
        ``start_step`` (a later run of the same optimizer), also in a train step already
        traced."""
        if decay_steps <= 0:
            raise ValueError(f"decay_steps must be positive (the number of training steps), "
                             f"got {decay_steps}")
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        self.decay_steps, self.warmup_steps = int(decay_steps), int(warmup_steps)
        self.start_step = int(start_step)
        for key in self._steps:
            self._steps[key].assign(getattr(self, key))

    def __call__(self, step):
        steps = {key: ops.cast(value, "float32") for key, value in self._steps.items()}
        step = ops.cast(step, "float32") - steps["start_step"]
        progress = ops.minimum(step, steps["decay_steps"]) / steps["decay_steps"]
        decayed = ((self.peak_learning_rate - self.end_learning_rate)
                   * ops.power(1.0 - progress, self.power) + self.end_learning_rate)
        warmup = self.peak_learning_rate * step / ops.maximum(steps["warmup_steps"], 1.0)
        return ops.where(step < steps["warmup_steps"], warmup, decayed)

    def get_config(self) -> dict[str, Any]:
        return {"peak_learning_rate": self.peak_learning_rate, "decay_steps": self.decay_steps,
                "warmup_steps": self.warmup_steps, "end_learning_rate": self.end_learning_rate,
                "power": self.power, "start_step": self.start_step, "name": self.name}
