"""The LayerNorms' hand-written backward pass on JAX (`layer_norm_backward="explicit"`, the default).

Compiled for an H100 (`benchmarks/hlo_traffic.py --target h100`, BERT-base, batch 256, bf16), autodiff's LayerNorm
backward has XLA recompute each row's statistics inside a normalization kernel that writes `dy * x_hat` to memory in
float32 for the `gamma` gradient, and reduce `dy` twice. The explicit backward pass reads the saved statistics and
reduces `[dy * x_hat, dy]` once: 5.9 GB less a step, with 39 kernels fewer. It must compute the same gradients:
against autodiff of the same float32 formula on random data, and, on the real all-MiniLM-L6-v2 weights and text,
the same outputs, loss and SGD step as `"autodiff"` within 1e-5 on every backend.
"""

import keras
import numpy as np
import pytest

from keras_bert_impl.layers.float32_layer_norm import Float32LayerNormalization
from keras_bert_impl.layers.transformer_encoder import TransformerEncoder
from keras_bert_impl.models.backbone import BertBackbone
from tests.equivalent_backbones import loss_and_sgd_step, sequence_output_difference

TOLERANCE = 1e-5


@pytest.mark.multibackend
def test_explicit_backward_gives_autodiffs_outputs(minilm_examples):
    worst, explicit = sequence_output_difference(minilm_examples, {"layer_norm_backward": "autodiff"}, {})
    assert explicit.layer_norm_backward == "explicit"
    assert explicit.embeddings_layer_norm.backward == "explicit"
    assert [block.output_layer_norm.backward for block in explicit.transformer_layers] == ["explicit"] * 6
    assert worst <= TOLERANCE


@pytest.mark.slow
@pytest.mark.multibackend
def test_explicit_backward_gives_autodiffs_loss_and_sgd_step(minilm_examples):
    loss_difference, moved, differ = loss_and_sgd_step(minilm_examples, {"layer_norm_backward": "autodiff"},
                                                       {"layer_norm_backward": "explicit"})
    print(f"loss difference {loss_difference:.3g}; one SGD step: largest weight change {moved:.3g}, "
          f"explicit vs autodiff {differ:.3g}")
    assert loss_difference <= TOLERANCE and moved > 1e-3 and differ <= TOLERANCE


@pytest.mark.multibackend
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the explicit backward pass is JAX's")
def test_explicit_gradients_equal_autodiff_of_the_float32_formula_in_float32_and_bfloat16():
    import jax
    import jax.numpy as jnp

    from keras_bert_impl.layers.layer_norm_backward import layer_norm_with_explicit_backward

    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 32)).astype("float32") * 3 + 1
    gamma = rng.standard_normal(32).astype("float32")
    beta = rng.standard_normal(32).astype("float32")
    upstream = rng.standard_normal((3, 5, 32)).astype("float32")

    def reference(x, gamma, beta, dtype):
        x32 = x.astype(jnp.float32)
        mean = x32.mean(-1, keepdims=True)
        variance = jnp.square(x32 - mean).mean(-1, keepdims=True)
        return ((x32 - mean) * jax.lax.rsqrt(variance + 1e-12) * gamma + beta).astype(dtype)

    for dtype, tolerance in (("float32", 1e-5), ("bfloat16", 2e-2)):
        xs = jnp.asarray(x, dtype)

        def loss(fn):
            return lambda x, g, b: jnp.sum(fn(x, g, b, dtype).astype(jnp.float32) * upstream)

        ours = jax.grad(loss(lambda x, g, b, d: layer_norm_with_explicit_backward(x, g, b, 1e-12, d)),
                        argnums=(0, 1, 2))(xs, gamma, beta)
        expected = jax.grad(loss(reference), argnums=(0, 1, 2))(xs, gamma, beta)
        for name, a, b in zip(("x", "gamma", "beta"), ours, expected):
            assert a.dtype == b.dtype, name
            scale = float(jnp.max(jnp.abs(b.astype(jnp.float32))))
            assert float(jnp.max(jnp.abs(a.astype(jnp.float32) - b.astype(jnp.float32)))) <= tolerance * scale, name


