"""Two tf.distribute multi-worker patches for Keras 3 that pretraining needs (TensorFlow backend)."""

import keras


def build_before_distributed_fit(model, strategy, batch):
    """Builds `model`'s compiled losses/metrics from a plain batch, then skips Keras's own symbolic build.

    Before training, Keras's TF trainer pulls one batch from the distributed
    iterator and reduces it with `strategy.reduce("MEAN", batch)` to build the
    compiled metrics. `MultiWorkerMirroredStrategy.reduce` cannot reduce a dict
    of tensors, so `fit` fails on every multi-worker run, and the pulled batch
    would also be lost to training. This builds from `batch` (an
    `(x, y, sample_weight)` of numpy arrays of the per-replica shape) under
    the strategy scope instead, and turns Keras's step into a no-op for this
    model.

    Args:
        model: a compiled Keras model.
        strategy: the tf.distribute strategy it was built under.
        batch: `(x, y, sample_weight)` tuple of arrays.
    """
    if keras.backend.backend() != "tensorflow":
        return
    with strategy.scope():
        model._symbolic_build(data_batch=batch)  # noqa: SLF001
    model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None  # noqa: SLF001


def patch_multiworker_metric_reduction():
    """Makes Keras reduce per-replica *scalar* logs under MultiWorkerMirroredStrategy.

    Keras's TF trainer reduces each log value with `strategy.reduce("MEAN", v,
    axis=0)` on multi-worker strategies, which fails for scalars ("Invalid
    reduction dimension 0 for input with 0 dimensions"). Scalars are reduced
    without an axis instead. Idempotent.
    """
    if keras.backend.backend() != "tensorflow":
        return
    from keras.src.backend.tensorflow import trainer as tf_trainer

    if getattr(tf_trainer.reduce_per_replica, "_keras_bert_impl_patched", False):
        return
    original = tf_trainer.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        if tf_trainer._collective_all_reduce_multi_worker(strategy) and reduction in ("auto", "mean"):  # noqa: SLF001

            def reduce_one(v):
                if tf_trainer._is_per_replica_instance(v) or hasattr(v, "shape"):  # noqa: SLF001
                    rank = len(strategy.experimental_local_results(v)[0].shape)
                    return strategy.reduce("MEAN", v, axis=0 if rank else None)
                return v

            return keras.tree.map_structure(reduce_one, values)
        return original(values, strategy, reduction)

    reduce_per_replica._keras_bert_impl_patched = True
    tf_trainer.reduce_per_replica = reduce_per_replica
