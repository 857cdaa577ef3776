"""What XLA fuses in our pretraining step: kernels per step, read from the optimized HLO (issue 18, item 5).

Compiles one training step of the backbone-speed model (encoder + masked-LM
head on gathered positions + NSP head, AdamW, dropout; `backbone_speed.py`'s
`build_ours`) with JAX, has XLA dump the optimized module
(`--xla_dump_to`), and reads the top-level program of `jit_train_step`: each
top-level instruction other than parameters, constants, tuples and bitcasts
is one kernel launch on a GPU. Prints one JSON line:

- `kernels`: top-level instructions by opcode (`fusion`, `dot`, `copy`,
  `custom-call` (cuDNN attention, cuBLAS GEMMs on a GPU), `while` ...).
- `gelu`: fusions holding `erf` (exact GELU) or `tanh` with a multiply
  (tanh GELU), and how many of them also hold the bias add (`add` of a
  `broadcast`): bias + GELU in one kernel.
- `layer_norm`: fusions holding `rsqrt`, and how many hold a `reduce` and an
  `add` of two activations (the residual): residual + LayerNorm statistics in
  one kernel.
- `dropout_rng`: top-level `while` loops and `rng-bit-generator`s (JAX's
  threefry runs as loops on the CPU), and fusions holding `xor` (RNG bits).
- `optimizer`: fusions holding `sqrt` but not `rsqrt` (AdamW's update), next to
  the number of trainable variables: one fusion per variable means the update
  runs as that many small kernels rather than a few fused loops.
- `custom_calls` by target, and `fused_attention_calls`: cuDNN's fused
  attention (`__cudnn$fmha...`), which runs only on a GPU in bf16/fp16 and in
  training only with `--attention_dropout 0`; `--attention_padding lengths`
  hands it the padding as one length per row instead of a mask.

The CPU gives XLA:CPU's fusion decisions; run the same command on a GPU for
the kernels an H100 launches:

    KERAS_BACKEND=jax python benchmarks/hlo_fusions.py --config tiny --batch_size 8 --sequence_length 128
    KERAS_BACKEND=jax python benchmarks/hlo_fusions.py --config base --mixed_precision bf16 --batch_size 64
"""

import argparse
import collections
import json
import os
import pathlib
import re
import sys
import tempfile

_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][a-z0-9\-]*)\((.*)$")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition)=%?([\w.\-]+)")
_NOT_KERNELS = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}


def called_computations(line):
    """The computations an instruction's line calls (`calls=`, `to_apply=`, a loop's `body=` and `condition=`)."""
    return _CALLS.findall(line)


def custom_call_target(line):
    """The library routine a `custom-call` instruction calls (`__cublas$lt$matmul`, `__cudnn$fmhaSoftmax`, ...), or
    "" where the line names none."""
    match = re.search(r'custom_call_target="([^"]+)"', line)
    return match.group(1) if match else ""


def float8_matmul_calls(targets):
    """How many of `targets` (a Counter of custom-call targets) are cuBLASLt FP8 matmuls (`__cublas$lt$matmul$f8`),
    which XLA rewrites Keras's float8 pattern to (GPU only)."""
    return sum(n for target, n in targets.items() if target.endswith("$f8"))


