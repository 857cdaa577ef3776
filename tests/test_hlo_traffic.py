"""benchmarks/hlo_traffic.py: the bytes each kernel of the training step moves, compiled for an H100 without one."""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

HLO = """HloModule jit_train_step

%fused_gelu (p0: bf16[4,8], p1: bf16[8]) -> bf16[4,8] {
  %p0 = bf16[4,8]{1,0} parameter(0)
  %p1 = bf16[8]{0} parameter(1)
  %b = bf16[4,8]{1,0} broadcast(%p1), dimensions={1}
  %a = bf16[4,8]{1,0} add(%p0, %b)
  %t = bf16[4,8]{1,0} tanh(%a)
  %m = bf16[4,8]{1,0} multiply(%a, %t)
  %m2 = bf16[4,8]{1,0} multiply(%m, %t)
  ROOT %m3 = bf16[4,8]{1,0} multiply(%m2, %a)
}

ENTRY %main.1 (x: bf16[4,16], w: bf16[16,8], bias: bf16[8]) -> (bf16[4,8], f32[]) {
  %x = bf16[4,16]{1,0} parameter(0)
  %w = bf16[16,8]{1,0} parameter(1)
  %bias = bf16[8]{0} parameter(2)
  %dot.1 = bf16[4,8]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(train_step)/jvp(bert_backbone)/transformer_layer_0/intermediate/dot_general"}
  %gelu.1 = bf16[4,8]{1,0} fusion(%dot.1, %bias), kind=kLoop, calls=%fused_gelu, metadata={op_name="jit(train_step)/jvp(bert_backbone)/transformer_layer_0/mul"}
  %gelu.2 = bf16[4,8]{1,0} fusion(%dot.1, %bias), kind=kLoop, calls=%fused_gelu, metadata={op_name="jit(train_step)/jvp(bert_backbone)/transformer_layer_1/mul"}
  %c = f32[] constant(0)
  ROOT %t = (bf16[4,8]{1,0}, f32[]) tuple(%gelu.1, %c)
}
"""


def test_bytes_per_kernel_and_per_category_from_the_optimized_hlo():
    from hlo_traffic import kernel_traffic, shape_bytes, summarise_traffic

    assert shape_bytes("(bf16[256,128,3072]{2,1,0}, pred[4]{0}, f32[])") == 256 * 128 * 3072 * 2 + 4 + 4
    kernels = kernel_traffic(HLO)
    assert [(k["name"], k["category"], k["bytes_in"], k["bytes_out"]) for k in kernels] == [
        ("dot.1", "matmul", 4 * 16 * 2 + 16 * 8 * 2, 4 * 8 * 2),
        ("gelu.1", "gelu", 4 * 8 * 2 + 8 * 2, 4 * 8 * 2),
        ("gelu.2", "gelu", 4 * 8 * 2 + 8 * 2, 4 * 8 * 2),
    ]
    summary = summarise_traffic(kernels, bytes_per_s=1e9, top=5)
    gelu_bytes = 2 * (4 * 8 * 2 + 8 * 2 + 4 * 8 * 2)
    assert summary["traffic"]["gelu"] == {"kernels": 2, "gb": round(gelu_bytes / 1e9, 6),
                                          "roofline_ms": round(gelu_bytes / 1e9 * 1e3, 3)}
    assert summary["memory_bound_gb"] == round(gelu_bytes / 1e9, 6)  # matmuls are not memory-bound kernels
    # The two encoder blocks' GELUs are one source (after the matmul, which moves more bytes).
    assert [source["category"] for source in summary["top_sources"]] == ["matmul", "gelu"]
    assert summary["top_sources"][1] == {"source": "jit(train_step)/jvp(bert_backbone)/transformer_layer_*/mul",
                                         "category": "gelu", "kernels": 2, "gb": round(gelu_bytes / 1e9, 6)}


