"""Where the training step's time goes: device time per kernel category, from a JAX profile (issue 18).

`hlo_fusions.py` counts the kernels XLA plans for one step of the backbone-speed
model (encoder + masked-LM head on gathered positions + NSP head, AdamW,
dropout); this benchmark times them. It compiles the same step (dumping the
optimized HLO), warms it up, records `--steps` steps under
`jax.profiler.trace`, and reads the trace's kernels: each kernel carries the
HLO instruction (`hlo_op`) that launched it, and the instruction's line in the
dump says what it computes. Prints one JSON line:

- `wall_ms_per_step` (timed outside the profiler too: `unprofiled_wall_ms_per_step`),
  `device_busy_ms_per_step` (the kernels' summed time) and
  `device_idle_ms_per_step` (the device waiting: launches, host work).
- `categories`: milliseconds per step, share of the busy time and kernels per
  step for matmuls (cuBLAS / Triton / `dot`), fused attention (cuDNN),
  LayerNorm, GELU, the optimizer update, dropout's random bits, softmax and
  loss reductions, other reductions, element-wise fusions, copies/transposes
  and the rest.
- `matmul_tflops`: the step's matmul FLOPs (`backbone_speed.py`'s count)
  divided by the matmul kernels' time, next to `model_tflops` over the wall
  time: whether the matmuls run near the hardware's rate and the rest of the
  step is the gap, or the matmuls themselves are slow. With cuDNN attention
  the attention products run inside the attention kernel, so both figures are
  read with `attention_flops_share` (their share of the count).
- `top_ops`: the 15 instructions that take the most time, with a kernel name.

On a GPU, XLA replays most of the step as CUDA graphs (command buffers): the
trace then names the `command_buffer` op rather than the instruction, and each
kernel is matched by its own name, which XLA derives from the instruction's
(cuBLAS and cuDNN kernels by their library's names). The profiled step is
slower than the unprofiled one (the profiler's overhead): the busy time is the
kernels', and `unprofiled_wall_ms_per_step` is `train_on_batch`'s (one host
call a step; `backbone_speed.py` times `fit` with `steps_per_execution`).
`--ops_output FILE` writes every kernel's time and instruction, to re-read
the categories without the GPU, and, for the `--hlo_ops` (40) costliest
instructions, their optimized HLO (the instruction and the computation it
calls): what each kernel computes, to plan the next change without the GPU.

    KERAS_BACKEND=jax python benchmarks/step_profile.py --config tiny --batch_size 8 --sequence_length 64
    KERAS_BACKEND=jax python benchmarks/step_profile.py --config base --mixed_precision bf16 --batch_size 256 \\
        --attention_dropout 0 --attention_padding lengths
"""

import argparse
import collections
import gzip
import json
import pathlib
import re
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from hlo_fusions import (  # noqa: E402
    add_step_arguments, build_step, called_computations, custom_call_target, opcodes_within, parse_computations, start_jax_with_dump,
    step_settings,
)

_NAME = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")
_COMMUNICATION = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                  "all-reduce-start", "all-gather-start", "collective-permute-start"}
CATEGORIES = ("matmul", "attention (cuDNN fused)", "layer_norm", "gelu", "optimizer update", "dropout random bits",
              "softmax and loss", "other reductions", "element-wise", "copies and transposes", "communication",
              "other", "unknown")


def instruction_table(text):
    """dict instruction name -> (opcode, line, opcodes of the computations it calls) for every computation."""
    computations, _ = parse_computations(text)
    table = {}
    for instructions in computations.values():
        for opcode, line in instructions:
            name = _NAME.match(line)
            if name:
                called = called_computations(line)
                table[name.group(1)] = (opcode, line, opcodes_within(computations, called[0]) if called else {})
    return table


def optimized_modules(dump_dir):
    """(module name, HLO text) of each of XLA's `*after_optimizations.txt` dumps."""
    for path in sorted(pathlib.Path(dump_dir).glob("*after_optimizations.txt")):
        text = path.read_text()
        header = re.match(r"HloModule\s+([\w.\-]+)", text)
        if header:
            yield header.group(1), text


