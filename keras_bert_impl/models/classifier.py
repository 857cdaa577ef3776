"""BertClassifier: sentence (pair) classification and regression on BERT's pooled output (GLUE)."""

import keras
import numpy as np

from keras_bert_impl.models.backbone import bert_kernel_initializer
from keras_bert_impl.models.functional_model import FunctionalModel


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertClassifier(FunctionalModel):
    """Classification or regression head on a `BertBackbone`: pooled [CLS] output -> dropout -> dense.

    As in the BERT paper (section 4.1): the pooler's tanh output of the
    [CLS] position, dropout, and one dense layer. `num_classes >= 2` gives
    logits `(batch, num_classes)` trained with sparse categorical
    cross-entropy; `num_classes=1` is regression (STS-B): output
    `(batch, 1)` trained with mean squared error.

    Inputs are the backbone's dict `{"token_ids", "segment_ids",
    "padding_mask"}`. Backend-agnostic: this file imports no TensorFlow.

    Raw strings: give a `preprocessor` (e.g.
    `keras_bert_impl.text.classifier_preprocessor.ClassifierPreprocessor`, a
    TensorFlow object) and `predict` also accepts a string, a list of strings
    (one segment) or a pair of lists / list of pairs (two segments);
    `predict_labels` returns label names (from `label_names`) or scores.

    Args:
        backbone: a `BertBackbone`.
        num_classes: int >= 1; 1 means regression.
        dropout: float, dropout on the pooled output.
        preprocessor: optional object with `__call__(texts) -> features dict`
            for raw-string `predict`; saved with the model when it is
            serialisable.
        label_names: optional list of `num_classes` strings for `predict_labels`.
        compile_defaults: compile with the default loss/metrics (AdamW 5e-5);
            `compile` again or `keras_bert_impl.training.finetuning.finetune`
            to change the optimizer.

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl.models.backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
    ...                         hidden_dim=16, intermediate_dim=32, max_sequence_length=16)
    >>> model = BertClassifier(backbone, num_classes=3)
    >>> inputs = {"token_ids": np.ones((2, 8), "int32"), "segment_ids": np.zeros((2, 8), "int32"),
    ...           "padding_mask": np.ones((2, 8), "int32")}
    >>> tuple(model.predict(inputs, verbose=0).shape)
    (2, 3)
    >>> tuple(BertClassifier(backbone, num_classes=1).predict(inputs, verbose=0).shape)
    (2, 1)
    """

    def __init__(
        self,
        backbone,
        num_classes,
        dropout=0.1,
        preprocessor=None,
        label_names=None,
        compile_defaults=True,
        **kwargs,
    ):
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(
                f"`num_classes` must be a positive int (1 for regression), got {num_classes!r}."
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1), got {dropout!r}.")
        if label_names is not None:
            label_names = [str(name) for name in label_names]
            if len(label_names) != num_classes or num_classes == 1:
                raise ValueError(
                    f"`label_names` must list {num_classes} names for a {num_classes}-class classifier "
                    f"(none for regression), got {label_names!r}."
                )

        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.output_dropout = keras.layers.Dropout(dropout, dtype=backbone.dtype_policy, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=bert_kernel_initializer(),
            dtype=backbone.dtype_policy,
            name="logits",
        )

        # === Functional Model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in ("token_ids", "segment_ids", "padding_mask")
        }
        x = backbone(inputs)["pooled_output"]
        x = self.output_dropout(x)
        outputs = self.output_dense(x)
        # float32 outputs keep the loss stable under mixed precision.
        outputs = keras.layers.Activation("linear", dtype="float32", name="float32_logits")(outputs)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout
        self.label_names = label_names
        self.compile_defaults = compile_defaults
        if compile_defaults:
            self.compile()

    @property
    def is_regression(self):
        return self.num_classes == 1

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """`keras.Model.compile` with task defaults; `"auto"` picks them.

        Defaults: AdamW(5e-5); classification: `SparseCategoricalCrossentropy(
        from_logits=True)` and accuracy (a weighted metric); regression: `MeanSquaredError` and no
        metric. Both losses average over the sum of the sample weights
        (`reduction="mean_with_sample_weight"`), so weight-0 filler rows of a
        fixed-size batch do not dilute the mean; without weights this is the
        usual batch mean.
        """
        if optimizer == "auto":
            optimizer = keras.optimizers.AdamW(5e-5)
        if loss == "auto":
            loss = (
                keras.losses.MeanSquaredError(reduction="mean_with_sample_weight")
                if self.is_regression
                else keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="mean_with_sample_weight")
            )
        if metrics == "auto":
            metrics = None
            if not self.is_regression and "weighted_metrics" not in kwargs:
                # Weighted, so that weight-0 filler rows are not counted.
                kwargs["weighted_metrics"] = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    # === Raw strings ===

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """`keras.Model.predict`; with a `preprocessor`, `x` may also be raw strings.

        Raw forms: `"text"`, `["a", "b"]` (single segments), a tuple
        `(["a1", ...], ["b1", ...])` or a list `[("a1", "b1"), ...]` (pairs). Returns logits (or
        `(batch, 1)` scores for regression).
        """
        if _is_raw_text(x):
            x = self._features_from_text(x)
        return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)

    def predict_labels(self, texts, batch_size=32):
        """Predicted label names (or class ids without `label_names`), or float scores for regression.

        Args:
            texts: raw strings in one of the forms `predict` accepts.
            batch_size: int.

        Example:
        >>> model.predict_labels(["a great film", "dull"])  # doctest: +SKIP
        ['1', '0']
        """
        outputs = self.predict(texts, batch_size=batch_size, verbose=0)
        if self.is_regression:
            return [float(v) for v in np.asarray(outputs)[:, 0]]
        ids = np.asarray(outputs).argmax(axis=-1)
        if self.label_names is None:
            return [int(i) for i in ids]
        return [self.label_names[i] for i in ids]

    def _features_from_text(self, x):
        if self.preprocessor is None:
            raise ValueError(
                "This BertClassifier has no `preprocessor`, so it cannot read raw strings: build it with "
                "preprocessor=ClassifierPreprocessor(tokenizer, sequence_length) or pass the "
                "token_ids/segment_ids/padding_mask dict."
            )
        segments = _as_segments(x)
        features = self.preprocessor(segments if len(segments) > 1 else segments[0])
        return {name: np.asarray(value) for name, value in features.items()}

    # === Serialisation ===

    def get_config(self):
        preprocessor = None
        if self.preprocessor is not None and hasattr(self.preprocessor, "get_config"):
            preprocessor = keras.saving.serialize_keras_object(self.preprocessor)
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "num_classes": self.num_classes,
            "dropout": self.dropout,
            "preprocessor": preprocessor,
            "label_names": self.label_names,
            "compile_defaults": self.compile_defaults,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("backbone", "preprocessor"):
            if isinstance(config.get(key), dict):
                config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)


