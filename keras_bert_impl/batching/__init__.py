"""Length-bucketed batching, below every task: the one place batches are cut.

- `boundaries`: `default_boundaries(sequence_length, ...)` (the bucket upper
  bounds) with one named choice per task (`CLASSIFICATION_BUCKETS`,
  `TAGGING_BUCKETS`, `SPAN_QA_BUCKETS`), and `check_boundaries`. Pure Python.
- `tf_batches`: the tf.data pipeline pieces (`bucket_by_length`,
  `pad_to_boundaries`, `fill_batches`, `count_batches`). Needs TensorFlow.
- `array_batches`: the NumPy twin (`LengthBucketedBatches`, a
  `keras.utils.PyDataset`) for JAX- or PyTorch-only hosts. No TensorFlow.

This package imports nothing else from `keras_bert_impl` (it sits at the
bottom of the layer order; see docs/architecture.md).
"""