def module_tables(dump_dir):
    """dict module name -> instruction table, from XLA's `*after_optimizations.txt` dumps."""
    tables = {}
    for module, text in optimized_modules(dump_dir):
        tables.setdefault(module, {}).update(instruction_table(text))
    return tables


def fused_hlo(dump_dir, module, names, max_lines=80):
    """dict instruction name -> {"instruction": its line, "computation": the lines of the computation it calls}
    for `names` of `module`'s optimized HLO: what each of the step's costliest kernels computes, kept beside its
    time so that the next change can be planned without the GPU."""
    wanted, found = set(names), {}
    for name, text in optimized_modules(dump_dir):
        if name != module:
            continue
        computations, _ = parse_computations(text)
        for instructions in computations.values():
            for _, line in instructions:
                name = _NAME.match(line)
                if name and name.group(1) in wanted and name.group(1) not in found:
                    called = called_computations(line)
                    body = [text_line.strip()[:300] for _, text_line in computations.get(called[0], [])] if called else []
                    found[name.group(1)] = {"instruction": line.strip()[:600], "computation": body[:max_lines]}
    return found


def categorise(opcode, line, inner, kernel_name=""):
    """The category of one HLO instruction (and, where it says more, the kernel's own name)."""
    kernel = kernel_name.lower()
    if opcode == "custom-call":
        target = custom_call_target(line).lower()
        if "fmha" in target or "flash" in target:
            return "attention (cuDNN fused)"
        if "gemm" in target or "matmul" in target or "cublas" in target:
            return "matmul"
        return "other"
    if opcode in ("dot", "convolution") or inner.get("dot") or inner.get("convolution") or "gemm" in kernel:
        return "matmul"
    if opcode in _COMMUNICATION:
        return "communication"
    if opcode in ("copy", "transpose", "copy-start", "copy-done", "dynamic-update-slice"):
        return "copies and transposes"
    if opcode == "fusion":
        if inner.get("rsqrt"):
            return "layer_norm"
        if inner.get("erf") or (inner.get("tanh") and inner.get("multiply", 0) >= 3):
            return "gelu"
        if inner.get("sqrt"):
            return "optimizer update"
        if inner.get("xor") or inner.get("rng-bit-generator") or inner.get("shift-right-logical"):
            return "dropout random bits"
        if inner.get("reduce") and inner.get("exponential"):
            return "softmax and loss"
        if inner.get("reduce"):
            return "other reductions"
        if inner.get("transpose") and len(inner) <= 3:
            return "copies and transposes"
        return "element-wise"
    if opcode in ("rng-bit-generator",):
        return "dropout random bits"
    if opcode in ("reduce",):
        return "other reductions"
    return "other"


def kernel_events(trace):
    """The trace's kernel events: on a device (GPU) its stream lines, else (CPU) the host's XLA thunks."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    processes, threads = {}, {}
    for event in events:
        if event.get("ph") == "M" and event.get("name") == "process_name":
            processes[event["pid"]] = event.get("args", {}).get("name", "")
        if event.get("ph") == "M" and event.get("name") == "thread_name":
            threads[(event["pid"], event.get("tid"))] = event.get("args", {}).get("name", "")
    complete = [e for e in events if e.get("ph") == "X" and not e.get("name", "").startswith("end: ")]
    devices = {pid for pid, name in processes.items() if name.startswith("/device:")}
    if devices:
        on_device = [e for e in complete if e["pid"] in devices]
        streams = [e for e in on_device if "stream" in threads.get((e["pid"], e.get("tid")), "").lower()]
        chosen = streams or [e for e in on_device if threads.get((e["pid"], e.get("tid")), "") == "XLA Ops"]
    else:
        chosen = [e for e in complete if "hlo_op" in e.get("args", {})]
    lines = collections.Counter(threads.get((e["pid"], e.get("tid")), str(e.get("tid"))) for e in chosen)
    return chosen, {"processes": sorted(set(processes.values())), "kernel_lines": dict(lines.most_common(8))}


def sanitized(name):
    """An HLO instruction's name as XLA names its GPU kernel: `loop_multiply_fusion.3` -> `loop_multiply_fusion_3`."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


