"""The bytes each kernel of our pretraining step moves on an H100, compiled here without a GPU (issue 18).

The H100 profile (`step_profile.py`, session 21) says that the memory-bound
half of the step is what stands between us and the 6,000 seq/s goal, and that
those kernels already run near the HBM bandwidth: the lever is fewer bytes.
This script measures bytes on any machine. It compiles `hlo_fusions.py`'s
training step (backbone-speed model, AdamW, dropout) for an H100 with XLA's
deviceless GPU compiler (`--target h100`; the CUDA plugin, `pip install
"jax[cuda13]"`, but no GPU), or for the local device (`--target local`), and
reads the optimized module: for each top-level instruction (one kernel) the
bytes of its operands and outputs. It prints one JSON line:

- `traffic`: per kernel category (`step_profile.categorise`: matmul,
  layer_norm, gelu, dropout random bits, ...) the kernels, GB per step and the
  time those bytes take at the HBM bandwidth (`roofline_ms`, 3.35 TB/s).
- `total_gb`, `memory_bound_gb` (all but matmuls and attention) and their
  `roofline_ms`.
- `top_sources`: the model operations that move the most bytes, summed over
  the encoder blocks (`transformer_layer_N` is written `transformer_layer_*`).

A change to the model that lowers `memory_bound_gb` lowers the step's time on
the GPU by about that many bytes over the bandwidth: compare two runs' lines.
The counts are an upper bound per kernel (an operand that a fusion only slices
counts whole), the same for both sides of a comparison. Limits: no GEMM
autotuning without the GPU; and Keras's `ops.dot_product_attention` picks
cuDNN's kernel by asking the device it runs on (the CPU), so use
`--attention_padding lengths`, whose cuDNN call this script traces as on a GPU.

    pip install "jax[cuda13]"   # the deviceless compiler; no GPU needed
    KERAS_BACKEND=jax python benchmarks/hlo_traffic.py --target h100 --config base --batch_size 256 \\
        --mixed_precision bf16 --attention_dropout 0 --attention_padding lengths
"""

import argparse
import collections
import contextlib
import os
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from hlo_fusions import (  # noqa: E402
    _NOT_KERNELS,
    add_step_arguments,
    build_step,
    called_computations,
    custom_call_target,
    float8_matmul_calls,
    opcodes_within,
    parse_computations,
    print_json_line,
    step_settings,
)
from step_profile import categorise  # noqa: E402

TARGET_CONFIGS = {"h100": HERE / "h100_target_config.txtpb"}
HBM_BYTES_PER_S = {"h100": 3.35e12}
COMPUTE_BOUND = ("matmul", "attention (cuDNN fused)")
_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4,
                "f64": 8, "s64": 8, "u64": 8, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e4m3fnuz": 1,
                "f8e5m2fnuz": 1, "f8e4m3b11fnuz": 1, "f8e3m4": 1, "f8e8m0fnu": 1}
