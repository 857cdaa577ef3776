"""The argument checks shared by both pretraining pipelines (tf.data `pretraining` and NumPy `array_pretraining`).

No TensorFlow here: the NumPy pipeline runs where it cannot be imported.

Example:

>>> check_pipeline_arguments(sequence_length=4, max_predictions_per_seq=2, batch_size=8, masking_rate=0.15,
...                          short_seq_prob=0.1, nsp=True, documents_per_batch=16, shuffle_buffer_size=2048)
Traceback (most recent call last):
...
ValueError: sequence_length=4 is too small for [CLS] A [SEP] B [SEP] with at least one token in each segment: it must be an integer >= 5
"""


def check_pipeline_arguments(*, sequence_length, max_predictions_per_seq, batch_size, masking_rate, short_seq_prob,
                             nsp, documents_per_batch, shuffle_buffer_size):
    """Raises `ValueError` naming the first argument out of range and what it must be."""
    min_length = 5 if nsp else 3
    if not isinstance(sequence_length, int) or sequence_length < min_length:
        layout = "[CLS] A [SEP] B [SEP]" if nsp else "[CLS] A [SEP]"
        raise ValueError(
            f"sequence_length={sequence_length!r} is too small for {layout} with at least one token in each "
            f"segment: it must be an integer >= {min_length}"
        )
    if not isinstance(max_predictions_per_seq, int) or not 1 <= max_predictions_per_seq <= sequence_length:
        raise ValueError(
            f"max_predictions_per_seq must be an integer in [1, sequence_length], got {max_predictions_per_seq!r}"
        )
    for name, value in (("batch_size", batch_size), ("documents_per_batch", documents_per_batch),
                        ("shuffle_buffer_size", shuffle_buffer_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not 0.0 < masking_rate <= 1.0:
        raise ValueError(f"masking_rate must be in (0, 1], got {masking_rate!r}")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob must be in [0, 1], got {short_seq_prob!r}")
