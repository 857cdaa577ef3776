"""Base class for functional models that keep their sub-layers as attributes."""

import keras


class FunctionalModel(keras.Model):
    """A `keras.Model` built functionally inside `__init__` of a subclass.

    Subclasses create their layers and store them as attributes *before*
    calling `super().__init__(inputs=..., outputs=...)`, keras-hub style. On
    the PyTorch backend a Keras layer is a `torch.nn.Module`, which refuses
    attribute assignment before `Module.__init__` has run; since all state is
    tracked by the functional graph, attributes set before initialisation are
    stored as plain Python attributes (the same workaround as keras-hub's
    `Backbone`).

    Example:
    >>> import keras
    >>> class Doubler(FunctionalModel):
    ...     def __init__(self, **kwargs):
    ...         self.dense = keras.layers.Dense(2)
    ...         inputs = keras.Input((3,))
    ...         super().__init__(inputs=inputs, outputs=self.dense(inputs), **kwargs)
    >>> Doubler().output_shape
    (None, 2)
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialized = True

    def __setattr__(self, name, value):
        is_property = isinstance(getattr(type(self), name, None), property)
        uninitialized = not hasattr(self, "_initialized")
        if keras.config.backend() == "torch" and (is_property or uninitialized):
            return object.__setattr__(self, name, value)
        return super().__setattr__(name, value)
