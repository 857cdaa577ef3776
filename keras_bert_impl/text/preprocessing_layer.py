"""PreprocessingLayer: a Keras layer that runs TensorFlow string ops, under any Keras backend."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.presets import PresetsAttribute
from keras_bert_impl.raw_text import not_text_error
from keras_bert_impl.table_columns import table_as_texts


# transformers' tokenizer's call arguments, which no preprocessor takes: each is one line naming what to do instead.
HUGGING_FACE_TOKENIZER_ARGUMENTS = frozenset({
    "padding", "truncation", "max_length", "return_tensors", "add_special_tokens", "return_attention_mask",
    "return_token_type_ids", "return_offsets_mapping", "text_pair", "is_split_into_words",
})


class PreprocessingLayer(keras.layers.Layer):
    """Base of the tokenizer and the preprocessors: a Keras layer whose `call` runs TensorFlow ops on the CPU.

    Text preprocessing needs string tensors, which only TensorFlow has. As in
    keras-hub, these layers therefore keep TensorFlow tensors whatever the
    Keras backend (JAX, PyTorch or TensorFlow): the inputs are not converted
    to backend tensors, Python strings and lists are accepted, and the layer
    works eagerly, inside `tf.function` and in `tf.data.Dataset.map`. They hold
    no weights; they are Keras layers so that they serialise with the model
    (`get_config`, `.keras` files) and nest in it as `model.preprocessor`.

    Subclasses implement `call` with TensorFlow ops.

    Example:
    >>> import tensorflow as tf
    >>> class Upper(PreprocessingLayer):
    ...     def call(self, strings):
    ...         return tf.strings.upper(strings)
    >>> Upper()(["abc"]).numpy()
    array([b'ABC'], dtype=object)
    """

    # The table columns raw text may be given as, by example names (said when a DataFrame of other columns is given).
    raw_text_columns = (("text",),)
    reads_string_datasets = False  # whether `make_dataset` takes a tf.data.Dataset of raw strings
    presets = PresetsAttribute()  # the names `from_preset` takes (keras-hub's `Class.presets`)

    def __init__(self, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        # Keep TensorFlow (string) tensors: do not convert to backend tensors.
        self._convert_input_args = False
        # Accept plain Python strings and lists as positional arguments.
        self._allow_non_tensor_positional_args = True
        self.built = True

    def __call__(self, *args, **kwargs):
        # Straight to `call`: no weights to build, no autocasting, and a user's input error reaches them as
        # the one line `call` raised, not wrapped in Keras's "Exception encountered when calling" report.
        given = [name for name in kwargs if name in HUGGING_FACE_TOKENIZER_ARGUMENTS]
        if given:  # (was "call() got an unexpected keyword argument 'return_tensors'")
            raise self.hugging_face_arguments_error(given)
        if args:  # a DataFrame or Series as `x`: the lists it holds, as `Task.fit` reads it
            args = (self.read_table(args[0], args[1] if len(args) > 1 else kwargs.get("y")),) + args[1:]
        with tf.device("cpu"):
            return self.call(*args, **kwargs)

    def hugging_face_arguments_error(self, given):
        """The `TypeError` for a preprocessor called as transformers' tokenizer is (`padding=`, `return_tensors=`)."""
        return TypeError(
            f"{type(self).__name__}(texts) takes no {', '.join(f'{name}=' for name in given)} (transformers' "
            "tokenizer's): it gives the features padded to its sequence_length (set preprocessor.sequence_length "
            "for another), as TensorFlow tensors on every backend, which the model takes as they are (PyTorch's: "
            "torch.as_tensor(features['token_ids'].numpy())).")

    def read_table(self, x, y=None):
        """A pandas DataFrame or Series, or a Hugging Face dataset column, as `x` -> the list (or pair of lists) it
        holds (`keras_bert_impl.table_columns.table_as_texts`: a DataFrame of other columns, or one holding the
        labels `y`, is one line); anything else as it is.

        Example:
        >>> import pandas as pd
        >>> PreprocessingLayer().read_table(pd.DataFrame({"sentence": ["a b", "c"]}))
        ['a b', 'c']
        """
        return table_as_texts(x, self.raw_text_columns, type(self).__name__, y=y)

    def compute_output_spec(self, *args, **kwargs):
        # String ops have no symbolic Keras spec; preprocessing is never part of the functional graph.
        raise NotImplementedError(f"{type(self).__name__} runs eagerly or in tf.data, not on symbolic Keras tensors.")

    def get_build_config(self):
        return None

    def split_examples(self, x, validation_split):
        """Raw examples cut as Keras's `fit(validation_split=...)` cuts arrays: the last fraction is validation.

        Returns `(training_x, validation_x, at)`, both in `x`'s own form, and
        the index `at` where labels and weights are cut alike. Examples are
        rows here (a list, array or Series); preprocessors whose raw form is a
        tuple of columns override `_example_columns`.

        Example:
        >>> PreprocessingLayer().split_examples(["a", "b", "c", "d"], 0.25)
        (['a', 'b', 'c'], ['d'], 3)
        """
        columns = self._example_columns(x)
        if columns is None:
            rows = as_list(x)
            at = _split_index(len(rows), validation_split)
            return rows[:at], rows[at:], at
        columns = [as_list(column) for column in columns]
        at = _split_index(len(columns[0]), validation_split)
        return tuple(c[:at] for c in columns), tuple(c[at:] for c in columns), at

    def _example_columns(self, x):
        """The parallel columns of `x` when its raw form is a tuple of them (e.g. `(questions, contexts)`), else None."""
        return None


