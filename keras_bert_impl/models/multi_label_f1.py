"""MultiLabelF1Score: a multi-label classifier's F1 over every (example, class) decision, as a Keras metric that
reads logits or probabilities."""

import keras


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class MultiLabelF1Score(keras.metrics.F1Score):
    """F1 over every (example, class) decision of a multi-label classifier: a class is predicted when its probability
    is above `threshold` (`average="micro"`; `"macro"` averages the classes' F1), from logits or probabilities.

    Keras's `F1Score` reads probabilities only; this one also reads the logits that `BertClassifier` outputs by default.

    Example:
    >>> import numpy as np
    >>> metric = MultiLabelF1Score()
    >>> metric.update_state(np.array([[1.0, 0.0, 1.0]]), np.array([[2.0, -1.0, -0.5]]))
    >>> round(float(metric.result()), 4)  # one of two true classes found, no false one: 2 * 0.5 / 1.5
    0.6667
    """

    def __init__(self, from_logits=True, threshold=0.5, average="micro", name="micro_f1", dtype=None):
        super().__init__(average=average, threshold=threshold, name=name, dtype=dtype)
        self.from_logits = from_logits

    def update_state(self, y_true, y_pred, sample_weight=None):
        if self.from_logits:
            y_pred = keras.ops.sigmoid(keras.ops.cast(y_pred, "float32"))
        # Length-bucketed batches leave the label rows' width unknown to a traced step; it is the classes'.
        y_true = keras.ops.reshape(y_true, (-1, y_pred.shape[-1]))
        super().update_state(y_true, y_pred, sample_weight)

    def get_config(self):
        return {**super().get_config(), "from_logits": self.from_logits}
