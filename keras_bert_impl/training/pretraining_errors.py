"""The error a pretraining run raises when its loss stops being finite (shared by the run and its callbacks)."""


class NaNLossError(FloatingPointError):
    """Raised when the training loss stops being finite."""