@pytest.mark.multibackend
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the explicit backward pass is JAX's")
def test_the_jax_gradient_runs_the_explicit_backward_and_autodiff_does_not():
    import jax

    x = np.random.default_rng(1).standard_normal((2, 4, 16)).astype("float32")
    jaxprs = {}
    for backward in ("explicit", "autodiff"):
        layer = Float32LayerNormalization(epsilon=1e-12, backward=backward)
        layer.build(x.shape)
        weights = [v.value for v in layer.trainable_variables]
        jaxprs[backward] = str(jax.make_jaxpr(jax.grad(
            lambda w: jax.numpy.sum(layer.stateless_call(w, [], x)[0] ** 2)))(weights))
    # The explicit backward pass reads the saved statistics through an optimization barrier; autodiff has none.
    assert "optimization_barrier" in jaxprs["explicit"] and "optimization_barrier" not in jaxprs["autodiff"]


def test_layer_norm_backward_is_a_setting_not_architecture(tmp_path):
    backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=8, layer_norm_backward="autodiff")
    assert backbone.embeddings_layer_norm.backward == "autodiff"
    assert backbone.transformer_layers[0].attention_layer_norm.backward == "autodiff"
    config = backbone.get_config()
    assert BertBackbone.from_config(config).layer_norm_backward == "autodiff"
    assert "layer_norm_backward" not in backbone.architecture_config()
    backbone.save_to_preset(str(tmp_path / "preset"))
    assert BertBackbone.from_preset(str(tmp_path / "preset")).layer_norm_backward == "explicit"
    assert BertBackbone.from_preset(str(tmp_path / "preset"),
                                    layer_norm_backward="autodiff").layer_norm_backward == "autodiff"
    layer = Float32LayerNormalization(backward="autodiff")
    assert Float32LayerNormalization.from_config(layer.get_config()).backward == "autodiff"
    block = TransformerEncoder(num_heads=2, intermediate_dim=16, layer_norm_backward="autodiff")
    assert TransformerEncoder.from_config(block.get_config()).layer_norm_backward == "autodiff"
    expected = "expected 'explicit' (a hand-written backward pass on JAX) or 'autodiff'."
    with pytest.raises(ValueError) as error:
        BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                     layer_norm_backward="manual")
    assert str(error.value) == f"layer_norm_backward='manual': {expected}"
    with pytest.raises(ValueError) as error:
        Float32LayerNormalization(backward="manual")
    assert str(error.value) == f"backward='manual': {expected}"


@pytest.mark.slow
def test_the_pretraining_recipe_passes_both_memory_settings_and_refuses_bad_ones(tmp_path, capsys):
    from repo_scripts import load_script

    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    result = run_pretraining(PretrainingConfig(
        model_dir=str(tmp_path / "run"), num_steps=2, checkpoint_every=2, warmup_steps=1, validation_steps=1,
        global_batch_size=8, recompute_activation="off", layer_norm_backward="autodiff", verbose=0))
    backbone = result["model"].backbone
    assert (result["recompute_activation"], result["layer_norm_backward"]) == ("off", "autodiff")
    assert (backbone.recompute_activation, backbone.layer_norm_backward) == (False, "autodiff")
    assert backbone.transformer_layers[0].output_layer_norm.backward == "autodiff"
    config, _, _ = load_script("recipes/pretrain.py").parse_args(["--layer_norm_backward", "autodiff"])
    assert (config.recompute_activation, config.layer_norm_backward) == ("on", "autodiff")
    with pytest.raises(ValueError) as caught:
        run_pretraining(PretrainingConfig(model_dir=str(tmp_path / "bad"), layer_norm_backward="manual"))
    assert str(caught.value) == "--layer_norm_backward='manual': expected explicit or autodiff"
    assert not (tmp_path / "bad").exists()
    with pytest.raises(SystemExit):
        load_script("recipes/pretrain.py").parse_args(["--recompute_activation", "yes"])
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: argument --recompute_activation: invalid choice: 'yes' (choose from 'on', 'off') (see --help)")
