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
        if keras.config.backend() == "torch" and "_torch_params" in self.__dict__:
            # Keras set its `torch.nn.ParameterDict` of every weight while this model was not initialised, so it went
            # in as a plain attribute: set again, it is the module's parameters (`model.parameters()` gave none, so a
            # torch optimizer had nothing to train, and torch.onnx / torch.jit tracing took the weights for constants).
            self._torch_params = self.__dict__.pop("_torch_params")

    def __setattr__(self, name, value):
        is_property = isinstance(getattr(type(self), name, None), property)
        uninitialized = not hasattr(self, "_initialized")
        if keras.config.backend() == "torch" and (is_property or uninitialized):
            return object.__setattr__(self, name, value)
        return super().__setattr__(name, value)
