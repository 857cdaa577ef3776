"""Clipping by the global norm of the gradient of the whole batch, on every device and process.

Keras clips each device's (each tf.distribute replica's, each PyTorch process's) part of the gradient before the
all-reduce that sums the parts, so on N devices the clipped step differs from the one-device step. The optimizers
here reduce first, clip the gradient of the global batch, and apply it once: one-device and many-device training
take identical steps. `GlobalClipAdamW` is what `Task.compile`'s `"auto"` optimizer and
`keras_bert_impl.training.create_optimizer` build.
"""

import keras

from keras_bert_impl.optimizers.adamw import AdamW


def mean_over_torch_processes(grads):
    """The mean of `grads` (a list of tensors, `None` kept) over every PyTorch process: one all-reduce of one buffer.

    One process, or `torch.distributed` not started: the list as it is.

    Example:
    >>> import torch
    >>> mean_over_torch_processes([torch.ones(2), None])  # one process: unchanged
    [tensor([1., 1.]), None]
    """
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return list(grads)
    present = [g for g in grads if g is not None]
    if not present:
        return list(grads)
    dtype = torch.float32 if any(g.dtype == torch.float32 for g in present) else present[0].dtype
    flat = torch.cat([g.reshape(-1).to(dtype) for g in present])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= dist.get_world_size()
    reduced, offset = [], 0
    for g in grads:
        if g is None:
            reduced.append(None)
            continue
        reduced.append(flat[offset:offset + g.numel()].view(g.shape).to(g.dtype))
        offset += g.numel()
    return reduced


class ClipAfterAllReduce:
    """Mixin for a Keras optimizer: its global-norm clipping sees the all-reduced gradient.

    Under a multi-replica tf.distribute strategy it all-reduces first, clips the full gradient, and skips Keras's
    second all-reduce. Several PyTorch processes (`--strategy multiworker` on torch,
    `keras_bert_impl.training.torch_processes`) have no all-reduce of their own in Keras's step: here each
    process's gradient (the mean over its rows) becomes the mean over every process before clipping, the gradient
    of the global batch, so every process takes the same step. JAX processes need nothing: their step is one
    program over the global batch.
    """

    def _clip_gradients(self, grads):
        self._reduced_before_clipping = False
        if keras.backend.backend() == "torch":
            grads = mean_over_torch_processes(grads)
        if self.global_clipnorm and keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            context = tf.distribute.get_replica_context()
            if context is not None and context.num_replicas_in_sync > 1:
                present = [i for i, g in enumerate(grads) if g is not None]
                reduced = context.all_reduce(tf.distribute.ReduceOp.SUM, [grads[i] for i in present])
                grads = list(grads)
                for i, g in zip(present, reduced):
                    grads[i] = g
                self._reduced_before_clipping = True
        return super()._clip_gradients(grads)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if getattr(self, "_reduced_before_clipping", False):
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GlobalClipAdamW(ClipAfterAllReduce, AdamW):
    """`keras_bert_impl.optimizers.AdamW` (PyTorch's epsilon) whose global-norm clipping sees the all-reduced
    gradient (`ClipAfterAllReduce`).

    Example:
    >>> import numpy as np
    >>> variable = keras.Variable(np.zeros(2, "float32"))
    >>> optimizer = GlobalClipAdamW(learning_rate=0.1, weight_decay=0.0, global_clipnorm=1.0)
    >>> _ = optimizer.apply_gradients([(np.array([30.0, -40.0], "float32"), variable)])  # clipped to norm 1
    >>> [round(float(x), 4) for x in keras.ops.convert_to_numpy(variable)]
    [-0.1, 0.1]
    """


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GlobalClipLamb(ClipAfterAllReduce, keras.optimizers.Lamb):
    """`keras.optimizers.Lamb` whose global-norm clipping sees the all-reduced gradient (`ClipAfterAllReduce`)."""
