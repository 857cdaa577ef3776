"""benchmarks/step_profile.py times the training step's kernels by category from a JAX profile (issue 18)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))


@pytest.mark.slow
def test_tiny_step_profile_on_the_cpu(tmp_path):
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu")
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "step_profile.py"), "--config", "tiny", "--batch_size", "2",
         "--sequence_length", "32", "--predictions", "4", "--steps", "2", "--warmup_steps", "1",
         "--output", str(tmp_path / "out.json"), "--ops_output", str(tmp_path / "ops.json"), "--hlo_ops", "1000"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = json.loads((tmp_path / "out.json").read_text())
    categories = line["categories"]
    # The kernels the HLO plans (tests/test_hlo_fusions.py), each found in the profile once per step:
    # 2 blocks x 2 LayerNorms + embeddings + masked-LM head; bias + GELU in each block and the masked-LM transform,
    # and once more in each block's backward pass, which recomputes it (recompute_activation).
    assert categories["layer_norm"]["kernels_per_step"] == 6
    assert categories["gelu"]["kernels_per_step"] == 5
    assert categories["optimizer update"]["kernels_per_step"] >= 38
    assert categories["matmul"]["ms_per_step"] > 0 and line["matmul_tflops"] > 0
    assert abs(sum(c["share_of_busy"] for c in categories.values()) - 1) < 1e-3
    assert line["device_busy_ms_per_step"] > 0 and line["wall_ms_per_step"] > 0
    assert "unknown" not in categories  # every timed kernel was found in the dump
    ops = json.loads((tmp_path / "ops.json").read_text())
    assert {op["category"] for op in ops} == set(categories)
    # The costliest instructions (here all of them) carry their optimized HLO: a LayerNorm fusion's computation
    # holds its rsqrt.
    with_hlo = [op for op in ops if "hlo" in op]
    without = [op for op in ops if op["opcode"] != "?" and "hlo" not in op]
    assert not without and len(with_hlo) > 40, without
    from step_profile import _NAME

    assert all(_NAME.match(op["hlo"]["instruction"]).group(1) == op["op"] for op in with_hlo)
    layer_norms = [op for op in with_hlo if op["category"] == "layer_norm" and op["opcode"] == "fusion"]
    assert layer_norms and all(any("rsqrt(" in line for line in op["hlo"]["computation"]) for op in layer_norms)


def test_device_kernels_are_read_from_the_stream_lines_only():
    from step_profile import kernel_events, summarise

    trace = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "name": "thread_name", "pid": 2, "tid": 7, "args": {"name": "Stream #13(Compute)"}},
        {"ph": "M", "name": "thread_name", "pid": 2, "tid": 8, "args": {"name": "XLA Ops"}},
        # The host's launch of the kernel and the derived "XLA Ops" line must not count again.
        {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "name": "gemm_thunk",
         "args": {"hlo_op": "gemm.1", "hlo_module": "jit_train_step"}},
        {"ph": "X", "pid": 2, "tid": 8, "ts": 10, "dur": 30, "name": "gemm.1", "args": {}},
        {"ph": "X", "pid": 2, "tid": 7, "ts": 10, "dur": 20, "name": "sm90_xmma_gemm_bf16bf16",
         "args": {"hlo_op": "gemm.1", "hlo_module": "jit_train_step(12)"}},
        {"ph": "X", "pid": 2, "tid": 7, "ts": 30, "dur": 10, "name": "loop_layer_norm",
         "args": {"hlo_op": "fusion.3", "hlo_module": "jit_train_step(12)"}},
    ]}
    events, lines = kernel_events(trace)
    assert [e["name"] for e in events] == ["sm90_xmma_gemm_bf16bf16", "loop_layer_norm"]
    assert lines["kernel_lines"] == {"Stream #13(Compute)": 2}
    tables = {"jit_train_step": {
        "gemm.1": ("custom-call", '%gemm.1 = custom-call(), custom_call_target="__cublas$lt$matmul"', {}),
        "fusion.3": ("fusion", "%fusion.3 = fusion(), kind=kInput, calls=%c", {"rsqrt": 1, "reduce": 2}),
    }}
    summary = summarise(events, tables, steps=1)
    assert summary["categories"]["matmul"]["ms_per_step"] == pytest.approx(0.020)
    assert summary["categories"]["layer_norm"]["ms_per_step"] == pytest.approx(0.010)
    assert summary["device_span_ms_per_step"] == pytest.approx(0.030)


def test_categories_of_instructions():
    from step_profile import categorise

    assert categorise("custom-call", 'custom_call_target="__cudnn$fmhaSoftmaxBackward"', {}) == \
        "attention (cuDNN fused)"
    assert categorise("fusion", "kind=kCustom", {"dot": 1, "convert": 2}) == "matmul"  # a Triton GEMM fusion
    assert categorise("fusion", "kind=kLoop", {"tanh": 1, "multiply": 4, "add": 2}) == "gelu"
    assert categorise("fusion", "kind=kLoop", {"sqrt": 1, "divide": 1}) == "optimizer update"
    assert categorise("fusion", "kind=kLoop", {"xor": 3, "shift-right-logical": 2}) == "dropout random bits"
    assert categorise("fusion", "kind=kInput", {"reduce": 1, "exponential": 1}) == "softmax and loss"
    assert categorise("copy", "", {}) == "copies and transposes"
    assert categorise("all-reduce", "", {}) == "communication"


def test_kernels_inside_a_command_buffer_are_matched_by_their_names():
    """An H100's step runs as CUDA graphs: the trace's `hlo_op` is `command_buffer_1` for ~1,100 kernels a step
    (session 19's first profile). XLA names a fusion's kernel after the instruction; cuBLAS and cuDNN kernels
    keep their library's names."""
    from step_profile import summarise

    def kernel(name, dur):
        return {"ph": "X", "pid": 2, "tid": 7, "ts": 0, "dur": dur, "name": name,
                "args": {"hlo_op": "command_buffer_1", "hlo_module": "jit_train_step"}}

    events = [kernel("loop_layer_norm_fusion_2", 10), kernel("nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNT", 40),
              kernel("cudnn_generated_fort_native_sdpa_sm90_knob_7", 20), kernel("some_new_kernel", 5)]
    tables = {"jit_train_step": {
        "loop_layer_norm_fusion.2": ("fusion", "%loop_layer_norm_fusion.2 = fusion(), kind=kInput", {"rsqrt": 1}),
        "command_buffer_1": ("command-buffer", "%command_buffer_1 = command-buffer()", {}),
    }}
    summary = summarise(events, tables, steps=1)
    categories = {name: values["ms_per_step"] for name, values in summary["categories"].items()}
    assert categories == pytest.approx({"layer_norm": 0.010, "matmul": 0.040, "attention (cuDNN fused)": 0.020,
                                        "unknown": 0.005})
    assert {op["kernel"]: op["op"] for op in summary["ops"]}["loop_layer_norm_fusion_2"] == "loop_layer_norm_fusion.2"
