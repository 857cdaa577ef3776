"""Hugging Face's attribute names on our classes: the one `__getattr__` that names ours instead.

A `transformers` user reaches for `model.config`, `model.num_labels`,
`tokenizer.decode` or `tokenizer.vocab_size`; Python's answer was a bare
"object has no attribute". Classes that mix `HuggingFaceNames` in list
`{their name: what to use here}` in `hugging_face_attributes`, and such a
name is one line naming ours. It sits in the bottom room because both the
models (no TensorFlow) and the tokenizer (TensorFlow) use it.
"""


class HuggingFaceNames:
    """Mixin: a missing attribute that `hugging_face_attributes` lists is one `AttributeError` line naming ours.

    Only names Python did not find reach it; a property that raised `AttributeError` itself shows its own error
    again, and a base's own `__getattr__` (PyTorch's `Module`: its parameters and modules) is asked for the rest.

    Example:
    >>> class Encoder(HuggingFaceNames):
    ...     hugging_face_attributes = {"hidden_size": "hidden_dim"}
    >>> Encoder().hidden_size
    Traceback (most recent call last):
    ...
    AttributeError: 'Encoder' object has no attribute 'hidden_size' (transformers' name): use hidden_dim.
    """

    hugging_face_attributes = {}  # their name -> what to use here
    hugging_face_origin = "transformers' name"  # how the message calls such a name

    def __getattr__(self, name):
        ours = type(self).hugging_face_attributes.get(name)
        if ours is not None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}' "
                                 f"({type(self).hugging_face_origin}): use {ours}.")
        attribute = getattr(type(self), name, None)
        if isinstance(attribute, property):  # a property that raised AttributeError itself: its own error again
            return attribute.fget(self)
        parent = getattr(super(), "__getattr__", None)
        if parent is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return parent(name)
