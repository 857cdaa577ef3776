"""LayerNorm in float32 with a hand-written backward pass, for JAX: fewer bytes through memory on a GPU."""

LAYER_NORM_BACKWARDS = ("explicit", "autodiff")


def check_layer_norm_backward(value, name="layer_norm_backward"):
    """Raises `ValueError` (one line naming the argument `name`) unless `value` is "explicit" or "autodiff"."""
    if value not in LAYER_NORM_BACKWARDS:
        raise ValueError(f"{name}={value!r}: expected 'explicit' (a hand-written backward pass on JAX) or 'autodiff'.")


def layer_norm_with_explicit_backward(x, gamma, beta, epsilon, output_dtype):
    """`(x - mean) * rsqrt(variance + epsilon) * gamma + beta` over the last axis, computed in float32 and returned
    in `output_dtype`, with a `jax.custom_vjp` backward pass. JAX arrays only.

    What the backward pass reads, written out rather than left to autodiff (session 22, counted by
    `benchmarks/hlo_traffic.py` on an H100 compile of BERT-base at batch 256):

    - the forward pass saves `x` (in its own dtype) and the float32 `mean` and `rsqrt(variance + epsilon)` of
      each row, and the backward pass reads them through an optimization barrier: XLA then cannot recompute the
      statistics inside a normalization kernel that writes `dy * x_hat` to memory in float32 (100 MB a
      LayerNorm, written and read back) for the `gamma` gradient, which is what it does with autodiff's graph;
    - the `gamma` and `beta` gradients are one column reduction over `[dy * x_hat, dy]`, reading `dy` once;
    - `dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))` with `g = dy * gamma`, one row-reduction kernel.

    The variance is the two-pass `mean((x - mean)^2)` of `Float32LayerNormalization`, so the outputs are the
    same. The gradients equal autodiff's up to float32 rounding.

    Example:
    >>> import numpy as np, jax
    >>> x = np.random.default_rng(0).standard_normal((2, 3, 8)).astype("float32")
    >>> gamma, beta = np.ones(8, "float32"), np.zeros(8, "float32")
    >>> y = layer_norm_with_explicit_backward(x, gamma, beta, 1e-12, "float32")
    >>> bool(np.allclose(np.asarray(y).mean(-1), 0, atol=1e-5))
    True
    >>> dx = jax.grad(lambda v: (layer_norm_with_explicit_backward(v, gamma, beta, 1e-12, "float32") ** 3).sum())(x)
    >>> dx.shape
    (2, 3, 8)
    """
    import jax
    import jax.numpy as jnp

    def statistics(x32):
        mean = jnp.mean(x32, axis=-1, keepdims=True)
        variance = jnp.mean(jnp.square(x32 - mean), axis=-1, keepdims=True)
        return mean, jax.lax.rsqrt(variance + epsilon)

    def forward(x, gamma, beta):
        x32 = x.astype(jnp.float32)
        mean, rstd = statistics(x32)
        y = (x32 - mean) * rstd * gamma.astype(jnp.float32) + beta.astype(jnp.float32)
        return y.astype(output_dtype), (x, mean, rstd, gamma)

    def backward(saved, dy):
        x, mean, rstd, gamma = saved
        mean, rstd = jax.lax.optimization_barrier((mean, rstd))
        x_hat = (x.astype(jnp.float32) - mean) * rstd
        dy32 = dy.astype(jnp.float32)
        g = dy32 * gamma.astype(jnp.float32)
        dx = rstd * (g - jnp.mean(g, axis=-1, keepdims=True) - x_hat * jnp.mean(g * x_hat, axis=-1, keepdims=True))
        rows = tuple(range(x.ndim - 1))
        d_gamma, d_beta = jnp.sum(jnp.stack([dy32 * x_hat, dy32]), axis=tuple(r + 1 for r in rows))
        return dx.astype(x.dtype), d_gamma.astype(gamma.dtype), d_beta.astype(gamma.dtype)

    @jax.custom_vjp
    def layer_norm(x, gamma, beta):
        return forward(x, gamma, beta)[0]

    layer_norm.defvjp(forward, backward)
    return layer_norm(x, gamma, beta)