def parse_computations(text):
    """dict computation name -> list of `(opcode, line)`; the entry computation is named by `entry_name`."""
    computations, name, entry = {}, None, None
    for line in text.splitlines():
        header = re.match(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$", line)
        if header and not line.startswith(" "):
            name = header.group(2)
            computations[name] = []
            if header.group(1):
                entry = name
            continue
        if line.startswith("}"):
            name = None
            continue
        if name is not None:
            match = _INSTRUCTION.match(line)
            if match:
                computations[name].append((match.group(1), line))
    return computations, entry


def opcodes_within(computations, name, seen=None):
    """Every opcode of a computation and of the computations it calls."""
    seen = set() if seen is None else seen
    if name in seen or name not in computations:
        return collections.Counter()
    seen.add(name)
    counts = collections.Counter()
    for opcode, line in computations[name]:
        counts[opcode] += 1
        for called in called_computations(line):
            counts += opcodes_within(computations, called, seen)
    return counts


def analyse(text, num_variables=None):
    computations, entry = parse_computations(text)
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")
    kernels = collections.Counter(op for op, _ in computations[entry] if op not in _NOT_KERNELS)
    fusions = []
    for opcode, line in computations[entry]:
        if opcode == "fusion":
            called = called_computations(line)
            kind = re.search(r"kind=(k\w+)", line)
            fusions.append((kind.group(1) if kind else "?", opcodes_within(computations, called[0]) if called else {}))
    gelu = [ops for _, ops in fusions if ops.get("erf") or (ops.get("tanh") and ops.get("multiply", 0) >= 3)]
    layer_norm = [ops for _, ops in fusions if ops.get("rsqrt")]
    adam = [ops for _, ops in fusions if ops.get("sqrt") and not ops.get("rsqrt")]
    targets = collections.Counter(custom_call_target(line) for op, line in computations[entry] if op == "custom-call")
    targets.pop("", None)
    return {
        "kernels": dict(kernels.most_common()),
        "kernels_total": sum(kernels.values()),
        "fusion_kinds": dict(collections.Counter(kind for kind, _ in fusions)),
        "gelu": {
            "fusions": len(gelu),
            "with_bias_add": sum(1 for ops in gelu if ops.get("broadcast") and ops.get("add")),
        },
        "layer_norm": {
            "fusions_with_rsqrt": len(layer_norm),
            "with_reduce_and_residual_add": sum(1 for ops in layer_norm if ops.get("reduce") and ops.get("add")),
            "reduce_fusions": sum(1 for _, ops in fusions if ops.get("reduce")),
        },
        "dropout_rng": {
            "while_loops": kernels.get("while", 0),
            "rng_bit_generators": kernels.get("rng-bit-generator", 0),
            "fusions_with_xor": sum(1 for _, ops in fusions if ops.get("xor")),
        },
        "optimizer": {"update_fusions_with_sqrt": len(adam), "trainable_variables": num_variables},
        "custom_calls": dict(targets.most_common()),
        # cuDNN's fused (flash) attention, forward and backward: `__cudnn$fmha...` targets (GPU only).
        "fused_attention_calls": sum(n for target, n in targets.items() if "cudnn$fmha" in target),
        # cuDNN's LayerNorm (`__cudnn$norm`), which XLA rewrites to only with --xla_gpu_enable_cudnn_layer_norm.
        "fused_layer_norm_calls": sum(n for target, n in targets.items() if "cudnn$norm" in target),
        "float8_matmul_calls": float8_matmul_calls(targets),
    }


def build_step(args, steps_per_execution=1):
    """backbone_speed.py's training step, compiled with XLA: (model, x, y, config) for `args`' config, batch and
    dropout.

    Shared with `step_profile.py`, which times the same step's kernels.
    """
    import keras

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from backbone_speed import CONFIGS, DROPOUT_BITS, backbone_presets, build_ours, make_batch

    if args.dropout_rng in DROPOUT_BITS:
        DROPOUT_BITS[args.dropout_rng]()
    if args.mixed_precision == "bf16":
        keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    if args.config not in CONFIGS:
        raise SystemExit(f"error: --config {args.config!r}: expected one of {', '.join(CONFIGS)}")
    # backbone_speed.py's training step: the tanh GELU of the original BERT code.
    config = dict(backbone_presets[CONFIGS[args.config]]["config"], activation="gelu_approximate", dropout=args.dropout,
                  attention_dropout=args.attention_dropout, attention_padding=args.attention_padding,
                  qkv_projection=args.qkv_projection, recompute_activation=args.recompute_activation == "on",
                  layer_norm_backward=args.layer_norm_backward)
    model = build_ours(config, float8=args.float8 == "on")
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01),
        loss={"mlm": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              "nsp": keras.losses.SparseCategoricalCrossentropy(from_logits=True)},
        jit_compile=True,
        steps_per_execution=steps_per_execution,
    )
    x, y = make_batch(args.batch_size, args.sequence_length, args.predictions, config["vocabulary_size"])
    return model, x, y, config


