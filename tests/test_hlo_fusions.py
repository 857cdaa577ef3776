"""benchmarks/hlo_fusions.py reads XLA's optimized training step: fusions of GELU, LayerNorm, dropout, AdamW."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_tiny_training_step_fusions_on_the_cpu(tmp_path):
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu")
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "hlo_fusions.py"), "--config", "tiny", "--batch_size", "2",
         "--sequence_length", "32", "--predictions", "4", "--output", str(tmp_path / "out.json")],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = json.loads((tmp_path / "out.json").read_text())
    assert line["hlo_file"].endswith("jit_train_step.cpu_after_optimizations.txt")
    assert line["kernels"]["fusion"] > 100 and line["kernels"]["dot"] >= 1
    # Bias + GELU fuse: one kernel in each of the 2 encoder blocks and in the masked-LM transform, and each block's
    # backward pass recomputes it (recompute_activation) in one more: 5, every one with its bias add.
    assert line["gelu"] == {"fusions": 5, "with_bias_add": 5}
    # 2 x (2 attention + output) LayerNorms + embeddings + masked-LM head = 6 normalisations.
    assert line["layer_norm"]["fusions_with_rsqrt"] == 6
    # Dropout at 7 places (embeddings; per block: attention probabilities, attention output, feed-forward output).
    assert line["dropout_rng"]["while_loops"] == 7
    # AdamW: one update kernel per trainable variable on XLA:CPU.
    assert line["optimizer"]["update_fusions_with_sqrt"] >= line["optimizer"]["trainable_variables"] == 38


def test_fused_attention_calls_are_counted_from_the_custom_call_targets():
    sys.path.insert(0, str(REPO / "benchmarks"))
    from hlo_fusions import analyse

    text = """HloModule jit_train_step

ENTRY %main.1 (p0: bf16[8,128,12,64]) -> bf16[8,128,12,64] {
  %p0 = bf16[8,128,12,64]{3,2,1,0} parameter(0)
  %fmha = (bf16[8,128,12,64]{3,2,1,0}, u8[0]{0}) custom-call(%p0, %p0, %p0), custom_call_target="__cudnn$fmhaSoftmax"
  %gemm = (bf16[8,128,12,64]{3,2,1,0}, s8[4]{0}) custom-call(%p0), custom_call_target="__cublas$lt$matmul"
  %back = (bf16[8,128,12,64]{3,2,1,0}, u8[0]{0}) custom-call(%p0, %p0), custom_call_target="__cudnn$fmhaSoftmaxBackward"
  %norm = (bf16[8,128,12,64]{3,2,1,0}, u8[0]{0}) custom-call(%p0), custom_call_target="__cudnn$norm"
  ROOT %out = bf16[8,128,12,64]{3,2,1,0} get-tuple-element(%fmha), index=0
}
"""
    result = analyse(text)
    assert result["custom_calls"] == {"__cudnn$fmhaSoftmax": 1, "__cublas$lt$matmul": 1,
                                      "__cudnn$fmhaSoftmaxBackward": 1, "__cudnn$norm": 1}
    assert result["fused_attention_calls"] == 2 and result["kernels"]["custom-call"] == 4
    assert result["fused_layer_norm_calls"] == 1


def test_rbg_prng_is_refused_with_one_line():
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu")
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "hlo_fusions.py"), "--config", "tiny", "--batch_size", "2",
         "--sequence_length", "32", "--predictions", "4", "--prng_impl", "rbg"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 1
    assert "error: --prng_impl rbg: Keras's random seeds are 2-word threefry keys" in result.stderr


_PADDED_PROJECTION = """
import json, re, sys
import jax, jax.numpy as jnp, keras, numpy as np
from keras_bert_impl.layers import MaskedLMHead
multiple = None if sys.argv[1] == "none" else int(sys.argv[1])
embedding = keras.layers.Embedding(30522, 16)
embedding.build((None,))
head = MaskedLMHead(token_embedding=embedding, vocabulary_padding_multiple=multiple)
x, positions = np.random.rand(2, 16, 16).astype("float32"), np.zeros((2, 4), "int32")
head(x, mask_positions=positions)
trainable = [v.value for v in head.trainable_variables]
others = [v.value for v in head.non_trainable_variables]
def loss(values):
    return jnp.mean(head.stateless_call(values, others, x, mask_positions=positions)[0] ** 2)
