"""Base class for functional models that keep their sub-layers as attributes."""

import keras

from keras_bert_impl.hugging_face_names import HuggingFaceNames


# transformers' forward keywords: `model(**tokenizer(texts, return_tensors="pt"))`, `model(input_ids, labels=...)`.
TRANSFORMERS_CALL_KEYWORDS = frozenset({
    "input_ids", "attention_mask", "token_type_ids", "position_ids", "labels", "head_mask", "inputs_embeds",
    "output_attentions", "output_hidden_states", "return_dict", "start_positions", "end_positions",
})


class FunctionalModel(HuggingFaceNames, keras.Model):
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

    # transformers' attribute names -> what to use here (`HuggingFaceNames.__getattr__` names it:
    # `model.config.id2label`, a habit, was Python's bare "object has no attribute 'config'"). Subclasses add theirs.
    hugging_face_attributes = {"config": "get_config() (the settings it was built with)"}

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """transformers' name: one line naming `from_preset`, which takes the same Hub ids and directories."""
        raise TypeError(f"{cls.__name__}.from_pretrained is transformers' name: use {cls.__name__}.from_preset(...), "
                        "which takes the same Hub id (\"owner/name\" or \"hf://owner/name\") or transformers directory.")

    def __call__(self, *args, **kwargs):
        # transformers' forward keywords (`model(**batch)`): Keras said "missing a required argument: 'inputs'",
        # and `labels=` or `attention_mask=` given beside the features were dropped without a word.
        given = sorted(set(kwargs) & TRANSFORMERS_CALL_KEYWORDS)
        if given:
            raise TypeError(
                f"{type(self).__name__} is called on one dict of the features {{token_ids, segment_ids, padding_mask}} "
                f"(and training=True for dropout), not on transformers' keywords {', '.join(given)}: call it as "
                "model({'token_ids': input_ids, 'segment_ids': token_type_ids, 'padding_mask': attention_mask}); it "
                "gives the outputs, not a loss (fit computes that).")
        return super().__call__(*args, **kwargs)

    def __setattr__(self, name, value):
        is_property = isinstance(getattr(type(self), name, None), property)
        uninitialized = not hasattr(self, "_initialized")
        if keras.config.backend() == "torch" and (is_property or uninitialized):
            return object.__setattr__(self, name, value)
        return super().__setattr__(name, value)
