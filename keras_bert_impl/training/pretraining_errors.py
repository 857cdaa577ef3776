"""The errors a pretraining run raises on its own: a non-finite loss, a lost process of a multi-process job."""


class NaNLossError(FloatingPointError):
    """Raised when the training loss stops being finite."""


class LostProcessError(RuntimeError):
    """Raised in the processes left behind when another process of a multi-process job stops mid-run.

    Its message says which process this is and which checkpoint a restart of every
    process resumes from. The distributed runtimes cannot go on without the lost
    process (JAX's aborts at exit once it notices), so the recipe exits at once.
    """
