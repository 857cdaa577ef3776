"""Scaling model: BERT pretraining sequences/s on 1 to 1,024 accelerators (data parallel), and its CPU check.

Prints one JSON line. The prediction (default) needs no accelerator:

    python benchmarks/scaling_model.py
    python benchmarks/scaling_model.py --measure_cpu      # + 1 vs 2 processes / devices on this CPU

The model, per optimizer micro-step of a data-parallel run (every device holds all weights, takes
`--per_device_batch` sequences, and the gradients are all-reduced once per step inside the compiled step):

    step = compute + allreduce          (no overlap; `overlap_bound` = max(compute, allreduce))
    compute = per_device_batch / single_device_seq_per_s
    allreduce(G bytes, N devices): a bandwidth-optimal ring, 2 (N-1)/N G / B + 2 (N-1) latency:
      - N <= 8 GPUs (one node): over NVLink, B = --nvlink_GBps / 2 each way;
      - N > 8: hierarchical (as NCCL does on 8-GPU nodes with one NIC per GPU): reduce-scatter over NVLink,
        a ring all-reduce of G/8 per GPU across the N/8 nodes over that GPU's InfiniBand port
        (B = --ib_Gbps / 8 bytes each way), all-gather over NVLink;
      - TPU: a pod slice's 3-D torus: the ring bandwidth term with B = --ici_Gbps / 8 / 2 each way (all links
        of a chip), and the latency of one ring per torus dimension, 2 (x-1 + y-1 + z-1) latency.
    seq/s = N per_device_batch / step, capped by the input pipeline: --input_cores_per_accelerator
      x the measured examples per CPU-second (benchmarks/input_pipeline.py).

Inputs (each a flag; the defaults are what this repository measured or the vendors publish):
- single-device training speed: BERT-base, seq 128, batch 64, bf16, JAX, one H100 = 2,132 seq/s
  (docs/benchmarks.md, session 5). BERT-large: the same fraction of peak, so 2,132 x FLOPs(base) / FLOPs(large).
- gradient bytes: the trainable parameters of `BertPretrainer` on the preset (the backbone count of the preset
  table, tested equal to `count_params()`, plus the MLM and NSP heads; checked against a built tiny model)
  x 4 bytes (float32 gradients; `--gradient_bytes 2` for bf16 all-reduce).
- links: NVLink 900 GB/s per H100 (both directions), 400 Gb/s InfiniBand NDR per GPU, TPU v5p ICI 4,800 Gb/s per
  chip; latencies 5 us (NVLink hop), 10 us (IB hop), 5 us (ICI hop).
- input pipeline: `--input_examples_per_core_second` (default: benchmarks/input_pipeline.py on this machine's CPU).

`--measure_cpu` checks the same formula where it can be checked here: it times the training step of the tiny
pretrainer on one CPU core, and the all-reduce of its gradient-shaped arrays between 2 JAX processes (gloo) and
between 2 devices of one process, predicts the 2-way step as one-core step + all-reduce, and times the real
2-way steps (`--strategy multiworker` style: 2 processes x 1 device; and 1 process x 2 devices).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PRESETS = {"bert_base": "bert_base_en_uncased", "bert_large": "bert_large_en_uncased"}
ACCELERATORS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


# ---------------------------------------------------------------------------------------------- the model

def head_parameters(config):
    """Trainable weights of BertPretrainer's heads: MLM transform + LayerNorm + output bias (tied), NSP dense."""
    h, v = config["hidden_dim"], config["vocabulary_size"]
    return (h * h + h) + 2 * h + v + (2 * h + 2)


def pretrainer_parameters(preset):
    from keras_bert_impl.presets import backbone_presets

    entry = backbone_presets[preset]
    return entry["metadata"]["params"] + head_parameters(entry["config"])


