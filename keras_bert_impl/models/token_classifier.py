"""BertTokenClassifier: a label per token over BERT's sequence output (CoNLL-2003 NER)."""

import keras

from keras_bert_impl.models.backbone import BertBackbone, bert_kernel_initializer
from keras_bert_impl.models.functional_model import FunctionalModel

IGNORE_LABEL = -1


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertTokenClassifier(FunctionalModel):
    """Token classification (tagging) head on a `BertBackbone`: dropout and a dense layer per token.

    Following the BERT paper (section 4.3), a word's label sits on its first
    WordPiece; every other position (later pieces, [CLS], [SEP], padding,
    document context) carries label -1, which the default loss
    (`SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)`,
    averaged over the labelled positions only) and the default metric
    (`MaskedTokenAccuracy`) skip. `keras_bert_impl.data.conll` builds such
    labels.

    Inputs are the backbone's dict `{"token_ids", "segment_ids",
    "padding_mask"}`; the output is logits `(batch, sequence_length,
    num_labels)`. Backend-agnostic (no TensorFlow import).

    Args:
        backbone: a `BertBackbone`.
        num_labels: int, number of tags (e.g. 9 for CoNLL-2003 IOB2).
        dropout: float, dropout on the sequence output before the dense layer.
        compile_defaults: compile with the default loss and metric (AdamW
            optimizer at 5e-5); call `compile` again to change them.

    Example:
    >>> import numpy as np
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
    ...                         hidden_dim=16, intermediate_dim=32, max_sequence_length=16)
    >>> model = BertTokenClassifier(backbone, num_labels=9)
    >>> inputs = {"token_ids": np.ones((2, 8), "int32"), "segment_ids": np.zeros((2, 8), "int32"),
    ...           "padding_mask": np.ones((2, 8), "int32")}
    >>> tuple(model.predict(inputs, verbose=0).shape)
    (2, 8, 9)
    >>> labels = np.full((2, 8), -1); labels[:, 1] = 3
    >>> loss = model.evaluate(inputs, labels, verbose=0, return_dict=True)["loss"]
    >>> bool(loss > 0)
    True
    """

    def __init__(self, backbone, num_labels, dropout=0.1, compile_defaults=True, **kwargs):
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
            raise ValueError(f"`num_labels` must be a positive int, got {num_labels!r}.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1), got {dropout!r}.")

        # === Layers ===
        self.backbone = backbone
        self.output_dropout = keras.layers.Dropout(dropout, dtype=backbone.dtype_policy, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_labels,
            kernel_initializer=bert_kernel_initializer(),
            dtype=backbone.dtype_policy,
            name="logits",
        )

        # === Functional Model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in ("token_ids", "segment_ids", "padding_mask")
        }
        x = backbone(inputs)["sequence_output"]
        x = self.output_dropout(x)
        logits = self.output_dense(x)
        # Logits in float32 so that the loss is stable under mixed precision.
        logits = keras.layers.Activation("linear", dtype="float32", name="float32_logits")(logits)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.num_labels = num_labels
        self.dropout = dropout
        self.compile_defaults = compile_defaults
        if compile_defaults:
            self.compile()

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """`keras.Model.compile` with defaults for tagging; `"auto"` picks them.

        Defaults: AdamW(5e-5), `SparseCategoricalCrossentropy(from_logits=True,
        ignore_class=-1)`, `[MaskedTokenAccuracy()]`.
        """
        if optimizer == "auto":
            optimizer = keras.optimizers.AdamW(5e-5)
        if loss == "auto":
            loss = token_classification_loss()
        if metrics == "auto":
            metrics = [MaskedTokenAccuracy()]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "num_labels": self.num_labels,
            "dropout": self.dropout,
            "compile_defaults": self.compile_defaults,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("backbone"), dict):
            config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return cls(**config)


def token_classification_loss():
    """Cross-entropy on logits that ignores label -1 and averages over the labelled tokens.

    Example:
    >>> import numpy as np
    >>> loss = token_classification_loss()
    >>> logits = np.zeros((1, 3, 2), "float32")
    >>> round(float(loss(np.array([[-1, 0, 1]]), logits)), 4)  # log(2) over the 2 labelled tokens
    0.6931
    """
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE_LABEL)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class MaskedTokenAccuracy(keras.metrics.Mean):
    """Accuracy of the argmax over the positions whose label is not -1.

    Args:
        name: metric name.
        ignore_class: the label value to skip.

    Example:
    >>> import numpy as np
    >>> m = MaskedTokenAccuracy()
    >>> logits = np.array([[[1., 0.], [0., 1.], [0., 1.]]])
    >>> m.update_state(np.array([[0, 0, -1]]), logits)
    >>> float(m.result())
    0.5
    """

    def __init__(self, name="token_accuracy", ignore_class=IGNORE_LABEL, dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.ignore_class = ignore_class

    def update_state(self, y_true, y_pred, sample_weight=None):
        from keras import ops

        y_true = ops.cast(y_true, "int32")
        if len(y_true.shape) == len(y_pred.shape):
            y_true = ops.squeeze(y_true, axis=-1)
        predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        valid = ops.cast(ops.not_equal(y_true, self.ignore_class), "float32")
        if sample_weight is not None:
            valid = valid * ops.cast(sample_weight, "float32")
        correct = ops.cast(ops.equal(predicted, y_true), "float32")
        return super().update_state(correct, sample_weight=valid)

    def get_config(self):
        return {**super().get_config(), "ignore_class": self.ignore_class}
