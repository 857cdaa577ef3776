"""The errors a pretraining run raises on its own: a non-finite loss, a lost process of a multi-process job.

Example: the pretraining run's `NaNGuard` callback stops a fit at the first batch whose loss is not finite (here a
NaN input in the second of two batches), and its error is a `FloatingPointError`:

>>> import keras, numpy as np, tempfile
>>> from keras_bert_impl.training.pretraining_callbacks import NaNGuard
>>> from keras_bert_impl.training.run_checkpoints import CheckpointManager
>>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> guard = NaNGuard(0, CheckpointManager(tempfile.mkdtemp()))
>>> try:
...     model.fit(np.array([[1.0], [np.nan]]), np.zeros((2, 1)), batch_size=1, shuffle=False, callbacks=[guard],
...               verbose=0)
... except FloatingPointError as error:
...     print(type(error).__name__, str(error).split(". ")[0])
NaNLossError Training loss is nan at step 2; stopped
"""


class NaNLossError(FloatingPointError):
    """Raised when the training loss stops being finite."""


class LostProcessError(RuntimeError):
    """Raised in the processes left behind when another process of a multi-process job stops mid-run.

    Its message says which process this is and which checkpoint a restart of every
    process resumes from. The distributed runtimes cannot go on without the lost
    process (JAX's aborts at exit once it notices), so the recipe exits at once.

    Example: the error of process 0 of 2 when process 1 stopped after the checkpoint of step 300:

    >>> from keras_bert_impl.training.process_cluster import lost_process_message
    >>> cause = RuntimeError("[pair.cc:537] Read error [127.0.0.1]:4010: Connection reset by peer. More text.")
    >>> error = LostProcessError(lost_process_message("JAX", 0, 2, cause, "/tmp/run/checkpoints/ckpt-300"))
    >>> isinstance(error, RuntimeError), str(error).split("; ")[1]
    (True, 'restart the same command on every process: the run resumes from /tmp/run/checkpoints/ckpt-300')
    """