def check_parameter_formula():
    """Builds the tiny `BertPretrainer` and compares `count_params()` with the formula (True when equal)."""
    from keras_bert_impl.models.backbone import BertBackbone
    from keras_bert_impl.models.pretrainer import BertPretrainer

    model = BertPretrainer(BertBackbone.from_preset("bert_tiny_en_uncased", load_weights=False))
    import numpy as np

    batch = {"token_ids": np.zeros((1, 8), "int32"), "segment_ids": np.zeros((1, 8), "int32"),
             "padding_mask": np.ones((1, 8), "int32"), "mask_positions": np.zeros((1, 2), "int32")}
    model(batch)
    built = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
    return built, pretrainer_parameters("bert_tiny_en_uncased")


def training_flops_per_sequence(config, sequence_length, predictions):
    """Matmul FLOPs of one training sequence (forward x 3), as benchmarks/backbone_speed.py counts them."""
    h, i, n, v = config["hidden_dim"], config["intermediate_dim"], config["num_layers"], config["vocabulary_size"]
    per_layer = 2 * sequence_length * (4 * h * h + 2 * h * i) + 2 * 2 * sequence_length * sequence_length * h
    forward = n * per_layer + 2 * h * h + predictions * (2 * h * h + 2 * h * v) + 2 * h * 2
    return 3 * forward


def ring_allreduce_seconds(nbytes, n, bandwidth_bytes_per_s, latency_s):
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes / bandwidth_bytes_per_s + 2 * (n - 1) * latency_s


def gpu_allreduce_seconds(nbytes, n, args):
    nvlink = args.nvlink_GBps * 1e9 / 2  # each direction
    ib = args.ib_Gbps * 1e9 / 8  # bytes/s, each direction, per GPU
    per_node = args.gpus_per_node
    if n <= per_node:
        return ring_allreduce_seconds(nbytes, n, nvlink, args.nvlink_latency_us * 1e-6)
    nodes = n // per_node
    intra = (per_node - 1) / per_node * nbytes / nvlink + (per_node - 1) * args.nvlink_latency_us * 1e-6
    inter = ring_allreduce_seconds(nbytes / per_node, nodes, ib, args.ib_latency_us * 1e-6)
    return 2 * intra + inter  # reduce-scatter + all-gather inside the node, all-reduce of a 1/8 shard across


def torus_dims(n):
    """A 3-D torus of `n` chips as TPU pod slices are cut (dimensions powers of two, as equal as possible)."""
    dims = [1, 1, 1]
    while n > 1:
        dims[dims.index(min(dims))] *= 2
        n //= 2
    return sorted(dims)


def tpu_allreduce_seconds(nbytes, n, args):
    """Bandwidth of a ring using every ICI link of a chip; latency of one ring per torus dimension."""
    if n <= 1:
        return 0.0
    bandwidth = 2 * (n - 1) / n * nbytes / (args.ici_Gbps * 1e9 / 8 / 2)
    return bandwidth + 2 * sum(d - 1 for d in torus_dims(n)) * args.ici_latency_us * 1e-6


