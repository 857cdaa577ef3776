"""The tasks' batch functions share one shape: `(data, batch_size, training, seed, *, boundaries, ...)` (issue 15).

`make_packed_dataset` too, without `boundaries` (its rows are all `sequence_length` long).

The old keywords (`shuffle_seed` of classification and span_qa, `shuffle` of
tagging) are still taken; the cardinality tests of test_glue_data.py,
test_conll_data.py and test_squad_data.py run both names.
"""

import inspect

import pytest

from keras_bert_impl.tasks.classification import batches as classification_batches
from keras_bert_impl.tasks.old_keywords import check_training, renamed
from keras_bert_impl.tasks.span_qa import batches as span_qa_batches
from keras_bert_impl.tasks.tagging import batches as tagging_batches

FUNCTIONS = [
    getattr(module, name)
    for module in (classification_batches, tagging_batches, span_qa_batches)
    for name in ("make_dataset", "make_packed_dataset", "make_array_batches")
]


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f"{f.__module__}.{f.__name__}")
def test_one_shape(function):
    parameters = inspect.signature(function).parameters
    positional = [p.name for p in parameters.values() if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert positional[-3:] == ["batch_size", "training", "seed"]
    # make_dataset's batches are in order unless for training; packed batches are for training unless told not.
    assert parameters["training"].default is (function.__name__ == "make_packed_dataset")
    keywords = ("fixed_batch_size",) if function.__name__ == "make_packed_dataset" else ("boundaries", "fixed_batch_size")
    for name in keywords:  # (packed rows are all `sequence_length` long: no boundaries)
        assert name in parameters and parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, (function, name)


def test_every_task_package_exports_the_same_step_functions():
    from keras_bert_impl.tasks import classification, span_qa, tagging

    for package in (classification, span_qa, tagging):
        for name in ("read_examples", "encode_examples", "make_dataset", "make_packed_dataset", "make_array_batches",
                     "evaluate", "write_outputs", "predict"):
            assert callable(getattr(package, name, None)), (package.__name__, name)
    # The earlier names of step 2 are the same functions.
    assert tagging.encode_sentences is tagging.encode_examples
    assert span_qa.convert_examples_to_features is span_qa.encode_examples
    # Steps 1, 4, 5 and 6: the task's own name (its file format, its metric) is the same function as the step's.
    assert classification.read_examples is classification.read_split
    assert tagging.read_examples is tagging.read_conll
    assert span_qa.read_examples is span_qa.read_squad_examples
    assert classification.evaluate is classification.evaluate_splits
    assert tagging.evaluate is tagging.evaluate_conll
    assert span_qa.evaluate is span_qa.predict_squad
    assert classification.write_outputs is classification.write_dev_results
    assert tagging.write_outputs is tagging.write_conll_outputs
    assert span_qa.write_outputs is span_qa.write_squad_outputs
    assert tagging.predict is tagging.predict_word_tags


def test_old_and_new_keyword_given_differently_is_an_error():
    assert renamed("f", "shuffle", True, "training", False, False) is True
    assert renamed("f", "shuffle", None, "training", True, False) is True
    assert renamed("f", "shuffle_seed", 4, "seed", 4, 0) == 4
    with pytest.raises(TypeError, match="give `seed` only"):
        renamed("f", "shuffle_seed", 4, "seed", 5, 0)


def test_a_length_or_boundaries_in_the_place_of_training_is_refused():
    assert check_training("f", False) is False
    with pytest.raises(TypeError, match="keywords only"):
        classification_batches.make_array_batches({}, None, 32, 128)  # the old place of sequence_length
    with pytest.raises(TypeError, match="keywords only"):
        tagging_batches.make_array_batches(None, 32, [32, 64])  # the old place of boundaries
