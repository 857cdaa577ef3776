"""What a `BertClassifier` compiles with: its default loss and metrics, the metrics its names mean (`"f1"`,
`"auc"`, ...), and the losses and metrics it refuses in one line (ones that cannot read its labels or outputs).

Each function takes what the classifier's hook passes: `num_classes` (1: regression), `activation` (None: the
classifier gives logits) and `multi_label`."""

import keras

from keras_bert_impl.models.glue_scores import (
    ClassAUC,
    ClassF1Score,
    ClassPrecision,
    ClassRecall,
    MatthewsCorrelation,
    PearsonCorrelation,
)
from keras_bert_impl.models.multi_label_f1 import MultiLabelF1Score

# The cross-entropies `compile` takes by name, which read probabilities (from_logits=False).
CROSS_ENTROPY_NAMES = {"sparse_categorical_crossentropy": "SparseCategoricalCrossentropy",
                       "categorical_crossentropy": "CategoricalCrossentropy",
                       "binary_crossentropy": "BinaryCrossentropy"}
# What a regression refuses in `compile(metrics=...)`: the names and metrics of classes (`check_metrics`).
CLASS_METRIC_NAMES = ("accuracy", "acc", "sparse_categorical_accuracy", "f1", "f1_score", "precision", "recall",
                      "auc", "matthews_correlation", "mcc")
CLASS_METRICS = (ClassF1Score, MatthewsCorrelation, ClassPrecision, ClassRecall, ClassAUC)
# Keras's metric names that read one-hot labels, and the name that scores the same from class ids.
ONE_HOT_METRIC_NAMES = {"categorical_accuracy": "accuracy", "binary_accuracy": "accuracy",
                        "top_k_categorical_accuracy": "sparse_top_k_categorical_accuracy"}
# Keras's metric classes that read one-hot labels (or one probability per label), and the name to give instead.
ONE_HOT_METRICS = ((keras.metrics.FBetaScore, "f1"), (keras.metrics.AUC, "auc"),
                   (keras.metrics.Precision, "precision"), (keras.metrics.Recall, "recall"),
                   (keras.metrics.CategoricalAccuracy, "accuracy"), (keras.metrics.BinaryAccuracy, "accuracy"),
                   (keras.metrics.TopKCategoricalAccuracy, "sparse_top_k_categorical_accuracy"))


def default_loss(num_classes, activation, multi_label):
    """Cross-entropy from logits (classification; binary, per class, for multi-label) or mean squared error
    (regression), over the weighted rows.

    Both average over the sum of the sample weights
    (`reduction="mean_with_sample_weight"`), so weight-0 filler rows of a
    fixed-size batch do not dilute the mean; without weights this is the
    usual batch mean.

    Example:
    >>> type(default_loss(3, None, multi_label=False)).__name__
    'SparseCategoricalCrossentropy'
    """
    if num_classes == 1:
        return keras.losses.MeanSquaredError(reduction="mean_with_sample_weight")
    if multi_label:  # the mean over the classes, then over the weighted rows (transformers' BCEWithLogits)
        return keras.losses.BinaryCrossentropy(from_logits=activation is None,
                                               reduction="mean_with_sample_weight")
    return keras.losses.SparseCategoricalCrossentropy(
        from_logits=activation is None, reduction="mean_with_sample_weight"
    )


def default_weighted_metrics(num_classes, activation, multi_label):
    """Accuracy (per class at probability 0.5, and micro F1, for multi-label) or, for a regression, Pearson's r;
    weighted, so that weight-0 filler rows are not counted."""
    if num_classes == 1:  # STS-B's score
        return [PearsonCorrelation()]
    if multi_label:  # a class is predicted when its probability passes 0.5 (its logit, 0)
        logits = activation is None
        return [keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0 if logits else 0.5),
                MultiLabelF1Score(from_logits=logits, name="micro_f1")]
    return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]