_LIBRARY_KERNELS = (  # kernels of cuBLAS / CUTLASS and cuDNN, named by the library rather than by XLA
    (re.compile(r"fmha|sdpa|flash|cudnn", re.I), "attention (cuDNN fused)"),
    (re.compile(r"gemm|gemv|nvjet|xmma|cutlass|cublas", re.I), "matmul"),
    (re.compile(r"^memcpy|^memset", re.I), "copies and transposes"),
)


def summarise(events, tables, steps, module_prefix="jit_"):
    """Per-category and per-kernel device time (ms per step) of the kernel events.

    Each kernel is matched to its HLO instruction by the trace's `hlo_op`, or, where that names a command
    buffer (a CUDA graph: XLA replays many instructions' kernels under one `command_buffer` op), by the
    kernel's own name, which XLA derives from the instruction's (`sanitized`). cuBLAS and cuDNN kernels
    keep their library's names and are told apart by them.
    """
    by_kernel = collections.defaultdict(lambda: {"us": 0.0, "kernels": 0})
    first, last = None, None
    for event in events:
        args = event.get("args", {})
        module = re.sub(r"\(.*$", "", str(args.get("hlo_module", "")))
        if module and not module.startswith(module_prefix):
            continue
        entry = by_kernel[(module, args.get("hlo_op") or event.get("name", ""), event.get("name", ""))]
        entry["us"] += float(event.get("dur", 0.0))
        entry["kernels"] += 1
        start, end = float(event["ts"]), float(event["ts"]) + float(event.get("dur", 0.0))
        first = start if first is None else min(first, start)
        last = end if last is None else max(last, end)
    by_sanitized = {module: {sanitized(name): name for name in table} for module, table in tables.items()}
    categories = {name: {"ms_per_step": 0.0, "kernels_per_step": 0.0} for name in CATEGORIES}
    ops = []
    for (module, op, kernel), entry in by_kernel.items():
        table = tables.get(module) or {}
        instruction = op if op in table and "command_buffer" not in op else None
        if instruction is None:
            instruction = (by_sanitized.get(module) or {}).get(sanitized(kernel))
        if instruction is not None:
            opcode, line, inner = table[instruction]
            category = categorise(opcode, line, inner, kernel)
        else:
            opcode, instruction = "?", op
            category = next((name for pattern, name in _LIBRARY_KERNELS if pattern.search(kernel)), "unknown")
        categories[category]["ms_per_step"] += entry["us"] / 1000 / steps
        categories[category]["kernels_per_step"] += entry["kernels"] / steps
        ops.append({"module": module, "op": instruction, "opcode": opcode, "category": category,
                    "ms_per_step": entry["us"] / 1000 / steps, "kernels_per_step": entry["kernels"] / steps,
                    "kernel": kernel[:120]})
    busy = sum(c["ms_per_step"] for c in categories.values())
    for values in categories.values():
        values["share_of_busy"] = values["ms_per_step"] / busy if busy else 0.0
    span = (last - first) / 1000 / steps if first is not None else 0.0
    ops.sort(key=lambda o: -o["ms_per_step"])
    return {
        "device_busy_ms_per_step": busy,
        "device_span_ms_per_step": span,
        "categories": {name: values for name, values in categories.items() if values["kernels_per_step"]},
        "ops": ops,
    }


def _rounded(value):
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_step_arguments(parser)
    parser.add_argument("--steps", type=int, default=5, help="profiled training steps")
    parser.add_argument("--warmup_steps", type=int, default=3, help="steps before the profile (the first compiles)")
    parser.add_argument("--output", default=None, help="also write the JSON line to this file")
    parser.add_argument("--ops_output", default=None,
                        help="write every instruction's time (JSON) to this file, with the optimized HLO of the "
                             "--hlo_ops costliest ones")
    parser.add_argument("--hlo_ops", type=int, default=40,
                        help="how many of the costliest instructions get their HLO in --ops_output")
    parser.add_argument("--keep_trace", default=None, metavar="DIR", help="keep the profile and the HLO dump here")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup_steps < 1:
        parser.error(f"--steps {args.steps} / --warmup_steps {args.warmup_steps}: expected at least 1 each")
    return args


