"""benchmarks/pretrain_then_finetune.py: a finished unit is reused only with the settings that made it.

Every unit (corpus, pretraining run, fine-tuning run) writes its settings into its JSON. A rerun in the same
`--work_dir` that asks for other settings (say another `--finetune_learning_rate`) is refused in one line that
names the file and the setting, instead of silently reporting scores made with the old ones.
"""

import json
import pathlib

import pytest
from repo_scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("benchmarks/pretrain_then_finetune.py")


def _write_unit(bench, args, name, settings):
    path = pathlib.Path(bench._unit_path(args, name.replace(":", "_")))
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"unit": name, "scores": {"accuracy": 0.5}}
    if settings is not None:
        record["settings"] = settings
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def test_finetuning_settings_name_the_pretraining_they_start_from(bench, tmp_path):
    args, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900", "--train_limits", "sst2=2000"])
    settings = bench.unit_settings(args, "finetune:ours:900:sst2:0")
    assert settings["learning_rate"] == args.finetune_learning_rate_of["sst2"]
    assert settings["train_limit"] == 2000
    assert settings["init"] == bench.unit_settings(args, "pretrain_ours:900")
    assert bench.unit_settings(args, "finetune:random:0:sst2:1")["init"] == {"config": "tiny"}


def test_units_made_with_the_same_settings_are_reused(bench, tmp_path):
    args, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900", "--tasks", "sst2"])
    names = bench.plan(args)
    for name in names:
        _write_unit(bench, args, name, json.loads(json.dumps(bench.unit_settings(args, name))))
    bench.check_finished_units(args, names)  # nothing raised


def test_a_unit_made_with_another_finetuning_learning_rate_is_refused(bench, tmp_path):
    old, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900", "--tasks", "sst2",
                               "--finetune_learning_rate", "1e-4"])
    path = _write_unit(bench, old, "finetune:ours:900:sst2:0", bench.unit_settings(old, "finetune:ours:900:sst2:0"))
    new, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900", "--tasks", "sst2",
                               "--finetune_learning_rate", "3e-4"])
    with pytest.raises(SystemExit) as caught:
        bench.check_finished_units(new, bench.plan(new))
    assert str(caught.value) == (
        f"{path}: made with other settings than this run asks for (learning_rate 0.0001 -> 0.0003); use another "
        "--work_dir, or delete the file to redo it")


def test_a_changed_pretraining_setting_reaches_the_finetuning_units(bench, tmp_path):
    old, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900", "--tasks", "sst2"])
    path = _write_unit(bench, old, "finetune:ours:900:sst2:0", bench.unit_settings(old, "finetune:ours:900:sst2:0"))
    new, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900", "--tasks", "sst2",
                               "--learning_rate", "2e-3"])
    with pytest.raises(SystemExit, match="init.learning_rate 0.003 -> 0.002") as caught:
        bench.check_finished_units(new, ["finetune:ours:900:sst2:0"])
    assert str(caught.value).startswith(f"{path}: ")


def test_a_unit_without_settings_is_refused(bench, tmp_path):
    args, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900", "--tasks", "sst2"])
    path = _write_unit(bench, args, "corpus", None)
    with pytest.raises(SystemExit) as caught:
        bench.main(["--work_dir", str(tmp_path), "--steps", "900", "--tasks", "sst2", "--summary_only"])
    assert str(caught.value) == (
        f"{path}: records no settings (made by an older version of this benchmark), so it cannot be reused "
        "safely; delete it to redo it, or use another --work_dir")


def test_finetuning_learning_rates_are_per_task_and_shared_by_every_initialisation(bench, tmp_path):
    defaults = bench.parse_args([])[0].finetune_learning_rate_of
    assert set(defaults) == set(bench.TASKS)
    one = bench.parse_args(["--finetune_learning_rate", "2e-4"])[0].finetune_learning_rate_of
    assert one == {task: 2e-4 for task in bench.TASKS}
    some = bench.parse_args(["--finetune_learning_rate", "sst2=5e-4"])[0].finetune_learning_rate_of
    assert some == {**defaults, "sst2": 5e-4}
    args, _ = bench.parse_args(["--work_dir", str(tmp_path), "--finetune_learning_rate", "sst2=5e-4,conll=2e-3"])
    assert bench.unit_settings(args, "finetune:ours:3000:conll:0")["learning_rate"] == 2e-3
    assert bench.unit_settings(args, "finetune:random:0:conll:0")["learning_rate"] == 2e-3


