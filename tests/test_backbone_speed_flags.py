"""`benchmarks/backbone_speed.py`: issue 18's ablation flags and its honest FLOP count, on a tiny model.

The speed figures themselves come from GPU runs (docs/benchmarks.md); this checks that one run sweeps batch
sizes, times `model.fit` with `steps_per_execution`, applies the dropout overrides, and reports MFU both ways.
"""

import json

import pytest

from tests.repo_scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/backbone_speed.py")


def test_flops_of_bert_base_match_the_issue(bench):
    """BERT-base, seq 128, 20 gathered predictions: about 70 GFLOP a training step (issue 18), attention included."""
    from keras_bert_impl.presets import backbone_presets

    base = backbone_presets["bert_base_en_uncased"]["config"]
    forward = bench.model_flops_per_sequence(base, 128, 20, training=False)
    train = bench.model_flops_per_sequence(base, 128, 20, training=True)
    assert forward == 12 * (2 * 128 * (4 * 768**2 + 2 * 768 * 3072) + 4 * 128**2 * 768) + 2 * 768**2
    assert train == 3 * (forward + 20 * (2 * 768**2 + 2 * 768 * 30522) + 2 * 768 * 2)
    assert 69.5e9 < train < 70.5e9


@pytest.mark.slow
def test_one_run_sweeps_batches_with_steps_per_execution_and_reports_mfu_two_ways(bench, capsys):
    bench.main(["--configs", "tiny", "--peers", "", "--batch_sizes", "2,3", "--steps", "1",
                "--steps_per_execution", "2", "--attention_dropout", "0", "--peak_tflops", "1",
                "--vocabulary_padding_multiple", "128", "--attention_padding", "lengths"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["vocabulary_padding_multiple"] == 128 and result["attention_padding"] == "lengths"
    assert result["batch_sizes"] == [2, 3] and result["batch_size"] is None
    assert result["steps_per_execution"] == 2 and result["attention_dropout"] == 0.0
    assert set(result["configs"]) == {"tiny_b2", "tiny_b3"}
    for entry in result["configs"].values():
        ours = entry["ours"]
        assert ours["train_seq_s"] > 0 and ours["forward_seq_s"] > 0
        assert 0 < ours["train_fraction_of_spec"] < ours["train_fraction_of_peak"]  # this CPU: well below 1 TFLOP/s
        assert ours["train_tflops"] == pytest.approx(ours["train_fraction_of_spec"], abs=1e-3)


@pytest.mark.parametrize("argv, message", [
    (["--configs", "tiny,huge"], "--configs: unknown huge; choose from tiny, mini, small, medium, base, large"),
    (["--batch_sizes", "64,x"], "--batch_sizes: expected integers separated by commas, got '64,x'"),
    (["--steps_per_execution", "0"], "--batch_sizes, --steps and --steps_per_execution must be >= 1"),
    (["--vocabulary_padding_multiple", "0"], "--vocabulary_padding_multiple must be >= 1, got 0"),
    (["--peers", "keras_hub,pytorch"], "--peers: unknown pytorch; choose from keras_hub, huggingface"),
])
def test_bad_flags_are_one_line(bench, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].split(": error: ", 1)[1] == message


@pytest.mark.slow
def test_train_only_times_the_training_step_alone(bench, capsys):
    bench.main(["--configs", "tiny", "--peers", "", "--batch_size", "2", "--steps", "1", "--train_only"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    ours = result["configs"]["tiny"]["ours"]
    assert result["train_only"] is True
    assert ours["forward_seq_s"] is None and "forward_fraction_of_peak" not in ours and ours["train_seq_s"] > 0


def test_a_peer_that_cannot_be_imported_is_one_line_before_any_measurement(bench, capsys, monkeypatch):
    """Session 18's H100 call lost minutes: keras_hub failed to import (kagglesdk missing) after ours was timed."""
    import builtins

    real_import = builtins.__import__

    def no_keras_hub(name, *args, **kwargs):
        if name == "keras_hub":
            raise ImportError("No module named 'kagglesdk'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_keras_hub)
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--configs", "tiny", "--peers", "keras_hub", "--batch_size", "2", "--steps", "1"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].split(": error: ", 1)[1] == (
        "--peers keras_hub: cannot import keras_hub (No module named 'kagglesdk'); install it or leave the peer out")


def test_philox_dropout_off_jax_is_one_line(bench):
    import keras

    if keras.backend.backend() == "jax":
        pytest.skip("the refusal is for the other backends")
    with pytest.raises(SystemExit) as caught:
        bench.main(["--configs", "tiny", "--peers", "", "--steps", "1", "--dropout_rng", "philox"])
    assert str(caught.value) == f"error: --dropout_rng philox: JAX only (KERAS_BACKEND={keras.backend.backend()})"


@pytest.mark.slow
@pytest.mark.multibackend  # the GPU measurement runs on JAX
def test_float8_quantizes_the_four_matmuls_of_each_block_and_the_step_still_learns(bench):
    """`--float8 on` (issue 18: FP8 matmuls on an H100): Keras's float8 training on the encoder's Dense layers only,
    and the quantized model fits a fixed batch as the unquantized one does."""
    import keras
    import numpy as np

    from keras_bert_impl.presets import backbone_presets

    config = dict(backbone_presets["bert_tiny_en_uncased"]["config"], vocabulary_size=2048, dropout=0.0)
    x, y = bench.make_batch(8, 32, 4, config["vocabulary_size"])
    losses = {}
    for float8 in (False, True):
        keras.utils.set_random_seed(0)
        model = bench.build_ours(config)
        if float8:
            assert bench.quantize_encoder_float8(model) == 4 * config["num_layers"]
            modes = [(layer.name, layer.quantization_mode) for layer in model._flatten_layers()
                     if isinstance(layer, keras.layers.Dense)]
            assert sorted(name for name, mode in modes if mode == "float8") == \
                sorted(["qkv", "attention_output", "intermediate", "output"] * config["num_layers"])
            unchanged = sorted(name for name, mode in modes if mode is None)
            assert unchanged == ["logits", "pooled_dense", "transform"], unchanged  # heads and pooler
        model.compile(optimizer=keras.optimizers.AdamW(learning_rate=3e-3),
                      loss={"mlm": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                            "nsp": keras.losses.SparseCategoricalCrossentropy(from_logits=True)})
        history = model.fit(x, y, batch_size=8, epochs=12, verbose=0).history["loss"]
        losses[float8] = (history[0], history[-1])
    assert all(np.isfinite(losses[True]))
    assert losses[True][1] < 0.5 * losses[True][0]  # it learns
    assert losses[True][1] == pytest.approx(losses[False][1], rel=0.25, abs=0.3)  # about as well as without FP8