def predict(args):
    from keras_bert_impl.presets import backbone_presets

    flops = {name: training_flops_per_sequence(backbone_presets[preset]["config"], args.sequence_length,
                                               args.predictions) for name, preset in PRESETS.items()}
    device_rate = {name: args.single_device_seq_per_s * flops["bert_base"] / flops[name] for name in PRESETS}
    tpu_rate = {name: rate * args.tpu_peak_tflops / args.gpu_peak_tflops for name, rate in device_rate.items()}
    models = {}
    for name, preset in PRESETS.items():
        params = pretrainer_parameters(preset)
        nbytes = params * args.gradient_bytes
        rows = []
        for platform, rate, allreduce in (("h100_nvlink_ib", device_rate[name], gpu_allreduce_seconds),
                                          ("tpu_v5p_ici", tpu_rate[name], tpu_allreduce_seconds)):
            compute = args.per_device_batch / rate
            for n in ACCELERATORS:
                comm = allreduce(nbytes, n, args)
                step = compute + comm
                seq_s = n * args.per_device_batch / step
                input_cap = n * args.input_cores_per_accelerator * args.input_examples_per_core_second
                rows.append({
                    "platform": platform, "accelerators": n, "global_batch": n * args.per_device_batch,
                    "compute_ms": round(compute * 1e3, 3), "allreduce_ms": round(comm * 1e3, 3),
                    "seq_per_s": round(min(seq_s, input_cap), 1),
                    "efficiency": round(seq_s / (n * rate), 3),
                    "overlap_bound_seq_per_s": round(min(n * args.per_device_batch / max(compute, comm), input_cap), 1),
                    "input_cores_needed_per_accelerator": round(seq_s / n / args.input_examples_per_core_second, 3),
                    "input_bound": seq_s > input_cap,
                })
        # Past the largest global batch that trains well (--max_global_batch, LAMB's 65,536), more devices only
        # shrink the per-device batch: compute per step falls (taken as proportional to the batch, optimistic
        # for small batches) while the all-reduce does not.
        beyond = []
        for n in (1024, 2048, 4096, 8192):
            batch = args.max_global_batch / n
            compute = batch / device_rate[name]
            comm = gpu_allreduce_seconds(nbytes, n, args)
            beyond.append({"platform": "h100_nvlink_ib", "accelerators": n, "global_batch": args.max_global_batch,
                           "per_device_batch": batch, "compute_ms": round(compute * 1e3, 3),
                           "allreduce_ms": round(comm * 1e3, 3),
                           "seq_per_s": round(args.max_global_batch / (compute + comm), 1),
                           "efficiency": round(compute / (compute + comm), 3)})
        models[name] = {"preset": preset, "trainable_parameters": params, "gradient_bytes_per_step": nbytes,
                        "fixed_global_batch_rows": beyond,
                        "training_gflops_per_sequence": round(flops[name] / 1e9, 2),
                        "single_device_seq_per_s": {"h100": round(device_rate[name], 1),
                                                    "tpu_v5p": round(tpu_rate[name], 1)},
                        "rows": rows}
    return models


# ------------------------------------------------------------------------------------ the CPU check

def _child_env(devices=1):
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="", PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("XLA_FLAGS", None)
    if devices > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return env