def as_list(values):
    """A list, tuple, NumPy array or pandas Series as a Python list (a string is one example).

    Example:
    >>> import numpy as np
    >>> as_list(np.array(["a", "b"])), as_list("c")
    (['a', 'b'], ['c'])
    """
    if isinstance(values, (str, bytes)):
        return [values]
    if hasattr(values, "tolist") and not isinstance(values, (list, tuple)):
        return values.tolist()
    return list(values)


def _split_index(count, validation_split):
    if isinstance(validation_split, bool) or not isinstance(validation_split, (int, float)) or not 0 < validation_split < 1:
        raise ValueError(f"`validation_split` must be a float between 0 and 1, got {validation_split!r}.")
    at = int(np.ceil(count * (1.0 - validation_split)))
    if at == 0 or at == count:
        raise ValueError(
            f"validation_split={validation_split} of {count} example(s) leaves "
            f"{'no training' if at == 0 else 'no validation'} example: give more examples or another fraction."
        )
    return at


def as_string_tensor(texts, name="texts", first_index=0):
    """Python / NumPy strings (or a string tensor) -> a `tf.string` tensor, with a clear error for anything else:
    an item that is not a string is named by its index (`first_index` is the index of `texts[0]`, for a chunk).

    Example:
    >>> as_string_tensor(["a", "b"]).shape.as_list()
    [2]
    """
    if isinstance(texts, (tf.Tensor, tf.RaggedTensor)):
        if texts.dtype != tf.string:
            raise ValueError(f"`{name}` must hold strings, got a {texts.dtype.name} tensor.")
        return texts
    if isinstance(texts, np.ndarray) and texts.dtype.kind not in ("U", "S", "O"):
        raise ValueError(f"`{name}` must hold strings, got a NumPy array of {texts.dtype}.")
    try:
        return tf.convert_to_tensor(texts, dtype=tf.string)
    except (TypeError, ValueError) as e:
        if isinstance(texts, (list, tuple, np.ndarray)):  # (was "Can't convert Python sequence with mixed types")
            for index, item in enumerate(texts):
                if not isinstance(item, (str, bytes, np.str_, np.bytes_)):
                    raise not_text_error(first_index + index, item) from None
        raise ValueError(f"`{name}` must be a string or a list of strings ({e}).") from None