def main(argv=None):
    args = parse_args(argv)
    work = pathlib.Path(args.keep_trace or tempfile.mkdtemp(prefix="step_profile_"))
    dump = work / "hlo"
    keras = start_jax_with_dump(dump, args, "reads JAX profiles")
    import jax

    from backbone_speed import model_flops_per_sequence

    model, x, y, config = build_step(args)

    def steps(count):
        for _ in range(count):
            logs = model.train_on_batch(x, y)
        jax.block_until_ready(logs)  # train_on_batch returns host floats; this also waits for any async work

    steps(args.warmup_steps)
    start = time.perf_counter()
    steps(args.steps)
    unprofiled = (time.perf_counter() - start) / args.steps * 1000
    trace_dir = work / "trace"
    with jax.profiler.trace(str(trace_dir), create_perfetto_trace=True):
        start = time.perf_counter()
        steps(args.steps)
        wall = (time.perf_counter() - start) / args.steps * 1000
    traces = sorted(trace_dir.rglob("perfetto_trace.json.gz"))
    if not traces:
        raise SystemExit(f"error: the profiler wrote no perfetto_trace.json.gz under {trace_dir}")
    with gzip.open(traces[-1], "rt") as handle:
        events, lines = kernel_events(json.load(handle))
    tables = module_tables(dump)
    if "jit_train_step" not in tables:
        raise SystemExit(f"error: no jit_train_step module was dumped to {dump}")
    summary = summarise(events, tables, args.steps)
    if not summary["ops"]:
        raise SystemExit(f"error: the profile under {trace_dir} holds no kernels of the training step ({lines})")
    flops = model_flops_per_sequence(config, args.sequence_length, args.predictions, training=True) * args.batch_size
    h, n, s = config["hidden_dim"], config["num_layers"], args.sequence_length
    attention_flops = 3 * n * 2 * 2 * s * s * h * args.batch_size
    matmul_ms = summary["categories"].get("matmul", {}).get("ms_per_step", 0.0)
    result = {
        "benchmark": "step_profile",
        "device": str(jax.devices()[0]),
        "jax": jax.__version__,
        "keras": keras.__version__,
        **step_settings(args),
        "steps": args.steps,
        "unprofiled_wall_ms_per_step": unprofiled,
        "wall_ms_per_step": wall,
        "device_busy_ms_per_step": summary["device_busy_ms_per_step"],
        "device_idle_ms_per_step": max(wall - summary["device_busy_ms_per_step"], 0.0),
        "device_span_ms_per_step": summary["device_span_ms_per_step"],
        "sequences_per_second_unprofiled": args.batch_size / unprofiled * 1000,
        "model_tflops": flops / (unprofiled / 1000) / 1e12,
        "matmul_tflops": flops / (matmul_ms / 1000) / 1e12 if matmul_ms else None,
        "attention_flops_share": attention_flops / flops,
        "categories": dict(sorted(summary["categories"].items(), key=lambda kv: -kv[1]["ms_per_step"])),
        "top_ops": [{k: o[k] for k in ("op", "category", "ms_per_step", "kernels_per_step", "kernel")}
                    for o in summary["ops"][:15]],
        "trace": lines,
    }
    line = json.dumps(_rounded(result))
    print(line)
    if args.output:
        pathlib.Path(args.output).write_text(line + "\n")
    if args.ops_output:
        costly = [o for o in summary["ops"] if o["opcode"] != "?"][: args.hlo_ops]
        hlo = {module: fused_hlo(dump, module, [o["op"] for o in costly if o["module"] == module])
               for module in {o["module"] for o in costly}}
        ops = [dict(o, hlo=hlo[o["module"]][o["op"]]) if o in costly and o["op"] in hlo[o["module"]] else o
               for o in summary["ops"]]
        pathlib.Path(args.ops_output).write_text(json.dumps(_rounded(ops)) + "\n")
    return result


if __name__ == "__main__":
    main()
