"""`--triton_gemm`: cuBLAS for every matmul on a JAX GPU (recipes/pretrain.py's default), set through XLA_FLAGS.

What runs faster is measured on a GPU (docs/benchmarks.md, session 40); these tests check what the setting writes
into XLA_FLAGS, that a user's XLA_FLAGS wins or is refused in one line, and that the recipe sets it before anything
asks JAX for its devices (XLA reads XLA_FLAGS once, then).
"""

import pytest

from keras_bert_impl.training.triton_gemm import apply_triton_gemm
from tests.repo_scripts import load_script


def test_auto_turns_triton_gemms_off_on_jax_only_and_keeps_the_other_flags():
    env = {"XLA_FLAGS": "--xla_gpu_autotune_level=2"}
    assert apply_triton_gemm("auto", backend="jax", environ=env) == "off"
    assert env["XLA_FLAGS"] == "--xla_gpu_autotune_level=2 --xla_gpu_enable_triton_gemm=false"
    for backend in ("tensorflow", "torch"):
        env = {}
        assert apply_triton_gemm("auto", backend=backend, environ=env) == "xla default"
        assert env == {}
    env = {}
    assert apply_triton_gemm("on", backend="tensorflow", environ=env) == "on"
    assert env["XLA_FLAGS"] == "--xla_gpu_enable_triton_gemm=true"


@pytest.mark.parametrize("given, expected", [("true", "on"), ("false", "off"), ("0", "off"), ("True", "on")])
def test_an_xla_flags_that_names_the_option_wins_over_auto(given, expected):
    env = {"XLA_FLAGS": f"--xla_gpu_enable_triton_gemm={given}"}
    assert apply_triton_gemm("auto", backend="jax", environ=env) == expected
    assert env["XLA_FLAGS"] == f"--xla_gpu_enable_triton_gemm={given}"  # untouched
    assert apply_triton_gemm(expected, backend="jax", environ=env) == expected  # agreeing: nothing to do
    assert env["XLA_FLAGS"] == f"--xla_gpu_enable_triton_gemm={given}"


def test_a_setting_against_xla_flags_is_one_line_naming_both():
    env = {"XLA_FLAGS": "--xla_gpu_enable_triton_gemm=false"}
    with pytest.raises(ValueError) as error:
        apply_triton_gemm("on", backend="jax", environ=env)
    assert str(error.value) == ("--triton_gemm on contradicts XLA_FLAGS, which sets "
                                "--xla_gpu_enable_triton_gemm=false: drop one of the two")
    with pytest.raises(ValueError, match=r"^--triton_gemm='yes': expected one of auto, on, off$"):
        apply_triton_gemm("yes", backend="jax", environ={})


def test_the_recipe_sets_it_before_the_compilation_cache_asks_jax_for_devices(monkeypatch):
    recipe = load_script("recipes/pretrain.py")
    calls = []
    monkeypatch.setattr(recipe, "apply_triton_gemm", lambda setting: calls.append(("triton_gemm", setting)))

    def stop(value):
        calls.append(("compilation_cache", value))
        raise ValueError("stop here")

    monkeypatch.setattr(recipe, "enable_compilation_cache", stop)
    assert recipe.main(["--triton_gemm", "on", "--compilation_cache", "none"]) == 2
    assert calls == [("triton_gemm", "on"), ("compilation_cache", "none")]


def test_the_recipe_says_a_contradiction_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_enable_triton_gemm=true")
    recipe = load_script("recipes/pretrain.py")
    assert recipe.main(["--triton_gemm", "off"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--triton_gemm off contradicts XLA_FLAGS, which sets "
                            "--xla_gpu_enable_triton_gemm=true: drop one of the two"), err
    assert not any("Traceback" in line for line in err)


def test_the_fine_tuning_recipes_set_it_in_start_job_before_anything_asks_for_devices(monkeypatch):
    """The fine-tuning recipes take `--triton_gemm` too (`recipes/command_line.py`); `start_job` sets it first, before
    the strategy check and the compilation cache, which ask JAX for its devices."""
    import argparse

    import keras

    command_line = load_script("recipes/command_line.py")
    parser = argparse.ArgumentParser()
    command_line.add_run_arguments(parser, seed=0)
    args = parser.parse_args(["--model_dir", "unused"])
    assert args.triton_gemm == "auto"
    order = []
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setattr("keras_bert_impl.training.triton_gemm.apply_triton_gemm",
                        lambda setting: order.append(("triton_gemm", setting)))
    monkeypatch.setattr("keras_bert_impl.training.strategy.check_finetuning_strategy",
                        lambda strategy: order.append(("strategy", strategy)))
    monkeypatch.setattr(command_line, "check_model_dir", lambda model_dir: None)
    monkeypatch.setattr("keras_bert_impl.training.compilation_cache.enable_compilation_cache",
                        lambda setting: order.append(("cache", setting)))
    command_line.start_job(args)
    assert order == [("triton_gemm", "auto"), ("strategy", "auto"), ("cache", "auto")]
    assert keras.backend.backend()  # (imported by start_job)


def test_a_fine_tuning_recipe_says_a_contradiction_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_enable_triton_gemm=true")
    recipe = load_script("recipes/finetune_glue.py")
    with pytest.raises(SystemExit) as exit_status:
        recipe.main(["--task", "sst2", "--data_dir", str(tmp_path), "--model_dir", str(tmp_path / "out"),
                     "--triton_gemm", "off"])
    assert exit_status.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--triton_gemm off contradicts XLA_FLAGS, which sets "
                            "--xla_gpu_enable_triton_gemm=true: drop one of the two"), err
    assert not any("Traceback" in line for line in err)