def _run(tmp_path, *args, batch_size=2, sequence_length=32):
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "hlo_traffic.py"), "--config", "tiny", "--batch_size",
         str(batch_size), "--sequence_length", str(sequence_length), "--predictions", "4",
         "--output", str(tmp_path / "out.json"), *args],
        env=env, capture_output=True, text=True, timeout=600,
    )


@pytest.mark.slow
def test_tiny_step_on_the_local_cpu_and_the_recomputed_activation_moves_fewer_bytes(tmp_path):
    lines = {}
    for setting in ("on", "off"):
        result = _run(tmp_path, "--target", "local", "--recompute_activation", setting)
        assert result.returncode == 0, result.stderr[-3000:]
        lines[setting] = json.loads((tmp_path / "out.json").read_text())
    line = lines["on"]
    assert line["target"] == "local" and line["recompute_activation"] == "on"
    assert line["traffic"]["matmul"]["kernels"] >= 12 and line["total_gb"] > line["memory_bound_gb"] > 0
    assert sum(c["kernels"] for c in line["traffic"].values()) == line["kernels_total"]
    assert len(line["top_sources"]) == 25


_CUDA_PLUGIN = any(importlib.util.find_spec(f"jax_plugins.xla_cuda{v}") for v in (12, 13)) \
    if importlib.util.find_spec("jax_plugins") else False


@pytest.mark.skipif(_CUDA_PLUGIN, reason="the CUDA plugin is installed here")
def test_h100_target_without_the_cuda_plugin_says_what_to_install(tmp_path):
    result = _run(tmp_path, "--target", "h100")
    assert result.returncode != 0
    assert "error: --target h100: JAX cannot compile for a CUDA GPU here (" in result.stderr
    assert result.stderr.rstrip().endswith(
        'install the CUDA plugin (pip install "jax[cuda13]"; no GPU needed), or use --target local')


@pytest.mark.multibackend  # the script runs on JAX whatever the suite's backend: KERAS_BACKEND=jax runs it too
@pytest.mark.skipif(not _CUDA_PLUGIN, reason='needs the CUDA plugin (pip install "jax[cuda13]"), not a GPU')
def test_deviceless_h100_compile_runs_cudnn_attention_and_recomputes_gelu(tmp_path):
    lines = {}
    for setting in ("on", "off"):
        result = _run(tmp_path, "--target", "h100", "--mixed_precision", "bf16", "--attention_dropout", "0",
                      "--attention_padding", "lengths", "--recompute_activation", setting, batch_size=32,
                      sequence_length=128)
        assert result.returncode == 0, result.stderr[-3000:]
        lines[setting] = json.loads((tmp_path / "out.json").read_text())
    assert lines["on"]["traffic"]["attention (cuDNN fused)"]["kernels"] == 4  # 2 blocks, forward and backward
    assert lines["on"]["memory_bound_gb"] < lines["off"]["memory_bound_gb"]


def test_library_calls_are_counted_and_fp8_matmuls_named():
    from hlo_traffic import custom_call_counts, kernel_traffic

    entry = """HloModule jit_train_step

ENTRY %main.2 (a: f8e4m3fn[32,16], b: f8e4m3fn[8,16], s: f32[]) -> bf16[32,8] {
  %a = f8e4m3fn[32,16]{1,0} parameter(0)
  %b = f8e4m3fn[8,16]{1,0} parameter(1)
  %s = f32[] parameter(2)
  %gemm.1 = (bf16[32,8]{1,0}, s8[64]{0}) custom-call(%a, %b, %s, %s), custom_call_target="__cublas$lt$matmul$f8", metadata={op_name="jit(train_step)/jvp(bert_backbone)/transformer_layer_0/qkv/dot_general"}
  %gemm.2 = (bf16[32,8]{1,0}, s8[64]{0}) custom-call(%a, %b, %s, %s), custom_call_target="__cublas$lt$matmul$f8", metadata={op_name="jit(train_step)/jvp(bert_backbone)/transformer_layer_1/qkv/dot_general"}
  ROOT %gte = bf16[32,8]{1,0} get-tuple-element(%gemm.2), index=0
}
"""
    kernels = kernel_traffic(entry)
    assert [kernel["target"] for kernel in kernels] == ["__cublas$lt$matmul$f8"] * 2
    assert kernels[0]["bytes_in"] == 32 * 16 + 8 * 16 + 4 + 4 and kernels[0]["bytes_out"] == 32 * 8 * 2 + 64
    assert custom_call_counts(kernels) == {"custom_calls": {"__cublas$lt$matmul$f8": 2}, "float8_matmul_calls": 2}