def _child(args, mode, cores, processes=1, devices=1, timeout=600, independent=False):
    """Runs `--child MODE` in `processes` processes (pinned: process i to core i, or to `cores` cores).

    `independent`: the processes run at the same time but each alone (no `jax.distributed`).
    """
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    procs = []
    for index in range(processes):
        command = [sys.executable, os.path.abspath(__file__), "--child", mode, "--child_cores", cores if processes == 1
                   else str(index), "--child_cluster", f"127.0.0.1:{port},{1 if independent else processes},{0 if independent else index}",
                   "--cpu_batch", str(args.cpu_batch), "--cpu_sequence_length", str(args.cpu_sequence_length),
                   "--cpu_steps", str(args.cpu_steps)]
        procs.append(subprocess.Popen(command, env=_child_env(devices), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outputs = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=timeout)
            if proc.returncode:
                raise SystemExit(f"{mode} failed:\n{stderr[-3000:]}")
            outputs.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return outputs[0]


def run_child(args):
    """One measurement in this process (JAX on CPU): `step`, or `allreduce` of the gradient-shaped arrays."""
    cores = [int(c) for c in args.child_cores.split(",")]
    os.sched_setaffinity(0, set(cores))
    address, count, index = args.child_cluster.split(",")
    count, index = int(count), int(index)
    import jax
    import numpy as np

    if count > 1:
        from keras_bert_impl.training.jax_processes import initialize_jax_processes

        initialize_jax_processes(address, count, index)
    import keras

    from keras_bert_impl.models.backbone import BertBackbone
    from keras_bert_impl.models.pretrainer import BertPretrainer
    from keras_bert_impl.training.optimizer import create_optimizer
    from keras_bert_impl.training.strategy import JaxDataParallelStrategy, SingleDeviceStrategy

    devices = jax.device_count()
    strategy = JaxDataParallelStrategy(keras.distribution.list_devices(), num_processes=count) if devices > 1 \
        else SingleDeviceStrategy()
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = BertPretrainer(BertBackbone.from_preset("bert_tiny_en_uncased", load_weights=False, dropout=0.0))
        model.compile(optimizer=create_optimizer(1e-4, 1000, 10), jit_compile=True)
    local_batch = args.cpu_batch * jax.local_device_count()
    length, predictions = args.cpu_sequence_length, max(1, args.cpu_sequence_length // 8)
    rng = np.random.default_rng(index)
    steps = args.cpu_steps + 3
    n = steps * local_batch
    x = {"token_ids": rng.integers(1000, 30000, (n, length)).astype("int32"),
         "segment_ids": np.zeros((n, length), "int32"), "padding_mask": np.ones((n, length), "int32"),
         "mask_positions": np.sort(rng.integers(1, length, (n, predictions)), 1).astype("int32")}
    y = {"mlm": rng.integers(1000, 30000, (n, predictions)).astype("int32"), "nsp": rng.integers(0, 2, n).astype("int32")}

    if args.child == "allreduce":
        # The gradient all-reduce alone: arrays of the trainable variables' shapes, one per device, summed over
        # the devices inside one compiled program (as the data-parallel train step does).
        model({k: v[:1] for k, v in x.items()})
        shapes = [tuple(v.shape) for v in model.trainable_variables]
        mesh = jax.sharding.Mesh(np.array(jax.devices()), ("batch",))
        sharded = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        local = [np.ones((jax.local_device_count(), *s), "float32") for s in shapes]
        arrays = [jax.make_array_from_process_local_data(sharded, a) for a in local]
        reduce = jax.jit(lambda xs: [a.sum(0) for a in xs], out_shardings=[replicated] * len(shapes))
        jax.block_until_ready(reduce(arrays))
        times = []
        for _ in range(args.cpu_steps * 3):
            start = time.perf_counter()
            jax.block_until_ready(reduce(arrays))
            times.append(time.perf_counter() - start)
        gradient_bytes = sum(int(np.prod(s)) * 4 for s in shapes)
        print(json.dumps({"mode": "allreduce", "devices": devices, "processes": jax.process_count(),
                          "arrays": len(shapes), "gradient_bytes": gradient_bytes,
                          "median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3}))
        return

    times = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.start)

    model.fit(x, y, batch_size=local_batch, epochs=1, shuffle=False, verbose=0, callbacks=[Clock()])
    timed = times[3:]  # the first steps compile
    print(json.dumps({"mode": "step", "devices": devices, "processes": jax.process_count(),
                      "global_batch": args.cpu_batch * devices, "median_ms": statistics.median(timed) * 1e3,
                      "min_ms": min(timed) * 1e3, "steps": len(timed)}))


def measure_cpu(args):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--measure_cpu needs 2 CPU cores")
    one, both = str(cpus[0]), f"{cpus[0]},{cpus[1]}"
    single = _child(args, "step", one)
    # The same one-device step with the other core busy with the same work: on this VM the two cores share
    # caches and memory bandwidth, so a device computes slower when its neighbour computes too.
    concurrent = _child(args, "step", None, processes=2, independent=True)
    ar_processes = _child(args, "allreduce", None, processes=2)
    ar_devices = _child(args, "allreduce", both, devices=2)
    step_processes = _child(args, "step", None, processes=2)
    step_devices = _child(args, "step", both, devices=2)
    result = {"model": "bert_tiny_en_uncased pretrainer", "per_device_batch": args.cpu_batch,
              "sequence_length": args.cpu_sequence_length, "gradient_bytes": ar_processes["gradient_bytes"],
              "one_core_step_ms": round(single["median_ms"], 2),
              "one_core_step_ms_both_cores_busy": round(concurrent["median_ms"], 2)}
    for name, ar, step in (("2_processes_x_1_device", ar_processes, step_processes),
                           ("1_process_x_2_devices", ar_devices, step_devices)):
        predicted = single["median_ms"] + ar["median_ms"]
        predicted_busy = concurrent["median_ms"] + ar["median_ms"]
        result[name] = {
            "allreduce_ms": round(ar["median_ms"], 2),
            "allreduce_GBps": round(ar["gradient_bytes"] / (ar["median_ms"] / 1e3) / 1e9, 3),
            "predicted_step_ms": round(predicted, 2), "measured_step_ms": round(step["median_ms"], 2),
            "measured_over_predicted": round(step["median_ms"] / predicted, 3),
            "predicted_step_ms_both_cores_busy": round(predicted_busy, 2),
            "measured_over_predicted_both_cores_busy": round(step["median_ms"] / predicted_busy, 3),
            "predicted_seq_per_s": round(step["global_batch"] / predicted * 1e3, 1),
            "measured_seq_per_s": round(step["global_batch"] / step["median_ms"] * 1e3, 1),
        }
    result["one_core_seq_per_s"] = round(args.cpu_batch / single["median_ms"] * 1e3, 1)
    result["load_average_1m"] = os.getloadavg()[0]
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--single_device_seq_per_s", type=float, default=2132.0,
                   help="measured BERT-base training seq/s on one device (H100, jax bf16, batch 64, seq 128)")
    p.add_argument("--per_device_batch", type=int, default=64)
    p.add_argument("--sequence_length", type=int, default=128)
    p.add_argument("--predictions", type=int, default=20)
    p.add_argument("--gradient_bytes", type=int, default=4, help="bytes per gradient element all-reduced")
    p.add_argument("--max_global_batch", type=int, default=65536,
                   help="largest global batch that trains well (LAMB, seq 128: You et al. 2020; NVIDIA phase 1)")
    p.add_argument("--gpus_per_node", type=int, default=8)
    p.add_argument("--nvlink_GBps", type=float, default=900.0, help="NVLink per GPU, both directions (H100)")
    p.add_argument("--ib_Gbps", type=float, default=400.0, help="InfiniBand per GPU, each direction (NDR)")
    p.add_argument("--ici_Gbps", type=float, default=4800.0, help="TPU ICI per chip, all links (v5p)")
    p.add_argument("--nvlink_latency_us", type=float, default=5.0)
    p.add_argument("--ib_latency_us", type=float, default=10.0)
    p.add_argument("--ici_latency_us", type=float, default=5.0)
    p.add_argument("--gpu_peak_tflops", type=float, default=989.0, help="H100 SXM dense bf16 peak")
    p.add_argument("--tpu_peak_tflops", type=float, default=459.0, help="TPU v5p bf16 peak (same fraction of peak)")
    p.add_argument("--input_examples_per_core_second", type=float, default=15763.0,
                   help="benchmarks/input_pipeline.py: seq-128 examples per CPU-second (this machine, 1 core)")
    p.add_argument("--input_cores_per_accelerator", type=float, default=4.0)
    p.add_argument("--measure_cpu", action="store_true", help="also run the 2-process / 2-device CPU check")
    p.add_argument("--cpu_batch", type=int, default=8, help="per-device batch of the CPU check")
    p.add_argument("--cpu_sequence_length", type=int, default=64)
    p.add_argument("--cpu_steps", type=int, default=12, help="timed steps of each CPU measurement")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--child_cores", default=None, help=argparse.SUPPRESS)
    p.add_argument("--child_cluster", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return run_child(args)
    sys.path.insert(0, REPO)
    built, formula = check_parameter_formula()
    result = {"benchmark": "scaling_model", "inputs": {k: v for k, v in vars(args).items()
                                                       if not k.startswith("child") and not k.startswith("cpu_")},
              "parameter_formula_check": {"tiny_built": built, "tiny_formula": formula, "equal": built == formula},
              "models": predict(args)}
    if args.measure_cpu:
        result["cpu_check"] = measure_cpu(args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
