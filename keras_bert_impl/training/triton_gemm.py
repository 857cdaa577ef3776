"""Which kernels XLA uses for the matmuls on a GPU: `recipes/pretrain.py --triton_gemm auto|on|off`.

XLA's GPU compiler writes some matmuls as its own Triton kernels and hands the
others to cuBLAS. For BERT's training step, cuBLAS for every matmul is faster:
on one H200 (session 40, `docs/benchmarks.md`), BERT-base at batch 256 in bf16
ran 5,259 seq/s with `XLA_FLAGS=--xla_gpu_enable_triton_gemm=false` against
5,010 with XLA's default in the same call (+5.0%). A deviceless H100 compile
had predicted it: cuBLAS folds the residual gradients into the gradients'
matmuls (beta = 1), 3.5 GB fewer memory-bound bytes a step (session 23).

`apply_triton_gemm` sets the flag in `XLA_FLAGS`, which XLA reads once, when
JAX first starts a device: so it runs before anything asks JAX for its devices
(before `--compilation_cache auto`, which does). That is also why `auto`
cannot ask whether a GPU is there: on JAX it turns Triton GEMMs off wherever it
runs (a GPU-only option: the CPU and TPU compilers do not read it). It leaves
TensorFlow and PyTorch alone (not measured there), and an `XLA_FLAGS` that
already names the option wins over `auto`.

Example:
>>> env = {}
>>> apply_triton_gemm("auto", backend="jax", environ=env)
'off'
>>> env["XLA_FLAGS"]
'--xla_gpu_enable_triton_gemm=false'
>>> apply_triton_gemm("auto", backend="tensorflow", environ={})
'xla default'
"""

import os

import keras

TRITON_GEMM_CHOICES = ("auto", "on", "off")
FLAG = "--xla_gpu_enable_triton_gemm"


def _named_value(xla_flags):
    """The value `XLA_FLAGS` gives the option (the last one, as XLA reads them), or None."""
    value = None
    for flag in xla_flags.split():
        name, _, given = flag.partition("=")
        if name == FLAG:
            value = given.lower() not in ("false", "0")
    return value


def apply_triton_gemm(setting, backend=None, environ=None):
    """Sets XLA's Triton GEMM option for `setting` (`auto`, `on`, `off`); returns what the run uses.

    Returns `"off"` or `"on"` (what `XLA_FLAGS` now says), or `"xla default"` where
    nothing was set (`auto` on TensorFlow or PyTorch).

    Raises:
        ValueError: an unknown `setting`, or `on`/`off` against an `XLA_FLAGS` that says the opposite.
    """
    if setting not in TRITON_GEMM_CHOICES:
        raise ValueError(f"--triton_gemm={setting!r}: expected one of {', '.join(TRITON_GEMM_CHOICES)}")
    environ = os.environ if environ is None else environ
    xla_flags = environ.get("XLA_FLAGS", "")
    named = _named_value(xla_flags)
    if setting == "auto":
        if named is not None:
            return "on" if named else "off"
        if (backend or keras.backend.backend()) != "jax":
            return "xla default"
        setting = "off"
    wanted = setting == "on"
    if named is not None and named != wanted:
        raise ValueError(
            f"--triton_gemm {setting} contradicts XLA_FLAGS, which sets {FLAG}={str(named).lower()}: "
            f"drop one of the two"
        )
    if named is None:
        environ["XLA_FLAGS"] = f"{xla_flags} {FLAG}={str(wanted).lower()}".strip()
    return setting