@pytest.mark.multibackend
@pytest.mark.skipif(not _CUDA_PLUGIN, reason='needs the CUDA plugin (pip install "jax[cuda13]"), not a GPU')
def test_deviceless_h100_compile_turns_keras_float8_into_cublaslt_fp8_matmuls(tmp_path, monkeypatch):
    """`--float8 on` without Triton GEMMs: each of the 2 blocks' 4 matmuls is an FP8 cuBLASLt call forward and for
    both gradients (24), and the matmuls move fewer bytes than in bf16."""
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_enable_triton_gemm=false")
    lines = {}
    for setting in ("on", "off"):
        result = _run(tmp_path, "--target", "h100", "--mixed_precision", "bf16", "--attention_dropout", "0",
                      "--attention_padding", "lengths", "--float8", setting, batch_size=32, sequence_length=128)
        assert result.returncode == 0, result.stderr[-3000:]
        lines[setting] = json.loads((tmp_path / "out.json").read_text())
    assert lines["on"]["float8"] == "on" and lines["on"]["float8_matmul_calls"] == 24
    assert lines["on"]["xla_flags"] == "--xla_gpu_enable_triton_gemm=false"
    assert lines["off"]["float8_matmul_calls"] == 0
    assert lines["on"]["traffic"]["matmul"]["gb"] < lines["off"]["traffic"]["matmul"]["gb"]


@pytest.mark.multibackend
@pytest.mark.skipif(not _CUDA_PLUGIN, reason='needs the CUDA plugin (pip install "jax[cuda13]"), not a GPU')
def test_deviceless_mask_path_gets_cudnn_attention_only_where_keras_is_told_the_device_allows_it(tmp_path):
    """Keras asks the device it runs on (the CPU here) whether cuDNN's attention can run: no fused call by default,
    cuDNN's bias variant (forward and backward in each of the 2 blocks) with `--assume_keras_cudnn_attention`."""
    calls = {}
    for assume in (False, True):
        result = _run(tmp_path, "--target", "h100", "--mixed_precision", "bf16", "--attention_dropout", "0",
                      "--attention_padding", "mask", *(["--assume_keras_cudnn_attention"] if assume else []),
                      batch_size=32, sequence_length=128)
        assert result.returncode == 0, result.stderr[-3000:]
        line = json.loads((tmp_path / "out.json").read_text())
        assert line["assume_keras_cudnn_attention"] is assume
        calls[assume] = {target: n for target, n in line["custom_calls"].items() if "cudnn$fmha" in target}
    assert calls == {False: {}, True: {"__cudnn$fmhaScaleBiasSoftmax": 2, "__cudnn$fmhaScaleBiasSoftmaxBackward": 2}}


def test_assume_keras_cudnn_attention_refuses_a_keras_without_the_check_it_answers_for():
    """The flag replaces a private Keras function; a Keras without it is one line, not a silent no-op."""
    code = ("import sys; sys.path.insert(0, 'benchmarks'); import hlo_traffic, keras; "
            "from keras.src.backend.jax import nn; del nn._can_use_flash_attention; "
            "hlo_traffic.main(['--target', 'local', '--assume_keras_cudnn_attention'])")
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    import keras

    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.rstrip().splitlines()[-1] == (
        f"error: --assume_keras_cudnn_attention: Keras {keras.__version__} has no "
        "keras.src.backend.jax.nn._can_use_flash_attention to answer for")
