"""Classification scores as Keras metrics from class-id labels and logits, exact over the batches `fit` and
`evaluate` see: GLUE's (F1, Matthews, Pearson), precision, recall and ROC AUC.

GLUE scores MRPC and QQP by F1 of class 1, CoLA by the Matthews correlation, STS-B by the Pearson (and Spearman)
correlation; Keras has none of them for class-id labels and logits (its `F1Score`, `Precision`, `Recall` and `AUC`
read one-hot labels and probabilities). These keep their counts in variables (a confusion matrix; weighted moments),
so the value after any number of batches is the score of all the examples seen, as `sklearn.metrics` and
`scipy.stats` compute it on the whole set (`tests/test_glue_scores.py`); `ClassAUC` is Keras's `AUC` (200
thresholds) on the probability of class 1. `BertClassifier.compile(metrics=["f1"])` (or `"matthews_correlation"`,
`"precision"`, `"recall"`, `"auc"`, `"pearson_correlation"` for a regression) names them.
"""

import keras
from keras import ops


class _ConfusionCounts(keras.metrics.Metric):
    """The weighted counts of (true class, predicted class) pairs; the prediction is the argmax of logits or
    probabilities, the labels class ids."""

    def __init__(self, num_classes, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"`num_classes` must be an int >= 2, got {num_classes!r}.")
        self.num_classes = num_classes
        self.counts = self.add_variable(shape=(num_classes, num_classes), initializer="zeros", dtype="float32",
                                        name="counts")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.reshape(ops.cast(y_true, "int32"), (-1,))
        predicted = ops.argmax(ops.reshape(y_pred, (-1, self.num_classes)), axis=-1)
        true_hot = ops.one_hot(y_true, self.num_classes, dtype="float32")
        if sample_weight is not None:
            true_hot = true_hot * ops.reshape(ops.cast(sample_weight, "float32"), (-1, 1))
        self.counts.assign_add(ops.matmul(ops.transpose(true_hot),
                                          ops.one_hot(predicted, self.num_classes, dtype="float32")))

    def reset_state(self):
        self.counts.assign(ops.zeros((self.num_classes, self.num_classes), "float32"))

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes}


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ClassF1Score(_ConfusionCounts):
    """F1 from class-id labels and logits: of class 1 with two classes (GLUE's MRPC and QQP score, `sklearn`'s
    `f1_score` default), else the mean over the classes that occur in the labels or predictions (`average="macro"`).

    Example:
    >>> import numpy as np
    >>> metric = ClassF1Score(num_classes=2)
    >>> metric.update_state(np.array([1, 1, 0, 0]), np.array([[0., 1.], [1., 0.], [0., 1.], [1., 0.]]))
    >>> round(float(metric.result()), 4)  # one of two positives found, one false positive: 2 / (2 + 1 + 1)
    0.5
    """

    def __init__(self, num_classes, name="f1", dtype=None):
        super().__init__(num_classes, name=name, dtype=dtype)

    def result(self):
        counts = ops.convert_to_tensor(self.counts)
        true_positives = ops.diagonal(counts)
        wrong = ops.sum(counts, axis=0) + ops.sum(counts, axis=1) - 2 * true_positives  # FP + FN
        denominator = 2 * true_positives + wrong
        per_class = ops.where(denominator > 0, 2 * true_positives / ops.maximum(denominator, 1e-12), 0.0)
        if self.num_classes == 2:
            return per_class[1]
        present = ops.cast(denominator > 0, "float32")
        return ops.sum(per_class * present) / ops.maximum(ops.sum(present), 1.0)


def _per_class_ratio(counts, axis):
    """Each class's true positives over its column (axis 0: predicted, precision) or row (axis 1: true, recall)
    total; returns the ratios and which classes occur in the labels or predictions."""
    true_positives = ops.diagonal(counts)
    totals = ops.sum(counts, axis=axis)
    ratio = ops.where(totals > 0, true_positives / ops.maximum(totals, 1e-12), 0.0)
    present = ops.cast(ops.sum(counts, axis=0) + ops.sum(counts, axis=1) > 0, "float32")
    return ratio, present


