"""The two distributed training loops have names of their own; the name they shared,
``make_train_loop``, still builds each for one release, with a DeprecationWarning."""

import pytest

from keras_bert.pretraining import step
from keras_bert.training import finetune_loop


@pytest.mark.parametrize("module,new_name", [(step, "make_pretraining_train_loop"),
                                             (finetune_loop, "make_finetune_train_loop")])
def test_the_old_name_warns_and_builds_the_renamed_loop(monkeypatch, module, new_name):
    calls = []
    monkeypatch.setattr(module, new_name, lambda *args, **kwargs: calls.append((args, kwargs))
                        or "the loop")
    with pytest.warns(DeprecationWarning, match=f"use {new_name}"):
        assert module.make_train_loop("model", strategy="strategy") == "the loop"
    assert calls == [(("model",), {"strategy": "strategy"})]
