"""The `>>>` examples in the docstrings of the public API run, and print what they say."""

import doctest

import pytest

import keras_bert

PUBLIC = sorted(keras_bert.__all__)


def _examples(obj):
    finder = doctest.DocTestFinder(recurse=True, exclude_empty=True)
    return [test for test in finder.find(obj, name=getattr(obj, "__name__", str(obj)))
            if test.examples and test.name.split(".")[0] == obj.__name__]


def test_every_public_class_has_a_docstring_example():
    missing = [name for name in PUBLIC
               if isinstance(getattr(keras_bert, name), type)
               and not _examples(getattr(keras_bert, name))]
    assert not missing, f"public classes without a runnable docstring example: {missing}"


@pytest.mark.parametrize("name", PUBLIC)
def test_docstring_examples_run(name):
    obj = getattr(keras_bert, name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in _examples(obj):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples failed in {name}"