@pytest.mark.parametrize("flag, message", [
    ("fast", "--finetune_learning_rate: expected a number or task=number[,task=number], got 'fast'"),
    ("mnli=1e-4", "--finetune_learning_rate: unknown task 'mnli'; choose from sst2, stsb, conll"),
    ("0", "--finetune_learning_rate: rates must be > 0, got '0'"),
])
def test_a_bad_finetuning_learning_rate_is_one_clear_line(bench, capsys, flag, message):
    with pytest.raises(SystemExit):
        bench.parse_args(["--finetune_learning_rate", flag])
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)


def test_our_attention_init_is_a_setting_of_our_pretraining_and_of_what_starts_from_it(bench, tmp_path):
    default, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900"])
    assert default.attention_init_stddev is None
    assert bench.unit_settings(default, "pretrain_ours:900")["attention_init_stddev"] == "sqrt(1.28 / hidden_dim)"
    hf_init, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900", "--attention_init_stddev", "0.02"])
    assert bench.unit_settings(hf_init, "pretrain_ours:900")["attention_init_stddev"] == 0.02
    assert bench.unit_settings(hf_init, "finetune:ours:900:sst2:0")["init"]["attention_init_stddev"] == 0.02
    # The peer and the random start do not depend on it, so their finished units serve both runs.
    for name in ("pretrain_huggingface:900", "finetune:huggingface:900:conll:1", "finetune:random:0:sst2:0"):
        assert bench.unit_settings(hf_init, name) == bench.unit_settings(default, name)
    path = _write_unit(bench, default, "pretrain_ours:900", bench.unit_settings(default, "pretrain_ours:900"))
    with pytest.raises(SystemExit) as caught:
        bench.check_finished_units(hf_init, ["pretrain_ours:900"])
    assert str(caught.value) == (
        f"{path}: made with other settings than this run asks for (attention_init_stddev 'sqrt(1.28 / hidden_dim)' "
        "-> 0.02); use another --work_dir, or delete the file to redo it")


def test_a_bad_attention_init_is_one_clear_line(bench, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--attention_init_stddev", "0"])
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "--attention_init_stddev: expected a number > 0, got 0.0")


def test_our_weight_init_is_recorded_unless_it_is_berts_truncated_normal(bench, tmp_path):
    from keras_bert_impl.training.pretraining_run import PretrainingConfig

    truncated, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900", "--weight_init", "truncated_normal"])
    assert "weight_init" not in bench.unit_settings(truncated, "pretrain_ours:900")  # as units made before the flag
    normal, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900", "--weight_init", "normal"])
    assert bench.unit_settings(normal, "pretrain_ours:900")["weight_init"] == "normal"
    assert bench.unit_settings(normal, "finetune:ours:900:conll:2")["init"]["weight_init"] == "normal"
    default, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900"])
    assert bench.unit_settings(default, "pretrain_ours:900").get("weight_init", "truncated_normal") == (
        PretrainingConfig.weight_init)
    for name in ("pretrain_huggingface:900", "finetune:huggingface:900:conll:1", "finetune:random:0:sst2:0"):
        assert bench.unit_settings(normal, name) == bench.unit_settings(truncated, name)
    path = _write_unit(bench, normal, "pretrain_ours:900", bench.unit_settings(normal, "pretrain_ours:900"))
    with pytest.raises(SystemExit) as caught:
        bench.check_finished_units(truncated, ["pretrain_ours:900"])
    assert str(caught.value) == (
        f"{path}: made with other settings than this run asks for (weight_init 'normal' -> None); use another "
        "--work_dir, or delete the file to redo it")


def test_our_position_init_is_recorded_unless_it_is_berts_random_table(bench, tmp_path):
    from keras_bert_impl.training.pretraining_run import PretrainingConfig

    random_table, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900", "--position_init", "random"])
    assert "position_init" not in bench.unit_settings(random_table, "pretrain_ours:900")  # as units made before
    default, _ = bench.parse_args(["--work_dir", str(tmp_path), "--steps", "900"])
    assert PretrainingConfig.position_init == "sinusoidal"
    assert bench.unit_settings(default, "pretrain_ours:900")["position_init"] == "sinusoidal"
    assert bench.unit_settings(default, "finetune:ours:900:sst2:0")["init"]["position_init"] == "sinusoidal"
    assert bench.unit_settings(default, "pretrain_huggingface:900") == bench.unit_settings(
        random_table, "pretrain_huggingface:900")
