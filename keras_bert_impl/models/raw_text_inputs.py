"""How a task model reads what it is given: raw text, tables and feature dicts, checked in one line each.

`RawTextInputs` is one base of `models/task.py`'s `Task` (which keeps `fit`, `evaluate` and `predict`): whether
`x` is raw text (`_is_raw`), the preprocessor's batches of it (`_raw_dataset`, with or without weight-0 filler
rows), pandas and Hugging Face tables read as text columns (`_read_tables`), `validation_data` and
`validation_split` on raw text, and the one-line refusals of what Keras would stop on in several lines or
deep inside its step (a feature dict without the model's keys, a dict of text columns, labels missing, batches
of raw strings from a generator, raw text in a job of several processes).

Example:
>>> import keras_bert_impl
>>> from keras_bert_impl import BertBackbone, BertClassifier
>>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
>>> classifier = BertClassifier(backbone, num_classes=2)
>>> classifier._is_raw(["a fine film"]), classifier._is_raw({"token_ids": [[2, 3]]})
(True, False)
>>> classifier.predict(["a fine film"])
Traceback (most recent call last):
...
ValueError: This BertClassifier has no `preprocessor`, so it cannot read raw strings: build it with BertClassifier.from_preset(...) or pass preprocessor=..., or give the token_ids/segment_ids/padding_mask dict.
"""

import types
import warnings

import keras
import numpy as np

from keras_bert_impl.models.user_inputs import (
    as_plain_dict, chained, is_dataset, is_torch_data_loader, joined_processes, looks_like_text, numpy_text_as_lists,
)
from keras_bert_impl.table_columns import table_as_labels, table_as_texts

# Hugging Face tokenizers' names for the features (named in the one line that says a feature is missing).
HUGGING_FACE_FEATURE_NAMES = {"input_ids": "token_ids", "token_type_ids": "segment_ids",
                              "attention_mask": "padding_mask"}


