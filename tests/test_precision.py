"""`--mixed_precision auto`, every recipe's default: bf16 on a TPU or a bf16 GPU, float32 elsewhere (issue 18)."""

import types

import keras
import pytest

from keras_bert_impl.training import precision
from keras_bert_impl.training.precision import mixed_precision_policy, resolve_mixed_precision
from tests.repo_scripts import load_script


@pytest.mark.multibackend
def test_auto_is_float32_on_this_cpu_machine():
    assert resolve_mixed_precision("auto") is None
    assert resolve_mixed_precision("AUTO", strategy_name="cpu") is None
    assert mixed_precision_policy("auto") == "float32"


@pytest.mark.multibackend
def test_auto_is_bf16_with_a_tpu_strategy_without_asking_for_devices(monkeypatch):
    monkeypatch.setattr(precision, "_accelerator_has_bfloat16", lambda backend: pytest.fail("devices were listed"))
    assert resolve_mixed_precision("auto", strategy_name="tpu") == "bf16"


@pytest.mark.multibackend
@pytest.mark.parametrize("has_bfloat16, expected", [(True, "bf16"), (False, None)])
def test_auto_follows_the_accelerator(monkeypatch, has_bfloat16, expected):
    seen = []
    monkeypatch.setattr(precision, "_accelerator_has_bfloat16", lambda backend: seen.append(backend) or has_bfloat16)
    assert resolve_mixed_precision("auto", strategy_name="auto") == expected
    assert resolve_mixed_precision("auto", strategy_name="mirrored", backend="jax") == expected
    assert seen == [keras.backend.backend(), "jax"]
    # --strategy cpu never asks (a GPU machine can still run a float32 CPU job).
    assert resolve_mixed_precision("auto", strategy_name="cpu") is None


@pytest.mark.multibackend
@pytest.mark.parametrize("capability, expected", [("9.0", True), ("8.0", True), ("7.5", False), (None, False)])
def test_jax_gpu_compute_capability(monkeypatch, capability, expected):
    jax = pytest.importorskip("jax")
    device = types.SimpleNamespace(platform="gpu", compute_capability=capability)
    monkeypatch.setattr(jax, "devices", lambda: [device])
    assert precision._accelerator_has_bfloat16("jax") is expected


@pytest.mark.multibackend
def test_jax_tpu_and_cpu_devices(monkeypatch):
    jax = pytest.importorskip("jax")
    monkeypatch.setattr(jax, "devices", lambda: [types.SimpleNamespace(platform="tpu")])
    assert precision._accelerator_has_bfloat16("jax") is True
    monkeypatch.setattr(jax, "devices", lambda: [types.SimpleNamespace(platform="cpu")])
    assert precision._accelerator_has_bfloat16("jax") is False


@pytest.mark.multibackend
@pytest.mark.parametrize("capability, expected", [((9, 0), True), ((8, 6), True), ((7, 0), False)])
def test_torch_gpu_compute_capability(monkeypatch, capability, expected):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: capability)
    assert precision._accelerator_has_bfloat16("torch") is expected
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert precision._accelerator_has_bfloat16("torch") is False


@pytest.mark.parametrize("gpus, capability, expected", [(["GPU:0"], (9, 0), True), (["GPU:0"], (7, 5), False),
                                                        ([], None, False)])
def test_tensorflow_gpu_compute_capability(monkeypatch, gpus, capability, expected):
    import tensorflow as tf

    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: gpus if kind == "GPU" else [])
    monkeypatch.setattr(tf.config.experimental, "get_device_details", lambda device: {"compute_capability": capability})
    assert precision._accelerator_has_bfloat16("tensorflow") is expected


@pytest.mark.multibackend
@pytest.mark.parametrize("value", [None, "none", "None", "float32", "fp32"])
def test_float32_spellings_resolve_to_none(value):
    # One recorded value for float32: a run started with the old default (None) resumes under --mixed_precision none.
    assert resolve_mixed_precision(value) is None


@pytest.mark.multibackend
@pytest.mark.parametrize("value", ["bf16", "fp16", "mixed_bfloat16", "mixed_float16"])
def test_explicit_values_are_kept(value):
    assert resolve_mixed_precision(value, strategy_name="tpu") == value


@pytest.mark.multibackend
def test_unknown_value_is_one_line_naming_the_flag():
    with pytest.raises(ValueError) as error:
        resolve_mixed_precision("fp8")
    assert str(error.value) == ("--mixed_precision='fp8': expected auto, none, bf16 or fp16 (or a Keras policy "
                                "name: float32, mixed_bfloat16, mixed_float16)")


@pytest.mark.parametrize("recipe, argv", [
    ("recipes/pretrain.py", []),
    ("recipes/finetune_glue.py", ["--task", "rte", "--data_dir", "d", "--model_dir", "m"]),
    ("recipes/finetune_conll.py", ["--data_dir", "d", "--preset", "p", "--model_dir", "m"]),
    ("recipes/finetune_squad.py", ["--train_file", "t.json", "--predict_file", "p.json", "--preset", "p", "--model_dir", "m"]),
])
def test_every_recipe_defaults_to_auto(recipe, argv):
    module = load_script(recipe)
    parsed = module.parse_args(argv)
    config = parsed[0] if isinstance(parsed, tuple) else parsed
    assert config.mixed_precision == "auto"


@pytest.mark.multibackend
def test_setup_finetuning_returns_the_precision_it_set():
    from keras_bert_impl.training.finetuning import setup_finetuning

    try:
        assert setup_finetuning(seed=0, mixed_precision="auto", strategy_name="cpu") is None
        assert keras.config.dtype_policy().name == "float32"
        assert setup_finetuning(mixed_precision="bf16") == "bf16"
        assert keras.config.dtype_policy().name == "mixed_bfloat16"
    finally:
        keras.config.set_dtype_policy("float32")
