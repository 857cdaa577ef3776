"""`--attention_padding auto|mask|lengths` (training/attention_padding.py): what `auto` becomes, and a pretraining
run that hands the attention lengths trains, reports it, and exports a backbone that does not record it."""

import json

import pytest

from keras_bert_impl.training.attention_padding import resolve_attention_padding


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_auto_is_the_mask_on_this_cpu(backend):
    for precision in (None, "bf16"):
        assert resolve_attention_padding("auto", precision, 0.0, backend=backend) == "mask"


def test_auto_is_lengths_only_where_cudnn_fused_attention_runs_in_training(monkeypatch):
    jax = pytest.importorskip("jax")
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert resolve_attention_padding("auto", "bf16", 0.0, backend="jax") == "lengths"
    assert resolve_attention_padding("auto", "mixed_float16", 0.0, backend="jax") == "lengths"
    assert resolve_attention_padding("auto", "bf16", 0.1, backend="jax") == "mask"  # dropout on the probabilities
    assert resolve_attention_padding("auto", None, 0.0, backend="jax") == "mask"  # cuDNN's kernel is bf16/fp16 only
    assert resolve_attention_padding("auto", "bf16", 0.0, backend="tensorflow") == "mask"


def test_a_named_padding_is_kept_and_a_bad_one_is_one_line():
    assert resolve_attention_padding("lengths", None, 0.1) == "lengths"
    assert resolve_attention_padding("mask", "bf16", 0.0, backend="jax") == "mask"
    with pytest.raises(ValueError) as caught:
        resolve_attention_padding("pad", None, 0.0)
    assert str(caught.value) == "--attention_padding='pad': expected auto, mask or lengths"


@pytest.mark.slow
def test_a_pretraining_run_on_lengths_reports_it_and_exports_without_it(tmp_path):
    from keras_bert_impl.models.backbone import BertBackbone
    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    result = run_pretraining(PretrainingConfig(
        model_dir=str(tmp_path / "run"), num_steps=4, checkpoint_every=4, warmup_steps=1, validation_steps=1,
        global_batch_size=8, attention_padding="lengths", verbose=0))
    assert result["attention_padding"] == "lengths"
    assert result["model"].backbone.attention_padding == "lengths"
    exported = json.loads((tmp_path / "run" / "export" / "config.json").read_text())["config"]
    assert "attention_padding" not in exported  # how, not what: fine-tuning (packing too) gets the default mask
    assert BertBackbone.from_preset(str(tmp_path / "run" / "export")).attention_padding == "mask"
    assert run_pretraining(PretrainingConfig(
        model_dir=str(tmp_path / "run2"), num_steps=2, checkpoint_every=2, warmup_steps=1, validation_steps=1,
        global_batch_size=8, verbose=0))["attention_padding"] == "mask"  # auto, on this CPU


def test_a_bad_attention_padding_is_refused_before_any_work(tmp_path):
    from keras_bert_impl.training.pretraining_run import PretrainingConfig, run_pretraining

    with pytest.raises(ValueError) as caught:
        run_pretraining(PretrainingConfig(model_dir=str(tmp_path / "run"), attention_padding="pad"))
    assert str(caught.value) == "--attention_padding='pad': expected auto, mask or lengths"
    assert not (tmp_path / "run").exists()


def test_the_recipe_refuses_a_bad_attention_padding_in_one_line(capsys):
    from repo_scripts import load_script

    with pytest.raises(SystemExit) as caught:
        load_script("recipes/pretrain.py").parse_args(["--attention_padding", "pad"])
    assert caught.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (  # one line, as every recipe's (OneLineParser)
        "error: argument --attention_padding: invalid choice: 'pad' (choose from 'auto', 'mask', 'lengths') (see "
        "--help)")