def metric_for_name(name, num_classes, activation, multi_label):
    """Scores by name, from class-id labels and this classifier's outputs, exact over all the examples seen
    (`glue_scores.py`): `"f1"` (or `"f1_score"`; of class 1 with two classes, as GLUE's MRPC and QQP; macro
    otherwise), `"precision"`, `"recall"` (the same way), `"auc"` (ROC AUC of class 1; one-vs-rest macro
    otherwise), `"matthews_correlation"` (CoLA), and for a regression `"pearson_correlation"` (STS-B).

    A multi-label classifier's `"accuracy"` (or `"acc"`, `"binary_accuracy"`) is the per-class accuracy at
    probability 0.5 (logit 0); Keras's would read the classes as one choice, or threshold the logits at 0.5.
    Its `"f1"` (or `"micro_f1"`) is `MultiLabelF1Score` over every (example, class) decision, `"macro_f1"` the
    mean of the classes' F1; `"precision"`, `"recall"` and `"auc"` are Keras's over every decision, reading
    logits as such."""
    logits = activation is None
    if multi_label:
        if name in ("accuracy", "acc", "binary_accuracy"):
            return keras.metrics.BinaryAccuracy(name=name, threshold=0.0 if logits else 0.5)
        if name in ("f1", "f1_score", "micro_f1", "macro_f1"):
            return MultiLabelF1Score(from_logits=logits, name=name,
                                     average="macro" if name == "macro_f1" else "micro")
        if name in ("precision", "recall"):
            kind = keras.metrics.Precision if name == "precision" else keras.metrics.Recall
            return kind(thresholds=0.0 if logits else 0.5, name=name)
        if name == "auc":
            return keras.metrics.AUC(from_logits=logits, name=name)
        return None
    if num_classes == 1:
        return PearsonCorrelation(name=name) if name in ("pearson_correlation", "pearson") else None
    if name in ("f1", "f1_score"):
        return ClassF1Score(num_classes, name=name)
    if name in ("matthews_correlation", "mcc"):
        return MatthewsCorrelation(num_classes, name=name)
    if name == "precision":
        return ClassPrecision(num_classes, name=name)
    if name == "recall":
        return ClassRecall(num_classes, name=name)
    if name == "auc":
        return ClassAUC(num_classes, from_logits=logits, name=name)
    return None


def check_metrics(metrics, num_classes, activation, multi_label):
    """A metric must read class ids and one score per class (or, for a regression, a number): Keras's `AUC`,
    `Precision`, `Recall`, `F1Score` and the categorical ones read one-hot labels (on class ids they stop deep in
    Keras, or score nonsense), Pearson scores numbers, F1 classes; each is refused in one line naming the
    metric to give instead. (A multi-label classifier takes Keras's own.)"""
    if multi_label or not isinstance(metrics, (list, tuple)):
        return
    for metric in metrics:
        name = metric if isinstance(metric, str) else type(metric).__name__
        if num_classes == 1:
            if name in CLASS_METRIC_NAMES or isinstance(
                    metric, CLASS_METRICS + tuple(kind for kind, _ in ONE_HOT_METRICS)):
                raise ValueError(
                    f"metrics: {name} scores classes, and this BertClassifier is a regression (num_classes=1): "
                    "use 'pearson_correlation', 'mean_squared_error' or 'mean_absolute_error'."
                )
            continue
        if name in ("pearson_correlation", "pearson") or isinstance(metric, PearsonCorrelation):
            raise ValueError(
                f"metrics: {name} scores a regression (num_classes=1), and this is a {num_classes}-class "
                "classifier: use 'accuracy', 'f1', 'precision', 'recall', 'auc' or 'matthews_correlation'."
            )
        one_hot = ONE_HOT_METRIC_NAMES.get(metric) if isinstance(metric, str) else next(
            (instead for kind, instead in ONE_HOT_METRICS if isinstance(metric, kind)
             and not isinstance(metric, ClassAUC)), None)
        if one_hot is not None:
            outputs = "logits" if activation is None else "probabilities"
            raise ValueError(
                f"metrics: Keras's {name} reads one-hot labels, and this {num_classes}-class BertClassifier "
                f"takes class ids and gives {outputs}: give metrics=[{one_hot!r}], which reads class ids."
            )


def check_loss(loss, num_classes, activation, multi_label):
    """A cross-entropy must read what the classifier gives: logits (`activation=None`) or probabilities. (The
    other reading trains on nonsense without a word: Keras clips logits as if they were probabilities.)"""
    if isinstance(loss, str):
        name = CROSS_ENTROPY_NAMES.get(loss)
        reads_logits = False
    else:
        name = type(loss).__name__
        reads_logits = getattr(loss, "from_logits", None) if isinstance(loss, keras.losses.Loss) else None
    gives_logits = activation is None
    if num_classes == 1 or name is None or reads_logits is None or reads_logits == gives_logits:
        return
    if gives_logits:
        probabilities = "sigmoid" if multi_label else "softmax"
        raise ValueError(
            f"This BertClassifier gives logits (activation=None), and the loss {name} reads probabilities "
            f"(from_logits=False): use keras.losses.{name}(from_logits=True), or build the classifier with "
            f"activation={probabilities!r}."
        )
    raise ValueError(
        f"This BertClassifier gives probabilities (activation={activation!r}), and the loss {name} reads "
        f"logits (from_logits=True): use keras.losses.{name}(from_logits=False), or build the classifier with "
        "activation=None."
    )
