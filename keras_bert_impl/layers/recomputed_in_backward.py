"""Functions whose intermediates the backward pass recomputes instead of storing."""

import keras


def recomputed_in_backward(fn):
    """`fn`, differentiated by saving only its inputs and recomputing the rest in the backward pass.

    On JAX this is `jax.checkpoint(fn)`. Worth it for a cheap element-wise
    function of a large activation, such as the feed-forward block's bias +
    GELU: autodiff would otherwise store one of GELU's intermediates (a tensor
    as large as the activation) between the forward and the backward pass.
    The values are those of `fn` and the gradients the same up to rounding.
    TensorFlow and PyTorch get `fn` itself (PyTorch's GELU already saves only
    its input).

    Example:
    >>> import numpy as np
    >>> from keras import ops
    >>> gelu = recomputed_in_backward(lambda x, b: ops.gelu(x + b))
    >>> x, b = np.array([[-1.0, 0.5]], "float32"), np.array([0.1, 0.2], "float32")
    >>> bool(np.allclose(gelu(x, b), ops.gelu(x + b)))
    True
    """
    if keras.backend.backend() == "jax":
        import jax

        return jax.checkpoint(fn)
    return fn