def _is_text(value):
    return isinstance(value, (str, bytes))


def _is_raw_text(x):
    if _is_text(x):
        return True
    if isinstance(x, np.ndarray):
        return x.dtype.kind in ("U", "S", "O")
    if isinstance(x, (list, tuple)) and x:
        first = x[0]
        if _is_text(first):
            return True
        if isinstance(first, (list, tuple, np.ndarray)) and len(first) and _is_text(first[0]):
            return True
    return False


def _as_segments(x):
    """Raw text -> a tuple of one or two lists of strings of equal length.

    A tuple `(texts_a, texts_b)` holds two segment lists; a list holds
    examples, each a string or an `(a, b)` pair.
    """
    if _is_text(x):
        return ([x],)
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if isinstance(x, tuple) and len(x) == 2 and not _is_text(x[0]):
        texts_a, texts_b = list(x[0]), list(x[1])
        if len(texts_a) != len(texts_b):
            raise ValueError(f"The two segment lists differ in length: {len(texts_a)} vs {len(texts_b)}.")
        return (texts_a, texts_b)
    if all(_is_text(item) for item in x):
        return (list(x),)
    if all(isinstance(item, (list, tuple)) and len(item) == 2 and all(map(_is_text, item)) for item in x):
        return ([item[0] for item in x], [item[1] for item in x])
    raise ValueError(
        "Raw text for a BertClassifier must be a string, a list of strings, a tuple (texts_a, texts_b) "
        "of two lists, or a list of (text_a, text_b) pairs."
    )
