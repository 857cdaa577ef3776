"""The `loss` that `fit` and `evaluate` report for a task compiled with its default loss.

Keras weighs each batch's loss by the batch's number of rows when it averages
over the batches. A task's default loss is already a mean over what the batch
holds for real (the rows of weight > 0, the labelled windows, the labelled
tokens), and the batches that raw strings make are filled to one size with
filler rows (weight 0, label -1; `batching.tf_batches.fill_batches`). Counted
by rows, the last, partly filled batch of each length bucket weighs as much
as a full one. `LossTracker` weighs each batch by what its loss averaged
over, so the reported loss is the mean over the data set's real examples
(or labelled tokens), as Hugging Face's `Trainer` reports it.

Example:
>>> tracker = LossTracker()
>>> tracker.update_state(9.0, sample_weight=32)  # what Keras's steps call: ignored
>>> tracker.add_batch(2.0, weight=30)   # a full batch: 30 labelled rows
>>> tracker.add_batch(5.0, weight=2)    # the last one: 2 real rows and 30 filler rows
>>> round(float(tracker.result()), 4)   # (2 * 30 + 5 * 2) / 32; by rows it would be 3.5
2.1875
"""

import keras


class LossTracker(keras.metrics.Mean):
    """Keras's `loss` tracker with each batch weighed by what the task's loss averaged it over (`add_batch`).

    `Task.compute_loss` feeds it; the call that Keras's train and test steps make,
    with the batch's number of rows, is ignored.
    """

    def __init__(self, name="loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def update_state(self, values, sample_weight=None):
        """Ignored: Keras's steps call it with the batch's number of rows, filler rows included."""
        return None

    def add_batch(self, loss, weight):
        """Adds one batch's mean `loss`, weighed by `weight` (its real rows or labelled tokens)."""
        super().update_state(loss, sample_weight=weight)
