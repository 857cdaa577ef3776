"""BertClassifier: sentence (pair) classification (one class, or any number: multi-label) and regression on BERT's
pooled output (GLUE), or on the mean token vector."""

import keras
import numpy as np

from keras_bert_impl.layers.sequence_pooling import SequencePooling
from keras_bert_impl.models import classifier_compile, classifier_labels
from keras_bert_impl.models.backbone import bert_kernel_initializer
from keras_bert_impl.models.head_building import (
    backbone_inputs,
    check_dropout,
    check_packable,
    class_count,
    freeze_unused_pooler,
    use_pooler,
)
from keras_bert_impl.models.multi_label_f1 import MultiLabelF1Score
from keras_bert_impl.models.probabilities import softmax
from keras_bert_impl.models.task import LABEL_ATTRIBUTES, Task
from keras_bert_impl.models.user_inputs import is_dataset

POOLINGS = ("pooled", "mean")


# keras-hub's `activation` of a text classifier: logits (None or "linear") or probabilities ("softmax"; "sigmoid"
# for a multi-label classifier, one independent probability per class).
ACTIVATIONS = (None, "linear", "softmax", "sigmoid")



class _TopClass:
    """`predict_labels`'s `top_k` when not given: the likeliest class alone (`None` is the pipeline's every class)."""

    def __repr__(self):
        return "<the likeliest class>"


TOP_CLASS = _TopClass()