class _ClassRatio(_ConfusionCounts):
    axis = None

    def result(self):
        ratio, present = _per_class_ratio(ops.convert_to_tensor(self.counts), self.axis)
        if self.num_classes == 2:
            return ratio[1]
        return ops.sum(ratio * present) / ops.maximum(ops.sum(present), 1.0)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ClassPrecision(_ClassRatio):
    """Precision from class-id labels and logits: of class 1 with two classes (`sklearn.metrics.precision_score`'s
    default), else the mean over the classes that occur in the labels or predictions (`average="macro"`); 0 where
    nothing was predicted of a class.

    Example:
    >>> import numpy as np
    >>> metric = ClassPrecision(num_classes=2)
    >>> metric.update_state(np.array([1, 1, 0, 0]), np.array([[0., 1.], [1., 0.], [0., 1.], [1., 0.]]))
    >>> float(metric.result())  # two predicted positives, one right
    0.5
    """

    axis = 0

    def __init__(self, num_classes, name="precision", dtype=None):
        super().__init__(num_classes, name=name, dtype=dtype)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ClassRecall(_ClassRatio):
    """Recall from class-id labels and logits: of class 1 with two classes, else the macro mean over the classes that
    occur (as `sklearn.metrics.recall_score`).

    Example:
    >>> import numpy as np
    >>> metric = ClassRecall(num_classes=2)
    >>> metric.update_state(np.array([1, 1, 1, 0]), np.array([[0., 1.], [1., 0.], [0., 1.], [1., 0.]]))
    >>> round(float(metric.result()), 4)  # two of three positives found
    0.6667
    """

    axis = 1

    def __init__(self, num_classes, name="recall", dtype=None):
        super().__init__(num_classes, name=name, dtype=dtype)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ClassAUC(keras.metrics.AUC):
    """ROC AUC from class-id labels and logits (or probabilities: `from_logits=False`): Keras's `AUC` on the softmax
    probability of class 1 with two classes, else the mean of each class's one-vs-rest AUC (as
    `sklearn.metrics.roc_auc_score(..., multi_class="ovr")`); Keras interpolates over `num_thresholds` thresholds,
    which agrees with scikit-learn's exact value to about 1e-3.

    Example:
    >>> import numpy as np
    >>> metric = ClassAUC(num_classes=2)
    >>> metric.update_state(np.array([0, 0, 1, 1]), np.array([[2., 0.], [0., 1.], [0., 0.5], [0., 3.]]))
    >>> round(float(metric.result()), 2)  # one of the four (negative, positive) pairs ranked the wrong way
    0.75
    """

    def __init__(self, num_classes, from_logits=True, num_thresholds=200, name="auc", dtype=None):
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"`num_classes` must be an int >= 2, got {num_classes!r}.")
        several = num_classes > 2
        super().__init__(num_thresholds=num_thresholds, multi_label=several,
                         num_labels=num_classes if several else None, name=name, dtype=dtype)
        self.num_classes = num_classes
        self.reads_logits = from_logits

    def update_state(self, y_true, y_pred, sample_weight=None):
        scores = ops.reshape(ops.cast(y_pred, "float32"), (-1, self.num_classes))
        probabilities = ops.softmax(scores, axis=-1) if self.reads_logits else scores
        classes = ops.reshape(ops.cast(y_true, "int32"), (-1,))
        if sample_weight is not None:
            sample_weight = ops.reshape(ops.cast(sample_weight, "float32"), (-1, 1))
        if self.num_classes == 2:
            super().update_state(ops.reshape(ops.cast(classes, "float32"), (-1, 1)), probabilities[:, 1:],
                                 sample_weight=sample_weight)
        else:
            super().update_state(ops.one_hot(classes, self.num_classes, dtype="float32"), probabilities,
                                 sample_weight=sample_weight)

    def get_config(self):
        return {"num_classes": self.num_classes, "from_logits": self.reads_logits,
                "num_thresholds": self.num_thresholds, "name": self.name, "dtype": self.dtype}


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class MatthewsCorrelation(_ConfusionCounts):
    """The Matthews correlation coefficient from class-id labels and logits (GLUE's CoLA score; with more than two
    classes Gorodkin's R_K, as `sklearn.metrics.matthews_corrcoef`); 0 where it is undefined.

    Example:
    >>> import numpy as np
    >>> metric = MatthewsCorrelation(num_classes=2)
    >>> metric.update_state(np.array([1, 0, 1, 0]), np.array([[0., 1.], [1., 0.], [0., 1.], [0., 1.]]))
    >>> round(float(metric.result()), 4)
    0.5774
    """

    def __init__(self, num_classes, name="matthews_correlation", dtype=None):
        super().__init__(num_classes, name=name, dtype=dtype)

    def result(self):
        counts = ops.convert_to_tensor(self.counts)
        total = ops.sum(counts)
        correct = ops.trace(counts)
        true_per_class = ops.sum(counts, axis=1)
        predicted_per_class = ops.sum(counts, axis=0)
        covariance = correct * total - ops.sum(true_per_class * predicted_per_class)
        spread = (total**2 - ops.sum(predicted_per_class**2)) * (total**2 - ops.sum(true_per_class**2))
        return ops.where(spread > 0, covariance / ops.sqrt(ops.maximum(spread, 1e-12)), 0.0)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class PearsonCorrelation(keras.metrics.Metric):
    """The Pearson correlation of a regression's predictions with its scores (GLUE's STS-B score), weighted.

    The weighted means and co-moments are merged batch by batch (Chan et al.'s pairwise update), which keeps float32
    exact to about 1e-6 where raw sums of squares would cancel.

    Example:
    >>> import numpy as np
    >>> metric = PearsonCorrelation()
    >>> metric.update_state(np.array([1.0, 2.0, 3.0]), np.array([[1.0], [2.5], [2.9]]))
    >>> round(float(metric.result()), 4)
    0.9484
    """

    def __init__(self, name="pearson_correlation", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.moments = self.add_variable(shape=(6,), initializer="zeros", dtype="float32", name="moments")

    def update_state(self, y_true, y_pred, sample_weight=None):
        x = ops.reshape(ops.cast(y_pred, "float32"), (-1,))
        y = ops.reshape(ops.cast(y_true, "float32"), (-1,))
        weight = ops.ones_like(x) if sample_weight is None else ops.reshape(ops.cast(sample_weight, "float32"), (-1,))
        count = ops.sum(weight)
        safe = ops.maximum(count, 1e-12)
        mean_x, mean_y = ops.sum(weight * x) / safe, ops.sum(weight * y) / safe
        dx, dy = x - mean_x, y - mean_y
        batch = ops.stack([count, mean_x, mean_y, ops.sum(weight * dx * dx), ops.sum(weight * dy * dy),
                           ops.sum(weight * dx * dy)])
        self.moments.assign(_merge_moments(ops.convert_to_tensor(self.moments), batch))

    def result(self):
        _, _, _, xx, yy, xy = ops.unstack(ops.convert_to_tensor(self.moments))
        spread = xx * yy
        return ops.where(spread > 0, xy / ops.sqrt(ops.maximum(spread, 1e-30)), 0.0)

    def reset_state(self):
        self.moments.assign(ops.zeros((6,), "float32"))


def _merge_moments(a, b):
    """(count, mean x, mean y, co-moments xx, yy, xy) of two weighted sets -> those of their union."""
    n_a, mx_a, my_a, xx_a, yy_a, xy_a = ops.unstack(a)
    n_b, mx_b, my_b, xx_b, yy_b, xy_b = ops.unstack(b)
    n = n_a + n_b
    share = ops.where(n > 0, n_b / ops.maximum(n, 1e-12), 0.0)
    dx, dy = mx_b - mx_a, my_b - my_a
    cross = n_a * share  # n_a * n_b / n
    return ops.stack([n, mx_a + dx * share, my_a + dy * share, xx_a + xx_b + dx * dx * cross,
                      yy_a + yy_b + dy * dy * cross, xy_a + xy_b + dx * dy * cross])
