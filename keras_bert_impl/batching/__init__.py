"""Length-bucketed batching, below every task: the one place batches are cut.

- `boundaries`: `default_boundaries(sequence_length, ...)` (the bucket upper
  bounds) with one named choice per task (`CLASSIFICATION_BUCKETS`,
  `TAGGING_BUCKETS`, `SPAN_QA_BUCKETS`), `check_boundaries`, and the one
  bucket choice and batch count from example lengths (`bucket_indices`,
  `count_batches_from_lengths`). NumPy, no TensorFlow.
- `tf_batches`: the tf.data pipeline pieces (`bucket_by_length`,
  `pad_to_boundaries`, `fill_batches`, `count_batches`) and the tail of every
  task's `make_dataset`, `batches_by_length`. Needs TensorFlow.
- `array_batches`: the NumPy twin (`LengthBucketedBatches`, a
  `keras.utils.PyDataset`) for JAX- or PyTorch-only hosts. No TensorFlow.

This package imports nothing else from `keras_bert_impl` but
`tensorflow_devices` (its room: the bottom of the layer order; see
docs/architecture.md).
"""
