"""A Keras callback that interrupts a run as a killed job would: the tests' way to stop a run and resume it."""

import keras


class StopAfterEpoch(keras.callbacks.Callback):
    """Interrupts a run at the end of epoch `stop` (1-based), after its checkpoint: as a killed job would."""

    def __init__(self, stop):
        super().__init__()
        self.stop = stop

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.stop:
            raise KeyboardInterrupt(f"stopped after epoch {self.stop}")


class StopAtBatch(keras.callbacks.Callback):
    """Interrupts a run at the start of training batch `batch` (0-based) of the first epoch: Ctrl-C within an epoch."""

    def __init__(self, batch):
        super().__init__()
        self.batch = batch

    def on_train_batch_begin(self, batch, logs=None):
        if batch == self.batch:
            raise KeyboardInterrupt(f"stopped at batch {self.batch}")
