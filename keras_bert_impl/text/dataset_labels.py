"""A `tf.data.Dataset`'s class labels as the loss takes them, checked as its batches are read.

Labels given as lists are checked up front (`BertClassifier.label_ids`); a dataset's are seen only as it is read.
`class_ids_of_dataset` maps each element's labels to class ids inside the pipeline: label names (strings) through
`label_names`, ids (ints, bools, whole floats) kept; a label that is no class stops the read with a message that
names the batch, the row and the label, which `labels_error_as_one_line` turns into one line. Before, a label
outside the classes trained silently at loss 0.0 on JAX (its one-hot row is all zeros) and stopped in PyTorch's
`cross_entropy` ("Target 5 is out of bounds"), and label names stopped deep in each backend ("Invalid dtype:
object").

Example:
>>> import tensorflow as tf
>>> texts = tf.data.Dataset.from_tensor_slices((["a fine film", "a dull one"], ["positive", "negative"])).batch(2)
>>> mapped = class_ids_of_dataset(texts, 2, ["negative", "positive"])
>>> next(iter(mapped))[1].numpy().tolist()
[1, 0]
>>> bad = tf.data.Dataset.from_tensor_slices((["a fine film", "a dull one"], [1, 5])).batch(2)
>>> try:
...     list(class_ids_of_dataset(bad, 2, None))
... except Exception as error:
...     print(labels_error_as_one_line(error))
Batch 0 of the dataset, row 1: label 5 is not a class of this 2-class classifier (ids 0..1).
"""

import base64
import re

import tensorflow as tf

# The message travels inside TensorFlow's error text, which escapes quotes and brackets: as URL-safe base64.
_MARKER = "keras_bert_impl dataset label: "
_MESSAGE = re.compile(re.escape(_MARKER) + r"([A-Za-z0-9_=-]+)")


def class_ids_of_dataset(dataset, num_classes, label_names=None):
    """`dataset` with the labels of each element (its second component) as int64 class ids, checked.

    A dataset without labels, or whose labels are not one per example (multi-hot rows, regression scores: floats
    that are not whole numbers are left to the loss), is returned as it is.

    Raises:
        ValueError: the labels are strings and there are no `label_names` (known from the dataset's type alone).
    """
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) < 2 or not isinstance(spec[1], tf.TensorSpec):
        return dataset
    dtype = spec[1].dtype
    if dtype == tf.string:
        if not label_names:
            raise ValueError(f"The dataset's labels are strings (label names), but this classifier has no "
                             f"label_names: give class ids 0..{num_classes - 1}, or build it with label_names=[...].")
        table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            tf.constant(list(label_names)), tf.range(len(label_names), dtype=tf.int64)), default_value=-1)
    elif not (dtype.is_integer or dtype.is_bool or dtype.is_floating):
        return dataset
    batched = spec[1].shape.rank is not None and spec[1].shape.rank >= 1
    where = "Batch {} of the dataset, row {}" if batched else "Element {} of the dataset"

    def convert(index, element):
        labels = element[1]
        flat = tf.reshape(labels, [-1])
        if dtype == tf.string:
            ids = table.lookup(flat)
            bad = ids < 0
            described = tf.strings.join(["'", flat[tf.argmax(tf.cast(bad, tf.int32))],  # (format would quote it)
                                         f"' is not one of the label_names {list(label_names)}"])
        else:
            numbers = tf.cast(flat, tf.float64)
            ids = tf.cast(numbers, tf.int64)
            bad = (numbers != tf.cast(ids, tf.float64)) | (ids < 0) | (ids >= num_classes)
            described = tf.strings.format(
                "{} is not a class of this " + f"{num_classes}-class classifier (ids 0..{num_classes - 1})",
                flat[tf.argmax(tf.cast(bad, tf.int32))])
        row = tf.argmax(tf.cast(bad, tf.int32))
        message = tf.strings.join([
            tf.strings.format(where, (index, row) if batched else (index,)), ": label ", described, "."])
        check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)),
                                    [tf.strings.join([_MARKER, tf.io.encode_base64(message, pad=True)])])
        with tf.control_dependencies([check]):
            ids = tf.reshape(tf.identity(ids), tf.shape(labels))
        return (element[0], ids, *element[2:])

    return dataset.enumerate().map(lambda index, element: convert(index, element),
                                   num_parallel_calls=tf.data.AUTOTUNE)


def labels_error_as_one_line(error):
    """The one line of a label check that failed inside a dataset's read (`class_ids_of_dataset`), or None for any
    other error."""
    found = _MESSAGE.search(str(error))
    return base64.urlsafe_b64decode(found.group(1)).decode("utf-8", "replace") if found else None