_SHAPE = re.compile(r"\b(" + "|".join(_DTYPE_BYTES) + r")\[([0-9,]*)\]")
_DEFINITION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s([a-z][a-z0-9\-]*)\((.*)$")


def shape_bytes(shape_text):
    """Bytes of every array shape written in `shape_text` (`bf16[256,128]`, tuples included)."""
    total = 0
    for dtype, dims in _SHAPE.findall(shape_text):
        count = 1
        for dim in filter(None, dims.split(",")):
            count *= int(dim)
        total += count * _DTYPE_BYTES[dtype]
    return total


def _operands(arguments):
    """The `%names` an instruction takes, from the text after its opcode's parenthesis."""
    depth, end = 1, 0
    for end, char in enumerate(arguments):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            break
    return re.findall(r"%([\w.\-]+)", arguments[:end])


def source_of(line):
    """The model operation an instruction comes from (its `op_name`), the encoder block's index as `*`."""
    match = re.search(r'op_name="([^"]+)"', line)
    return re.sub(r"transformer_layer_\d+", "transformer_layer_*", match.group(1)) if match else "?"


def kernel_traffic(text):
    """One dict per kernel of the entry computation: name, opcode, category, source, bytes_in, bytes_out."""
    computations, entry = parse_computations(text)
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")
    sizes, kernels = {}, []
    for opcode, line in computations[entry]:
        match = _DEFINITION.match(line)
        if not match:
            continue
        name, shape, _, arguments = match.groups()
        sizes[name] = shape_bytes(shape)
        if opcode in _NOT_KERNELS:
            continue
        called = called_computations(line)
        inner = opcodes_within(computations, called[0]) if called else {}
        kernels.append({
            "name": name, "opcode": opcode, "category": categorise(opcode, line, inner), "source": source_of(line),
            "bytes_in": sum(sizes.get(operand, 0) for operand in _operands(arguments)), "bytes_out": sizes[name],
        })
        target = custom_call_target(line) if opcode == "custom-call" else ""
        if target:
            kernels[-1]["target"] = target
    return kernels


def custom_call_counts(kernels):
    """How many kernels call each library routine (`custom_call_target`: cuBLAS, cuBLASLt FP8, cuDNN), and how
    many of them are FP8 matmuls (`__cublas$lt$matmul$f8`)."""
    targets = collections.Counter(kernel["target"] for kernel in kernels if "target" in kernel)
    return {"custom_calls": dict(targets.most_common()),
            "float8_matmul_calls": float8_matmul_calls(targets)}


def summarise_traffic(kernels, bytes_per_s, top=25):
    """Per category kernels / GB / roofline ms, the memory-bound total, and the `top` sources by bytes."""
    def gb(count):
        return round(count / 1e9, 6)

    def ms(count):
        return round(count / bytes_per_s * 1e3, 3)

    categories = collections.defaultdict(lambda: [0, 0])
    sources = collections.defaultdict(lambda: [0, 0, ""])
    for kernel in kernels:
        moved = kernel["bytes_in"] + kernel["bytes_out"]
        categories[kernel["category"]][0] += 1
        categories[kernel["category"]][1] += moved
        source = sources[kernel["source"]]
        source[0] += 1
        source[1] += moved
        source[2] = kernel["category"]
    total = sum(moved for _, moved in categories.values())
    memory_bound = sum(moved for name, (_, moved) in categories.items() if name not in COMPUTE_BOUND)
    return {
        "total_gb": gb(total), "total_roofline_ms": ms(total),
        "memory_bound_gb": gb(memory_bound), "memory_bound_roofline_ms": ms(memory_bound),
        "traffic": {name: {"kernels": count, "gb": gb(moved), "roofline_ms": ms(moved)}
                    for name, (count, moved) in sorted(categories.items(), key=lambda item: -item[1][1])},
        "top_sources": [{"source": name, "category": category, "kernels": count, "gb": gb(moved)}
                        for name, (count, moved, category) in
                        sorted(sources.items(), key=lambda item: -item[1][1])[:top]],
    }


def start_jax(target):
    """Imports JAX for `target`: for a deviceless GPU target, JAX runs on the CPU with the CUDA plugin loaded."""
    os.environ.setdefault("KERAS_BACKEND", "jax")
    if target != "local":
        os.environ["JAX_PLATFORMS"] = "cpu"  # the model's variables live here; the step compiles for the GPU
        os.environ["JAX_SKIP_CUDA_CONSTRAINTS_CHECK"] = "1"  # no driver, no GPU: the plugin's version probe fails
    import keras

    if keras.backend.backend() != "jax":
        raise SystemExit(f"error: KERAS_BACKEND={keras.backend.backend()}: this benchmark compiles with JAX")
    return keras


@contextlib.contextmanager
def traced_as_gpu():
    """Our layers pick cuDNN attention when `jax.default_backend()` is "gpu"; a deviceless compile for a GPU must
    take the same path, so the trace sees "gpu" (restored afterwards)."""
    import jax

    original = jax.default_backend
    jax.default_backend = lambda: "gpu"
    try:
        yield
    finally:
        jax.default_backend = original


def deviceless_topology(target):
    """A one-device mesh of `target` (a GPU) for compiling without that GPU."""
    from jax.experimental import topologies

    try:
        topology = topologies.get_topology_desc(
            platform="cuda", target_config=TARGET_CONFIGS[target].read_text(), topology="1x1x1")
    except Exception as error:  # no CUDA plugin, or one too old for deviceless topologies
        raise SystemExit(
            f"error: --target {target}: JAX cannot compile for a CUDA GPU here ({str(error).splitlines()[0][:160]}); "
            f'install the CUDA plugin (pip install "jax[cuda13]"; no GPU needed), or use --target local'
        ) from None
    return topologies.make_mesh(topology, (1,), ("device",))


def compiled_step_text(model, x, y, target):
    """The optimized HLO of one `model.train_step` on `(x, y)`, compiled for `target` ("local" or a GPU name)."""
    import jax

    model._symbolic_build(data_batch=(x, y))  # optimizer and metric variables, without running a step
    state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True, optimizer_variables=True,
                                 metrics_variables=True)
    step = jax.jit(model.train_step, donate_argnums=0)
    if target == "local":
        return step.lower(state, (x, y)).compile().as_text()
    replicated = jax.sharding.NamedSharding(deviceless_topology(target), jax.sharding.PartitionSpec())

    def abstract(array):
        return jax.ShapeDtypeStruct(array.shape, array.dtype, sharding=replicated)

    with traced_as_gpu():
        lowered = step.lower(*jax.tree_util.tree_map(abstract, (state, (x, y))))
    return lowered.compile().as_text()


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_step_arguments(parser)
    parser.add_argument("--target", choices=("h100", "local"), default="h100",
                        help="h100: compile for an H100 without one (CUDA plugin needed); local: this machine's device")
    parser.add_argument("--assume_keras_cudnn_attention", action="store_true",
                        help="the mask path: Keras's ops.dot_product_attention asks the device it runs on whether "
                             "cuDNN's fused attention can run, and deviceless that is the CPU; this answers yes, as "
                             "an H100 does when its cuDNN checks pass")
    parser.add_argument("--top", type=int, default=25, help="how many model operations to list by bytes")
    parser.add_argument("--keep_hlo", default=None, metavar="FILE", help="write the optimized HLO here")
    parser.add_argument("--output", default=None, help="also write the JSON line to this file")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    keras = start_jax(args.target)
    if args.assume_keras_cudnn_attention:
        from keras.src.backend.jax import nn as keras_jax_nn

        if not hasattr(keras_jax_nn, "_can_use_flash_attention"):  # a private function: say so if it moved
            raise SystemExit(f"error: --assume_keras_cudnn_attention: Keras {keras.__version__} has no "
                             "keras.src.backend.jax.nn._can_use_flash_attention to answer for")
        keras_jax_nn._can_use_flash_attention = lambda *args, **kwargs: True
    model, x, y, _ = build_step(args)
    text = compiled_step_text(model, x, y, args.target)
    if args.keep_hlo:
        pathlib.Path(args.keep_hlo).write_text(text)
    bandwidth = HBM_BYTES_PER_S.get(args.target, HBM_BYTES_PER_S["h100"])
    kernels = kernel_traffic(text)
    result = {
        "benchmark": "hlo_traffic",
        "target": args.target,
        "device": "NVIDIA H100 80GB HBM3 (deviceless compile)" if args.target != "local" else
        str(keras.src.backend.jax.distribution_lib.list_devices()[0]),
        "bandwidth_tb_s": bandwidth / 1e12,
        **step_settings(args),
        "assume_keras_cudnn_attention": args.assume_keras_cudnn_attention,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "kernels_total": len(kernels),
        **custom_call_counts(kernels),
        **summarise_traffic(kernels, bandwidth, top=args.top),
    }
    return print_json_line(result, args.output)


if __name__ == "__main__":
    main()