hlo = jax.jit(jax.grad(loss)).lower(trainable).compile().as_text()
print(json.dumps(sorted(set(re.findall(r"= f32\\[([0-9,]+)\\]\\{[0-9,]+\\} dot\\(", hlo)))))
"""


@pytest.mark.slow
def test_the_padded_vocabulary_survives_xla_optimisation():
    """XLA could fold slice(dot(x, pad(W))) back into dot(x, W); the optimised HLO must keep 30,592 columns
    in the forward projection and in the embedding's gradient (XLA:CPU here; the GPU run times it)."""
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu")
    shapes = {}
    for multiple in ("none", "128"):
        result = subprocess.run([sys.executable, "-c", _PADDED_PROJECTION, multiple], env=env, capture_output=True,
                                text=True, timeout=600, cwd=REPO)
        assert result.returncode == 0, result.stderr[-3000:]
        shapes[multiple] = json.loads(result.stdout.strip().splitlines()[-1])
    assert "8,30522" in shapes["none"] and not any("30592" in s for s in shapes["none"])
    assert "8,30592" in shapes["128"] and "16,30592" in shapes["128"]
    assert not any("30522" in s for s in shapes["128"]), shapes["128"]


def _dropout_statistics(use_function):
    """Keras's Dropout(0.1) on 200,000 ones after `backbone_speed.<use_function>()`: the kept fraction, the
    distinct values, whether two calls drew the same mask, whether inference is the identity, and the jaxpr's
    threefry lines."""
    script = f"""
import sys, json
sys.path.insert(0, {str(REPO / 'benchmarks')!r})
import keras, numpy as np, jax
import backbone_speed
backbone_speed.{use_function}()
layer = keras.layers.Dropout(0.1, seed=3)
x = np.ones((200, 1000), "float32")
a, b = (keras.ops.convert_to_numpy(layer(x, training=True)) for _ in range(2))
jaxpr = str(jax.make_jaxpr(lambda v: layer(v, training=True))(x))
print(json.dumps({{"kept": float((a != 0).mean()), "values": sorted(set(a.ravel().tolist())),
                   "same_mask": bool((a == b).all()), "eval_same": bool((keras.ops.convert_to_numpy(layer(x)) == x).all()),
                   "threefry_words": [line for line in jaxpr.splitlines() if "threefry2x32" in line]}}))
"""
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), env


@pytest.mark.slow
def test_philox_dropout_keeps_kerass_statistics_and_drops_the_threefry_loops(tmp_path):
    """`--dropout_rng philox` (backbone_speed.use_philox_dropout, issue 18 item 3): the same keep rate and
    scaling as Keras's dropout, a fresh mask per call, and on XLA:CPU no threefry `while` loops left."""
    stats, env = _dropout_statistics("use_philox_dropout")
    assert abs(stats["kept"] - 0.9) < 0.005  # 200,000 draws: the standard error is 0.0007
    assert len(stats["values"]) == 2 and stats["values"][0] == 0 and abs(stats["values"][1] - 1 / 0.9) < 1e-6
    assert not stats["same_mask"] and stats["eval_same"]
    fusions = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "hlo_fusions.py"), "--config", "tiny", "--batch_size", "2",
         "--sequence_length", "32", "--predictions", "4", "--dropout_rng", "philox",
         "--output", str(tmp_path / "out.json")],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert fusions.returncode == 0, fusions.stderr[-3000:]
    line = json.loads((tmp_path / "out.json").read_text())
    assert line["dropout_bits"] == "philox" and line["dropout_rng"]["while_loops"] == 0
    assert line["dropout_rng"]["fusions_with_xor"] == 7  # Philox's rounds, one fusion per dropout site


def test_threefry16_dropout_keeps_kerass_statistics_with_a_quarter_of_the_hash_evaluations():
    """`--dropout_rng threefry16` (backbone_speed.use_threefry16_dropout, session 22): keep rate 1 - 6554/65536,
    kept values scaled by its inverse, a fresh mask per call, the identity outside training, and the threefry
    hash run on half as many words as elements (two 16-bit draws a word, one evaluation per two words)."""
    stats, _ = _dropout_statistics("use_threefry16_dropout")
    keep = 1 - 6554 / 65536
    assert abs(stats["kept"] - keep) < 0.005  # 200,000 draws: the standard error is 0.0007
    assert len(stats["values"]) == 2 and stats["values"][0] == 0 and abs(stats["values"][1] - 1 / keep) < 1e-6
    assert not stats["same_mask"] and stats["eval_same"]
    # One threefry2x32 over two 50,000-word halves: 100,000 words for 200,000 elements.
    assert len(stats["threefry_words"]) == 1 and "u32[50000]" in stats["threefry_words"][0], stats["threefry_words"]