@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertClassifier(Task):
    """Classification or regression head on a `BertBackbone`: pooled [CLS] output -> dropout -> dense.

    As in the BERT paper (section 4.1): the pooler's tanh output of the
    [CLS] position, dropout, and one dense layer. `num_classes >= 2` gives
    logits `(batch, num_classes)` trained with sparse categorical
    cross-entropy; `num_classes=1` is regression (STS-B): output
    `(batch, 1)` trained with mean squared error. `multi_label=True` gives
    each example any number of the classes (none, one or several: topics,
    tags, toxicity kinds): one independent logit per class, trained with
    binary cross-entropy, as `transformers`'
    `problem_type="multi_label_classification"`.

    Inputs are the backbone's dict `{"token_ids", "segment_ids",
    "padding_mask"}`. Backend-agnostic: this file imports no TensorFlow.

    `BertClassifier.from_preset(preset, num_classes=2)` loads a pretrained
    backbone and its `BertClassifierPreprocessor`; `fit`, `evaluate` and
    `predict` then also take raw strings: a string, a list of strings (one
    segment), or a tuple of two lists / a list of pairs (two segments), with
    labels as `y`: class ids, or names from `label_names` (`label_ids`
    checks them); multi-label: per example a list (or set) of names or ids,
    or a multi-hot row. `predict_labels` returns label names (from
    `label_names`) or scores.

    Args:
        backbone: a `BertBackbone`.
        num_classes: int >= 1; 1 means regression.
        dropout: float, dropout on the pooled output.
        pooling: what the head reads. `"pooled"` (default): BERT's pooler
            output, tanh(dense([CLS])), as in the paper. `"mean"`: the mean
            of the real tokens' final vectors (sentence-transformers' mean
            pooling; the pooler is then frozen, as it gets no gradient). Mean
            pooling suits checkpoints trained through mean pooling (e.g.
            all-MiniLM-L6-v2, whose pooler was left as it was) and short pretraining runs, whose [CLS]
            attends to one or two tokens (docs/pretraining.md).
        preprocessor: a `BertClassifierPreprocessor` (raw strings in `fit`,
            `evaluate`, `predict`), saved with the model; or None.
        label_names: optional list of `num_classes` strings: `predict_labels` returns them, and `fit` /
            `evaluate` take them as labels.
        compile_defaults: compile now with the default loss/metrics (AdamW
            5e-5); `compile` again to change them. An uncompiled classifier
            compiles with the defaults on its first `fit`/`evaluate`.
        activation: None (default: `predict` gives logits) or `"softmax"`
            (`predict` gives class probabilities; the default loss then takes
            probabilities), as keras-hub's `activation`; `"sigmoid"` for a
            multi-label classifier.
        multi_label: False (default: one class per example) or True (any
            number of classes per example; `predict_labels` gives every class
            whose probability passes `threshold`).

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
    >>> tuple(BertClassifier(backbone, num_classes=3, pooling="mean").predict(inputs, verbose=0).shape)
    (2, 3)
    >>> probabilities = BertClassifier(backbone, num_classes=3, activation="softmax").predict(inputs, verbose=0)
    >>> bool(np.allclose(probabilities.sum(axis=-1), 1.0, atol=1e-5))
    True
    >>> multi_label = BertClassifier(backbone, num_classes=3, multi_label=True)
    >>> multi_label.label_ids([[0, 2], [], {1}]).tolist()
    [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]

    From a preset, on raw strings:
    >>> classifier = BertClassifier.from_preset("all_minilm_l6_v2_en", num_classes=2,
    ...                                         label_names=["negative", "positive"])
    >>> history = classifier.fit(["a fine, moving film", "dull and far too long"], [1, 0],
    ...                          batch_size=2, verbose=0)
    >>> len(classifier.predict_labels(["I loved it"]))
    1
    """

    hugging_face_attributes = {**Task.hugging_face_attributes, **LABEL_ATTRIBUTES}

    def __init__(
        self,
        backbone,
        num_classes=None,
        dropout=0.1,
        preprocessor=None,
        label_names=None,
        compile_defaults=True,
        pooling="pooled",
        activation=None,
        multi_label=False,
        **kwargs,
    ):
        self.check_arguments(kwargs)
        num_classes, label_names = class_count(num_classes, label_names, " (1 for regression; or give `label_names`)")
        dropout = check_dropout(dropout)
        if pooling not in POOLINGS:
            raise ValueError(f"`pooling` must be one of {POOLINGS}, got {pooling!r}.")
        if activation not in ACTIVATIONS:
            raise ValueError(f"`activation` must be one of {ACTIVATIONS} (keras-hub's: None gives logits, 'softmax' "
                             f"probabilities; 'sigmoid' those of a multi_label classifier), got {activation!r}.")
        if activation == "linear":
            activation = None
        if not isinstance(multi_label, bool):
            raise ValueError(f"`multi_label` must be True or False, got {multi_label!r}.")
        if multi_label and num_classes < 2:
            raise ValueError(f"multi_label=True needs num_classes >= 2 (one yes/no per class), got {num_classes}; "
                             "num_classes=1 is a regression (one score).")
        if activation == "softmax" and num_classes == 1:
            raise ValueError("activation='softmax' needs classes; num_classes=1 is a regression (one score).")
        if activation == "softmax" and multi_label:
            raise ValueError("activation='softmax' makes the classes compete, but a multi_label classifier scores "
                             "each class on its own: use activation='sigmoid' (probabilities) or None (logits).")
        if activation == "sigmoid" and not multi_label:
            raise ValueError("activation='sigmoid' scores each class on its own: build the classifier with "
                             "multi_label=True, or use activation='softmax' for one class per example.")
        if label_names is not None:
            if len(label_names) != num_classes or num_classes == 1:
                raise ValueError(
                    f"`label_names` must list {num_classes} names for a {num_classes}-class classifier "
                    f"(none for regression), got {label_names!r}."
                )

        # === Layers ===
        self.sequence_pooling = None
        if pooling == "pooled":
            use_pooler(backbone)  # (frozen by a head that did not read it, e.g. an MLM-only pretrainer's)
        if pooling == "mean":
            freeze_unused_pooler(backbone)
            self.sequence_pooling = SequencePooling("mean", normalize=False, dtype=backbone.dtype_policy,
                                                    name="mean_pooling")
        self.output_dropout = keras.layers.Dropout(dropout, dtype=backbone.dtype_policy, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=bert_kernel_initializer(),
            dtype=backbone.dtype_policy,
            name="logits",
        )

        # === Functional Model ===
        inputs = backbone_inputs()
        backbone_outputs = backbone(inputs)
        if self.sequence_pooling is None:
            x = backbone_outputs["pooled_output"]
        else:
            x = self.sequence_pooling(backbone_outputs["sequence_output"], padding_mask=inputs["padding_mask"])
        x = self.output_dropout(x)
        outputs = self.output_dense(x)
        # float32 outputs keep the loss stable under mixed precision.
        outputs = keras.layers.Activation(activation or "linear", dtype="float32", name="float32_logits")(outputs)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout
        self.label_names = label_names
        self.pooling = pooling
        self.activation = activation
        self.multi_label = multi_label
        super().__init__(
            inputs=inputs,
            outputs=outputs,
            backbone=backbone,
            preprocessor=preprocessor,
            compile_defaults=compile_defaults,
            **kwargs,
        )

    @property
    def is_regression(self):
        return self.num_classes == 1

    hugging_face_architectures = ("BertForSequenceClassification",)
    raw_text_columns = (("text",), ("text_a", "text_b"))
    serving_text_inputs = {"serve": ("text",), "serve_pairs": ("text_a", "text_b")}
    hugging_face_head_prefix = "classifier"
    default_loss_averages_sample_weights = True  # (`classifier_compile.default_loss`)

    def hugging_face_head_dense(self):
        return self.output_dense

    @classmethod
    def head_arguments_from_checkpoint(cls, head, kwargs):
        if head.get("multi_label") and "multi_label" not in kwargs:
            kwargs = {"multi_label": True, **kwargs}
        # keras-hub's own: its activation ("softmax") and dropout, unless the caller's
        kwargs = {**{key: head[key] for key in ("activation", "dropout") if key in head}, **kwargs}
        classes = 1 if head["regression"] else head["num_classes"]
        if kwargs.get("label_names") is not None:  # the caller's names (the checkpoint's classes if as many)
            return {"num_classes": len(kwargs["label_names"]), **kwargs}
        kwargs = {"num_classes": classes, **kwargs}
        if (kwargs["num_classes"] == classes and "label_names" not in kwargs and not head["regression"]
                and head["labels"] is not None):
            kwargs["label_names"] = head["labels"]  # the checkpoint's names, unless the caller said none
        return kwargs

    def hugging_face_head(self):
        if self.pooling != "pooled":
            raise ValueError(f"pooling={self.pooling!r} has no transformers equivalent (BertForSequenceClassification "
                             "reads the pooler's [CLS] output): save this classifier with save() or save_to_preset().")
        return {**super().hugging_face_head(), "regression": self.is_regression, "multi_label": self.multi_label}

    def takes_checkpoint_head(self, head):
        # transformers' head reads the pooler's output: a mean-pooling head is another head.
        return self.pooling == "pooled" and self.num_classes == (1 if head["regression"] else head["num_classes"])

    def head_config(self):
        return {"num_classes": self.num_classes, "dropout": self.dropout, "label_names": self.label_names,
                "pooling": self.pooling, "activation": self.activation, "multi_label": self.multi_label}

    @classmethod
    def preprocessor_class(cls):
        from keras_bert_impl.text.classifier_preprocessor import BertClassifierPreprocessor

        return BertClassifierPreprocessor

    def serving_outputs(self, outputs):
        """An exported classifier's outputs: `score` (regression); else `logits` (without an activation),
        `probabilities` and, one class per example, `label_id` (the `label` name is added from `label_names`)."""
        if self.is_regression:
            return {"score": outputs[:, 0]}
        named = {} if self.activation else {"logits": outputs}
        if self.multi_label:
            named["probabilities"] = outputs if self.activation == "sigmoid" else keras.ops.sigmoid(outputs)
            return named
        named["probabilities"] = outputs if self.activation == "softmax" else keras.ops.softmax(outputs)
        named["label_id"] = keras.ops.argmax(outputs, axis=-1)
        return named

    # === Loss and metrics (`classifier_compile.py`) ===

    def default_loss(self):
        """`classifier_compile.default_loss`: cross-entropy or, for a regression, mean squared error."""
        return classifier_compile.default_loss(self.num_classes, self.activation, self.multi_label)

    def metric_for_name(self, name):
        """`classifier_compile.metric_for_name`: what `"f1"`, `"precision"`, `"recall"`, `"auc"`,
        `"matthews_correlation"`, `"pearson_correlation"` (and, multi-label, `"accuracy"`, `"micro_f1"`,
        `"macro_f1"`) mean on this classifier's labels and outputs."""
        return classifier_compile.metric_for_name(name, self.num_classes, self.activation, self.multi_label)

    def check_metrics(self, metrics):
        """`classifier_compile.check_metrics`: refuses a metric that cannot read class ids (or scores)."""
        classifier_compile.check_metrics(metrics, self.num_classes, self.activation, self.multi_label)

    def check_loss(self, loss):
        """`classifier_compile.check_loss`: refuses a cross-entropy that reads logits where the classifier gives
        probabilities, or the other way round."""
        classifier_compile.check_loss(loss, self.num_classes, self.activation, self.multi_label)

    def default_weighted_metrics(self):
        return classifier_compile.default_weighted_metrics(self.num_classes, self.activation, self.multi_label)

    def packed_training_model(self):
        """A model that shares this classifier's weights and scores every example of packed rows.

        Packed rows hold several examples each, numbered in `padding_mask`
        (1, 2, ...; see `keras_bert_impl.layers.packed_examples`). This model
        applies the pooler and the output layer at every position and returns
        float32 `(rows, sequence_length, num_classes)`: at each example's first
        token ([CLS]) that example's logits, exactly as the classifier gives
        them for the example alone. Train it on `(inputs, targets, weights)`
        from `batching.packing.first_token_targets` (weight 1 on the first
        tokens; for regression give the targets a last axis of 1,
        `targets[..., None]`, like the output; multi-label: the multi-hot
        rows of `label_ids`): it is compiled with this classifier's loss,
        averaged over the weights, so the loss is the mean over the examples.
        Training it trains
        this classifier; predict and save with the classifier itself.
        Needs `pooling="pooled"`.

        Example:
        >>> import numpy as np
        >>> from keras_bert_impl import BertBackbone
        >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
        ...                         hidden_dim=16, intermediate_dim=32, max_sequence_length=16)
        >>> classifier = BertClassifier(backbone, num_classes=3)
        >>> packed = classifier.packed_training_model()
        >>> row = {"token_ids": np.array([[2, 5, 3, 2, 7, 8, 3, 0]], "int32"),
        ...        "segment_ids": np.zeros((1, 8), "int32"),
        ...        "padding_mask": np.array([[1, 1, 1, 2, 2, 2, 2, 0]], "int32")}
        >>> second = {"token_ids": np.array([[2, 7, 8, 3]], "int32"), "segment_ids": np.zeros((1, 4), "int32"),
        ...           "padding_mask": np.ones((1, 4), "int32")}
        >>> bool(np.allclose(packed.predict(row, verbose=0)[0, 3], classifier.predict(second, verbose=0)[0], atol=1e-5))
        True
        """
        if self.pooling != "pooled":
            raise ValueError(
                f"packed_training_model() needs pooling='pooled' (the [CLS] pooler of each example); this "
                f"classifier has pooling={self.pooling!r}, which averages a whole row: train it on unpacked rows."
            )
        check_packable(self.backbone, "packed_training_model()")
        inputs = backbone_inputs()
        x = self.backbone(inputs)["sequence_output"]
        x = self.backbone.pooled_dense(x)  # the pooler, at every position
        x = self.output_dropout(x)
        x = self.output_dense(x)
        outputs = keras.layers.Activation(self.activation or "linear", dtype="float32", name="float32_token_logits")(x)
        model = keras.Model(inputs, outputs, name=f"{self.name}_packed")
        metrics = self.default_weighted_metrics()
        if self.multi_label:  # F1Score reads (examples, classes) only; these outputs have a position axis too
            metrics = [m for m in metrics if not isinstance(m, MultiLabelF1Score)]
        model.compile(optimizer=keras.optimizers.AdamW(5e-5), loss=self.default_loss(), weighted_metrics=metrics)
        return model

    # === Raw text ===

    def _raw_dataset(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False, seed=None, **options):
        if y is not None:
            y = self.label_ids(y)
        if is_dataset(x) and not (self.is_regression or self.multi_label):  # names -> ids, ids checked, as read
            from keras_bert_impl.text.dataset_labels import class_ids_of_dataset

            x = class_ids_of_dataset(x, self.num_classes, self.label_names)
        return super()._raw_dataset(x, y, sample_weight, batch_size=batch_size, shuffle=shuffle, seed=seed,
                                    **options)

    def _class_weight_as_sample_weight(self, y, class_weight, sample_weight):
        """`{class id or label name: weight}` -> one weight per example (times `sample_weight`); classes not
        named weigh 1, as in Keras."""
        if self.is_regression:
            raise ValueError("`class_weight` needs classes, but this classifier is a regression (num_classes=1).")
        if self.multi_label:
            raise ValueError("`class_weight` weighs the one class of each example, but a multi_label classifier's "
                             "examples have any number: give `sample_weight` (one weight per example) instead.")
        if not isinstance(class_weight, dict):
            raise ValueError(f"`class_weight` must be a dict {{class id or label name: weight}}, got {class_weight!r}.")
        table = np.ones(self.num_classes, "float32")
        for key, weight in class_weight.items():
            try:
                (index,) = self.label_ids([key])
            except ValueError as error:
                raise ValueError(f"class_weight key {key!r}: {str(error).split(': ', 1)[1]}") from None
            table[index] = weight
        weights = table[self.label_ids(y)]
        return weights if sample_weight is None else weights * np.asarray(sample_weight, "float32")

    def _check_feature_labels(self, y, method):
        """Class ids given with features are checked as raw text's labels are (`label_ids`): one line naming the
        first example outside the classes (JAX trained on them silently, with a loss of 0)."""
        if self.is_regression or self.multi_label or not hasattr(y, "__len__"):
            return
        ids = np.asarray(y)
        if ids.dtype.kind in "iu":
            self.label_ids(ids)

    def label_ids(self, labels):
        """Labels as the loss takes them: class ids (names from `label_names` become their index; ids are checked
        against `num_classes`), float32 scores (regression), or multi-hot float32 rows (multi-label).

        A multi-label example's labels are a list, tuple or set of names or ids
        (empty: none of the classes), or a multi-hot row of `num_classes`
        numbers in [0, 1]; a row of `num_classes` ints that are all 0 or 1 is
        read as multi-hot, so give ids as a set (`{0, 1}`) to list them. A
        label that is not a class of this classifier raises one line naming
        the example.

        Example:
        >>> classifier.label_ids(["positive", "negative", 1]).tolist()  # doctest: +SKIP
        [1, 0, 1]
        """
        return classifier_labels.label_ids(labels, self.num_classes, self.label_names, self.multi_label)

    # === Pipelines ===

    def predict_labels(self, texts, batch_size=32, return_scores=False, threshold=None, top_k=TOP_CLASS,
                       return_all_scores=False):
        """Predicted label names (or class ids without `label_names`), or float scores for regression.

        Args:
            texts: raw strings in one of the forms `predict` accepts.
            batch_size: int.
            return_scores: give `{"label": ..., "score": probability}` per
                text instead (the softmax probability of the predicted class,
                as Hugging Face's text-classification pipeline gives it).
                Multi-label: per text, every class with its sigmoid
                probability, likeliest first (the pipeline with `top_k=None`).
            threshold: multi-label only: a class is predicted when its
                probability is above it (default 0.5).
            top_k: per text, the `top_k` likeliest classes as
                `{"label", "score"}` dicts, likeliest first (Hugging Face's
                text-classification pipeline's `top_k`; scores are softmax
                probabilities, sigmoid ones for multi-label); `None`: every
                class, as the pipeline's `top_k=None`. Not given: the
                likeliest class alone, in the forms above.
            return_all_scores: Hugging Face's older name for `top_k=None`.

        Returns:
            One label (or score) per text; multi-label: one list of labels
            per text (likeliest first, empty when no class passes). For one
            text (a string, or a pair of two) its result alone, as
            `predict_entities`, `answer` and `encode` give theirs.

        Example:
        >>> classifier.predict_labels(["a great film", "dull"])  # doctest: +SKIP
        ['positive', 'negative']
        >>> classifier.predict_labels(["a great film"], return_scores=True)  # doctest: +SKIP
        [{'label': 'positive', 'score': 0.97}]
        >>> classifier.predict_labels(["a great film"], top_k=2)  # doctest: +SKIP
        [[{'label': 'positive', 'score': 0.97}, {'label': 'negative', 'score': 0.03}]]
        >>> classifier.predict_labels("a great film", top_k=2)  # one text: its result  # doctest: +SKIP
        [{'label': 'positive', 'score': 0.97}, {'label': 'negative', 'score': 0.03}]
        >>> entity_types.predict_labels(["EU rejects German call to boycott British lamb ."])  # doctest: +SKIP
        [['ORG', 'MISC']]
        """
        if return_scores and self.is_regression:
            raise ValueError("return_scores gives class probabilities; this classifier is a regression (num_classes=1).")
        if threshold is not None and not self.multi_label:
            raise ValueError("`threshold` picks the classes of a multi_label classifier; this one predicts one class "
                             "per example (the likeliest).")
        if return_all_scores:
            if top_k is not TOP_CLASS:
                raise ValueError("`return_all_scores=True` is Hugging Face's older `top_k=None`: pass one of the two.")
            top_k = None
        if top_k is TOP_CLASS:
            top_k = None
        elif not (top_k is None and self.is_regression):  # a regression's `top_k=None`: its scores, as the pipeline
            top_k = self.num_classes if top_k is None else top_k  # None: every class, likeliest first
            if self.is_regression:
                raise ValueError("`top_k` ranks classes; this classifier is a regression (num_classes=1).")
            if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= self.num_classes:
                raise ValueError(f"`top_k` must be an int from 1 to num_classes={self.num_classes}, got {top_k!r}.")
            if return_scores or threshold is not None:
                raise ValueError("`top_k` gives each text's likeliest classes with their scores: pass it without "
                                 "`return_scores` or `threshold`.")
        threshold = 0.5 if threshold is None else threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ValueError(f"`threshold` must be a probability in [0, 1], got {threshold!r}.")
        outputs = np.asarray(self.predict(texts, batch_size=batch_size, verbose=0), "float64")
        results = self._labels_of(outputs, return_scores, threshold, top_k)
        return results[0] if _one_example(texts) else results

    def _labels_of(self, outputs, return_scores, threshold, top_k):
        """`predict_labels`' results, one per row of the model's `outputs`."""
        if self.is_regression:
            return [float(v) for v in outputs[:, 0]]
        names = list(range(self.num_classes)) if self.label_names is None else self.label_names
        if self.multi_label:
            probabilities = outputs if self.activation == "sigmoid" else 1.0 / (1.0 + np.exp(-outputs))
        else:
            probabilities = outputs if self.activation == "softmax" else softmax(outputs)
        order = np.argsort(-probabilities, axis=-1, kind="stable")  # likeliest first
        if top_k is not None or (self.multi_label and return_scores):
            return [[{"label": names[i], "score": float(row[i])} for i in ranks[:top_k]]
                    for row, ranks in zip(probabilities, order)]
        if self.multi_label:
            return [[names[i] for i in ranks if row[i] > threshold] for row, ranks in zip(probabilities, order)]
        ids = outputs.argmax(axis=-1)
        labels = [names[i] for i in ids]
        if not return_scores:
            return labels
        return [{"label": label, "score": float(probabilities[row, i])} for row, (label, i) in enumerate(zip(labels, ids))]


def _one_example(texts):
    """Whether `texts` is one example: a string, a 0-d array or tensor of one, or a pair of two strings."""
    if isinstance(texts, (str, bytes)) or getattr(texts, "ndim", None) == 0:
        return True
    return isinstance(texts, tuple) and len(texts) == 2 and all(isinstance(t, (str, bytes)) for t in texts)