def start_jax_with_dump(dump, args, purpose):
    """Has XLA dump every optimized module to `dump` (before JAX starts: XLA reads its flags once), checks that
    Keras runs on JAX and applies `--prng_impl`; returns `keras`."""
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump} --xla_dump_hlo_as_text"
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras

    if keras.backend.backend() != "jax":
        raise SystemExit(f"error: KERAS_BACKEND={keras.backend.backend()}: this benchmark {purpose}")
    if args.prng_impl:
        import jax

        jax.config.update("jax_default_prng_impl", args.prng_impl)
    return keras


def step_settings(args):
    """The step's settings, for the JSON line."""
    return {key: getattr(args, key) for key in ("config", "batch_size", "sequence_length", "predictions", "dropout",
                                                "attention_dropout", "attention_padding", "qkv_projection",
                                                "recompute_activation", "layer_norm_backward", "float8",
                                                "mixed_precision")} | {
        "prng_impl": args.prng_impl or "default", "dropout_bits": args.dropout_rng}


def add_step_arguments(parser):
    """The step's flags, shared with `step_profile.py`."""
    parser.add_argument("--config", default="tiny", help="a backbone_speed.py config: tiny, mini, small, medium, base")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--sequence_length", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--attention_dropout", type=float, default=None,
                        help="dropout on the attention probabilities (default: --dropout); 0 lets the fused "
                             "attention kernel run in training")
    parser.add_argument("--attention_padding", choices=("mask", "lengths"), default="mask",
                        help="padding as a (batch, 1, q, k) mask or as one length per row (cuDNN's form)")
    parser.add_argument("--qkv_projection", choices=("fused", "split"), default="fused",
                        help="query, key and value from one matmul sliced (fused) or three (split)")
    parser.add_argument("--recompute_activation", choices=("on", "off"), default="on",
                        help="on: the backward pass recomputes the feed-forward bias + GELU (JAX); off: stores it")
    parser.add_argument("--layer_norm_backward", choices=("explicit", "autodiff"), default="explicit",
                        help="the LayerNorms' backward pass on JAX: hand-written or autodiff's")
    parser.add_argument("--mixed_precision", choices=("bf16",), default=None)
    parser.add_argument("--float8", choices=("on", "off"), default="off",
                        help="on: the encoder's matmuls through Keras's float8 training (quantize_encoder_float8)")
    parser.add_argument("--prng_impl", choices=("threefry2x32", "rbg", "unsafe_rbg"), default=None,
                        help="jax_default_prng_impl for dropout's random bits (default: JAX's, threefry2x32)")
    parser.add_argument("--dropout_rng", choices=("threefry", "philox", "threefry16"), default="threefry",
                        help="philox: dropout's bits from XLA's rng-bit-generator (backbone_speed.use_philox_dropout); "
                             "threefry16: 16 threefry bits an element (use_threefry16_dropout)")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_step_arguments(parser)
    parser.add_argument("--keep_dump", default=None, metavar="DIR", help="dump the HLO here and keep it")
    parser.add_argument("--output", default=None, help="also write the JSON line to this file")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        return run(args)
    except TypeError as error:
        if args.prng_impl and "PRNG key data" in str(error):
            raise SystemExit(
                f"error: --prng_impl {args.prng_impl}: Keras's random seeds are 2-word threefry keys, which "
                f"this implementation does not take ({str(error)[:120]}...)"
            ) from None
        raise


def run(args):
    dump = args.keep_dump or tempfile.mkdtemp(prefix="hlo_fusions_")
    keras = start_jax_with_dump(dump, args, "reads XLA dumps of JAX")
    model, x, y, _ = build_step(args)
    model.train_on_batch(x, y)
    files = sorted(pathlib.Path(dump).glob("*jit_train_step*after_optimizations.txt"))
    if not files:
        raise SystemExit(f"error: no jit_train_step module was dumped to {dump}")
    result = {
        "benchmark": "hlo_fusions",
        "device": str(keras.src.backend.jax.distribution_lib.list_devices()[0]),
        **step_settings(args),
        "hlo_file": files[-1].name,
        **analyse(files[-1].read_text(), num_variables=len(model.trainable_variables)),
    }
    return print_json_line(result, args.output)


def print_json_line(result, output=None):
    """Prints `result` as one JSON line and, with `output`, writes the line to that file; returns `result`."""
    line = json.dumps(result)
    print(line)
    if output:
        pathlib.Path(output).write_text(line + "\n")
    return result


if __name__ == "__main__":
    main()