class RawTextInputs:
    """The input checks and raw-text batches of `Task` (see the module docstring); a task says what it reads with
    `raw_text_columns` and `raw_labels`, and which metrics skip filler rows (`_skips_filler_rows`)."""

    def _is_raw(self, x):
        if isinstance(x, dict) or x is None:
            return False
        if self.preprocessor is not None:
            # A Python list or tuple is never a model input here (those are dicts): the preprocessor reads it, and
            # names the item that is not text, or says that it is empty.
            return self.preprocessor.is_raw_text(x) or isinstance(x, (list, tuple))
        return looks_like_text(x)

    def _check_preprocessor(self):
        if self.preprocessor is None:
            raise ValueError(
                f"This {type(self).__name__} has no `preprocessor`, so it cannot read raw strings: build it with "
                f"{type(self).__name__}.from_preset(...) or pass preprocessor=..., or give the "
                "token_ids/segment_ids/padding_mask dict."
            )
        self._check_sequence_length()  # the preprocessor's length may have been set since

    def _check_sequence_length(self):
        """Refuses, in one line, a preprocessor that packs rows longer than the backbone's position table."""
        length = getattr(self.preprocessor, "sequence_length", None)
        positions = getattr(self.backbone, "max_sequence_length", None)
        if length is not None and positions is not None and length > positions:
            raise ValueError(
                f"The preprocessor packs up to sequence_length={length} tokens, but the backbone has "
                f"{positions} positions (max_sequence_length): use sequence_length <= {positions}."
            )

    def _raw_dataset(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False, seed=None, predicting=False,
                     one_batch=False):
        """Raw text -> the preprocessor's batches. Filler rows (one step shape per bucket) when `predicting` (their
        outputs are dropped) or when the losses and metrics ignore them (`_takes_filler_rows`); `one_batch`: all
        the rows in one batch, without filler (`_raw_batch`)."""
        self._check_preprocessor()
        options = {} if predicting or self._takes_filler_rows() else {"fixed_batch_size": False}
        if one_batch:
            batch_size = 1024
            options = {"fixed_batch_size": False, "boundaries": [self.preprocessor.sequence_length]}
        return self.preprocessor.make_dataset(
            x, y, sample_weight, batch_size=32 if batch_size is None else batch_size, shuffle=shuffle, seed=seed,
            **options
        )

    def _takes_filler_rows(self):
        """Whether batches of raw text may end with weight-0 filler rows (one step shape per length bucket): with
        the default loss and metrics, which count only the real rows. A loss or metric of the user's counts every
        row (a `sum_over_batch_size` loss would be divided by the filler too), so it gets a short last batch."""
        arguments = getattr(self, "_compile_arguments", None)
        if arguments is None:
            return True
        return arguments["loss"] == "auto" and all(
            given in ("auto", None) or (isinstance(given, (list, tuple)) and all(map(self._skips_filler_rows, given)))
            for given in (arguments["metrics"], arguments["weighted_metrics"]))

    def _skips_filler_rows(self, metric):
        """Whether a metric given to `compile` counts nothing of the filler rows' labels (whatever their weight):
        none here; a task whose filler labels its own metrics skip (the tagger's -1) says which."""
        return False

    def _raw_validation(self, validation_data, batch_size):
        if validation_data is None:
            return None
        if isinstance(validation_data, tuple) and 2 <= len(validation_data) <= 3 and self._is_raw(validation_data[0]):
            x, y, *weight = validation_data
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    dataset = self._raw_dataset(x, y, weight[0] if weight else None, batch_size=batch_size)
            except ValueError as error:  # the same checks as the training data's: say which data it is
                raise ValueError(f"`validation_data`: {error}") from None
            for warning in caught:  # (e.g. the count of examples cut to sequence_length)
                warnings.warn(f"`validation_data`: {warning.message}", warning.category, stacklevel=3)
            return dataset
        if is_dataset(validation_data) and self._reads_string_datasets() and _dict_of_strings(
                validation_data.element_spec):
            raise ValueError(self._dataset_of_dicts_error(validation_data.element_spec, "`validation_data`"))
        if is_dataset(validation_data) and self._is_raw(validation_data):  # a tf.data.Dataset of strings
            return self._raw_dataset(validation_data, batch_size=batch_size)
        if isinstance(validation_data, list) and validation_data and all(isinstance(t, str) for t in validation_data):
            raise ValueError("`validation_data` of raw strings is a tuple (texts, labels) or (texts, labels, "
                             "sample_weight); got the texts alone: add their labels.")
        if isinstance(validation_data, dict):  # (Keras's own error prints every string of it)
            raise ValueError(f"`validation_data` is a dict with keys {sorted(map(str, validation_data))}: raw text "
                             "is a tuple (texts, labels) as `fit` takes x and y (a table: (df[text_columns], "
                             "df[label_column])); preprocessed features are a tuple (features, labels).")
        return validation_data

    def _read_tables(self, x, y=None, sample_weight=None):
        """pandas DataFrames and Series, and Hugging Face dataset columns, given as `x`, `y` or `sample_weight` ->
        the lists the preprocessor reads: `x=df[["sentence1", "sentence2"]]` is the pair `(texts_a, texts_b)`."""
        x = table_as_texts(numpy_text_as_lists(as_plain_dict(x)), self.raw_text_columns, type(self).__name__, y=y)
        return x, table_as_labels(y), table_as_labels(sample_weight)

    def _check_raw_labels(self, x, y, method):
        """Refuses raw text without its labels in one line (Keras would stop inside the traced step, in three)."""
        if y is None and self.raw_labels is not None and self._is_raw(x) and not is_dataset(x):
            noun, arguments = self.raw_labels
            raise ValueError(f"`y` is missing: {type(self).__name__}.{method} on raw text needs the {noun}, "
                             f"as in {method}({arguments}).")

    def _check_feature_inputs(self, x, method):
        """Refuses, in one line, model inputs Keras would stop on in several: a feature dict without the model's
        keys (e.g. Hugging Face's `input_ids`), or a numeric array where the features' dict goes."""
        expected = list(getattr(self, "_inputs_struct", None) or ())
        if not expected or x is None or self._is_raw(x) or is_dataset(x):
            return
        takes = (f"{type(self).__name__}.{method} takes raw text or a dict of the features "
                 f"{{{', '.join(expected)}}}")
        if isinstance(x, dict):
            missing = [key for key in expected if key not in x]
            text_columns = [key for key, value in x.items() if looks_like_text(numpy_text_as_lists(value))]
            if missing and text_columns:  # a batch of a Hugging Face dataset (`ds[:100]`), or a dict of columns
                raise ValueError(f"{type(self).__name__}.{method} got a dict of the columns {sorted(x)}, which hold "
                                 f"text: give its text columns, as in x={self._text_columns_of(x, text_columns)}.")
            if missing:
                renamed = [f"{key} is {ours}" for key, ours in HUGGING_FACE_FEATURE_NAMES.items() if key in x]
                hint = f" (Hugging Face's {', '.join(renamed)})" if renamed else ""
                raise ValueError(f"{takes}; the dict given has {sorted(x)}, without {missing}{hint}.")
            self._check_token_ids(x.get("token_ids"), method)
        elif hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (list, tuple)):
            if "string" in str(x.dtype):
                raise ValueError(f"{takes}; got a string tensor of shape {tuple(x.shape)}: pass the texts as a list "
                                 "of strings (or a tf.data.Dataset of them).")
            raise ValueError(f"{takes}; got an array of shape {tuple(x.shape)}: put it in the dict as "
                             f"{expected[0]}, with its {', '.join(expected[1:])}.")

    def _check_feature_labels(self, y, method):
        """Labels given with features (not raw text) that the loss cannot take: one line. The classifier and the
        tagger check their class ids (JAX trained on ids outside the classes silently, with a loss of 0)."""

    def _check_token_ids(self, token_ids, method):
        """Refuses, in one line, in-memory token ids outside the backbone's vocabulary: JAX gathers them silently
        (NaN outputs, a loss of NaN), PyTorch and TensorFlow stop inside the embedding lookup."""
        size = getattr(self.backbone, "vocabulary_size", None)
        if size is None or token_ids is None or is_dataset(token_ids) or not hasattr(token_ids, "__len__"):
            return
        ids = np.asarray(token_ids)
        if ids.size == 0 or ids.dtype.kind not in "iu":
            return
        outside = (ids < 0) | (ids >= size)
        if outside.any():
            row = int(np.argwhere(outside)[0][0])
            raise ValueError(f"{type(self).__name__}.{method}: token_ids of row {row} hold {int(ids[outside][0])}, "
                             f"outside the backbone's vocabulary of {size} (ids 0..{size - 1}); {int(outside.sum())} "
                             "id(s) in all: tokenize with the model's own preprocessor (model.preprocessor(texts)).")

    def _text_columns_of(self, table, text_columns):
        """How to pass `table`'s text columns, for an error: `(d['question'], d['context'])` where the task's own
        column names are there, else its first text columns in each number the task reads (`d['sentence']`, or
        `d['sentence1'] or (d['sentence1'], d['sentence2'])`)."""
        own = next((names for names in self.raw_text_columns if all(name in table for name in names)), None)
        choices = [own] if own else [text_columns[: len(names)] for names in self.raw_text_columns
                                     if len(names) <= len(text_columns)] or [text_columns[:1]]
        shown = [f"d[{names[0]!r}]" if len(names) == 1 else f"({', '.join(f'd[{name!r}]' for name in names)})"
                 for names in choices]
        return " or x=".join(shown)

    def _reads_string_datasets(self):
        return getattr(self.preprocessor, "reads_string_datasets", False)

    def _dataset_of_dicts_error(self, spec, where):
        """A `tf.data.Dataset` whose examples are dicts of columns (Hugging Face's `to_tf_dataset`, or
        `from_tensor_slices(dict(df))`) -> the error naming its columns and the `map` to its text columns. Before:
        a traceback of AutoGraph's generated code, ending on the tokenizer's "input is dict"."""
        inputs = spec[0] if isinstance(spec, tuple) else spec
        columns = {key: value for key, value in inputs.items()}
        text_columns = [key for key, value in columns.items() if _holds_strings(value)]
        texts = self._text_columns_of(columns, text_columns).split(" or x=")[-1]  # (the pair, where there is one)
        if isinstance(spec, tuple) and len(spec) > 1:
            rest = ", ".join(["y", "w"][: len(spec) - 1])
            mapped = f"ds.map(lambda d, {rest}: ({texts}, {rest}))"
        else:
            labels = [key for key in columns if key not in text_columns] or ["label"]
            mapped = f"ds.map(lambda d: ({texts}, d[{labels[0]!r}]))"
        return (f"{where} got a tf.data.Dataset whose examples are dicts of the columns {sorted(columns)}, which the "
                f"preprocessor does not read: map them to the text columns first, as in {mapped}.")

    def _refuse_raw_text_batches(self, x, method):
        """A Python generator or a `keras.utils.PyDataset` whose batches hold raw strings -> one line. Keras hands such
        batches to the model untokenized, and each backend stops in its own way ("Invalid dtype: str..." on PyTorch,
        "Error interpreting argument ... as an abstract array" on JAX, "arrays must be at least rank 1" on TensorFlow).
        Returns `x`; a generator's first batch, read to look at it, is put back in front."""
        if isinstance(x, types.GeneratorType):
            try:
                first = next(x)
            except StopIteration:
                return x  # empty: Keras says so
            x = chained(first, x)
        elif isinstance(x, keras.utils.PyDataset) and x.num_batches:
            first = x[0]
        elif is_torch_data_loader(x):
            first = next(iter(x), None)  # (a DataLoader is iterated afresh each epoch: nothing is lost)
            if first is None:
                return x
        elif is_dataset(x) and self._reads_string_datasets() and _dict_of_strings(x.element_spec):
            raise ValueError(self._dataset_of_dicts_error(x.element_spec, f"{type(self).__name__}.{method}"))
        elif (is_dataset(x) and self.preprocessor is not None and _holds_strings(x.element_spec)
              and not self.preprocessor.is_raw_text(x)):
            # (a tagger's dataset of word lists stopped in Keras, in another message on each backend: "expects 3
            # named input(s)", a jax.jit error, "Invalid dtype: object")
            name = type(self).__name__
            arguments = "texts" if self.raw_labels is None else self.raw_labels[1]
            if method == "predict" and self.raw_labels is not None:
                arguments = arguments.rsplit(", ", 1)[0]
            raise ValueError(f"{name}.{method} got a tf.data.Dataset of strings, which its preprocessor does not read "
                             f"(a classifier's does): give the examples themselves ({method}({arguments}), as lists or "
                             "tables), or a dataset of model.preprocessor.make_dataset(...) batches.")
        else:
            return x
        inputs = first[0] if isinstance(first, (tuple, list)) and first and not looks_like_text(first) else first
        if isinstance(inputs, dict) and any(looks_like_text(value) for value in inputs.values()):
            inputs = next(value for value in inputs.values() if looks_like_text(value))
        if looks_like_text(inputs):
            kind = ("generator" if isinstance(x, types.GeneratorType) else "PyDataset"
                    if isinstance(x, keras.utils.PyDataset) else "torch DataLoader")
            name = type(self).__name__
            arguments = "texts" if method == "predict" else "texts, labels"
            raise ValueError(f"{name}.{method} got a {kind} whose batches hold raw text, which Keras passes to the "
                             f"model untokenized: give the texts themselves ({method}({arguments}), as lists, arrays "
                             "or tables), a tf.data.Dataset of strings, or batches of model.preprocessor(texts).")
        return x

    def _split_off_validation(self, x, y, sample_weight, validation_split):
        """Raw examples (and their labels and weights) -> `(x, y, sample_weight, validation_data)`."""
        self._check_preprocessor()
        from keras_bert_impl.text.preprocessing_layer import as_list  # (a preprocessor means TensorFlow is here)

        x, validation_x, at = self.preprocessor.split_examples(x, validation_split)
        validation_y = None
        if y is not None:
            y, validation_y = as_list(y)[:at], as_list(y)[at:]
        if sample_weight is None:
            return x, y, None, (validation_x, validation_y)
        sample_weight, validation_weight = as_list(sample_weight)[:at], as_list(sample_weight)[at:]
        return x, y, sample_weight, (validation_x, validation_y, validation_weight)

    def _class_weight_as_sample_weight(self, y, class_weight, sample_weight):
        """`class_weight` folded into per-example weights (Keras refuses both together, and raw strings already
        come with weights). Tasks with one class per example override it."""
        raise ValueError(
            f"`class_weight` weighs one class per example, which {type(self).__name__} does not have: give "
            "`sample_weight` (one weight per example) instead."
        )

    def _check_one_process(self):
        """Refuses `fit` on raw strings in a job of several PyTorch or JAX processes: each process would train
        alone on all the data (PyTorch: N different models) or feed every row N times (JAX)."""
        count, runtime = joined_processes()
        if count > 1:
            raise RuntimeError(
                f"{type(self).__name__}.fit on raw strings trains one process, but this is one of {count} {runtime} "
                "processes, each of which would train on all the data: use keras_bert_impl.training.finetuning."
                "finetune(model, model.preprocessor.make_dataset(texts, labels, batch_size=..., shuffle=True), "
                "strategy=get_strategy('multiworker'), ...), which gives each process its rows of every batch and "
                "averages the gradients, or recipes/finetune_classifier.py --strategy multiworker (docs/finetuning.md)"
            )

    def _count_examples(self, x):
        return self.preprocessor.count_examples(x)

    def _raw_batch(self, x, y=None, sample_weight=None, method="predict_on_batch"):
        """Raw text given to `train_on_batch`, `test_on_batch` or `predict_on_batch` -> the one batch of NumPy
        features (and labels, weights) that the preprocessor makes of all of it, as keras-hub's tasks do; other
        inputs as they are. Before: "called on packed features ..., not raw text" (TensorFlow, PyTorch), a
        `jax.jit` error on JAX."""
        x, y, sample_weight = self._read_tables(x, y, sample_weight)
        if not self._is_raw(x) or is_dataset(x):  # (the preprocessor's TensorFlow features, as NumPy for JAX)
            return keras.tree.map_structure(_eager_tensor_as_numpy, (x, y, sample_weight))
        if method != "predict_on_batch":
            self._check_raw_labels(x, y, method)
        dataset = self._raw_dataset(x, y, sample_weight, predicting=method == "predict_on_batch", one_batch=True)
        batches = [keras.tree.map_structure(lambda tensor: tensor.numpy(), batch) for batch in dataset]
        batch = keras.tree.map_structure(lambda *parts: np.concatenate(parts), *batches)  # (one length: one shape)
        if method == "predict_on_batch" or not isinstance(batch, tuple):
            features = batch[0] if isinstance(batch, tuple) else batch
            return features, None, None
        return (*batch, None)[:3]

    def _check_monitors(self, callbacks):
        """Refuses, in one line, a callback that watches keras-hub's name of the default accuracy: keras-hub's
        classifier logs `sparse_categorical_accuracy`, ours `accuracy`. Before: `ModelCheckpoint(save_best_only=True)`
        warned and kept every epoch, `EarlyStopping` never stopped (or stopped on a `KeyError` after an epoch)."""
        compiled = getattr(self, "_compile_metrics", None)
        given = [getattr(compiled, name, None) for name in ("_user_metrics", "_user_weighted_metrics")]
        names = {getattr(metric, "name", metric) for group in given if group for metric in keras.tree.flatten(group)}
        for callback in callbacks or ():
            monitor = getattr(callback, "monitor", None)
            if not isinstance(monitor, str):
                continue
            prefix = "val_" if monitor.startswith("val_") else ""
            if monitor[len(prefix):] == "sparse_categorical_accuracy" and "sparse_categorical_accuracy" not in names \
                    and "accuracy" in names:
                raise ValueError(
                    f"{type(callback).__name__}(monitor={monitor!r}) watches keras-hub's name of the accuracy, which "
                    f"this {type(self).__name__} logs as {prefix}accuracy: pass monitor='{prefix}accuracy'.")


def _eager_tensor_as_numpy(value):
    """An eager TensorFlow tensor as its NumPy array (recognised without importing TensorFlow); else `value`."""
    if type(value).__module__.startswith("tensorflow") and hasattr(value, "numpy") and not is_dataset(value):
        return value.numpy()
    return value


def _dict_of_strings(spec):
    """Whether a `tf.data` element spec's inputs (the first of a tuple, or the whole) are a dict holding strings."""
    inputs = spec[0] if isinstance(spec, tuple) and spec else spec
    return isinstance(inputs, dict) and _holds_strings(inputs)


def _holds_strings(spec):
    """Whether a `tf.data` element spec (nested tuples and dicts of specs) holds a string component."""
    if isinstance(spec, dict):
        return any(_holds_strings(value) for value in spec.values())
    if isinstance(spec, (tuple, list)):
        return any(_holds_strings(value) for value in spec)
    return getattr(getattr(spec, "dtype", None), "name", None) == "string"
