"""The recipes' command-line errors that recipes/command_line.py makes one line: --seed out of NumPy's range, a
--model_dir that cannot be written, --strategy tpu without a TPU on a fine-tuning recipe, Ctrl-C (a line that says
how to resume, exit status 130), and a JSON file that does not parse (named)."""

import json

import keras
import pytest
from repo_scripts import load_script

command_line = load_script("recipes/command_line.py")


def _run_args(*argv):
    parser = command_line.OneLineParser(prog="finetune_example.py")
    command_line.add_run_arguments(parser, seed=0)
    return parser.parse_args(list(argv))


def _exit(job, capsys, **kwargs):
    """(exit status, stderr) of `exit_on_user_error(job)`."""
    with pytest.raises(SystemExit) as leaving:
        command_line.exit_on_user_error(job, **kwargs)
    return leaving.value.code, capsys.readouterr().err


@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_seed_outside_numpys_range_is_one_line_naming_the_flag(seed, capsys):
    with pytest.raises(SystemExit) as leaving:
        _run_args("--model_dir", "/tmp/x", "--seed", seed)
    assert leaving.value.code == 2
    assert capsys.readouterr().err == (f"error: argument --seed: must be an integer from 0 to 4294967295 "
                                       f"(2**32 - 1), got {seed} (see --help)\n")
    assert _run_args("--model_dir", "/tmp/x", "--seed", str(2**32 - 1)).seed == 2**32 - 1


def test_broken_json_file_is_named_with_line_and_column(tmp_path, capsys):
    """pretrain.py --config with broken JSON said only `error: Expecting ',' delimiter: line 2 column 1 (char 36)`."""
    from keras_bert_impl.training.pretraining_run import PretrainingConfig, backbone_config

    path = tmp_path / "cfg_bad.json"
    path.write_text('{"num_layers": 2, "hidden_dim": 128\n"num_heads": 2}\n')
    status, err = _exit(lambda: backbone_config(PretrainingConfig(config=str(path)), 100), capsys)
    assert (status, err) == (2, f"error: --config {path}, line 2, column 1: not valid JSON (Expecting ',' delimiter)\n")


def test_read_only_model_dir_is_refused_before_any_work(capsys):
    """/proc is a filesystem no one can create files in, root included (a read-only mount)."""
    args = _run_args("--model_dir", "/proc/finetune_run", "--strategy", "cpu")
    ran = []
    with pytest.raises(SystemExit) as leaving:
        command_line.run_recipe(args, lambda config: ran.append(config), lambda a: "config")
    assert leaving.value.code == 2 and not ran
    assert capsys.readouterr().err == ("error: --model_dir /proc/finetune_run cannot be written (/proc is read-only "
                                       "or not ours): pass a writable directory\n")


def test_model_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "run").write_text("notes\n")
    with pytest.raises(ValueError, match=r"^--model_dir .*run is a file, not a directory: pass a new directory"):
        command_line.check_model_dir(tmp_path / "run")
    command_line.check_model_dir(tmp_path / "new" / "run")  # to be created: fine


def test_no_tpu_on_a_fine_tuning_recipe_is_one_line_without_the_tpu_flag(tmp_path, capsys):
    from keras_bert_impl.training.strategy import NoTPUError

    def run(config):
        raise NoTPUError("local", "NotFoundError: TPUs not found in the cluster", "Name one with --tpu: ...")

    args = _run_args("--model_dir", str(tmp_path / "run"))
    args.strategy = "tpu" if keras.backend.backend() == "tensorflow" else "cpu"  # JAX, PyTorch refuse tpu sooner
    with pytest.raises(SystemExit) as leaving:
        command_line.run_recipe(args, run, lambda a: "config")
    assert leaving.value.code == 2
    assert capsys.readouterr().err == (
        "error: --strategy tpu: no TPU was found on this machine (NotFoundError: TPUs not found in the cluster); "
        "the fine-tuning recipes use the TPU of the Cloud TPU VM they run on: run there, or pass --strategy auto, "
        "cpu or gpu\n")


def _checkpoint(directory, name, manifest=True):
    path = directory / name
    path.mkdir(parents=True)
    if manifest:
        (path / "manifest.json").write_text(json.dumps({}))


def test_ctrl_c_says_the_same_command_resumes_from_the_newest_checkpoint(tmp_path, capsys):
    args = _run_args("--model_dir", str(tmp_path / "run"), "--strategy", "cpu")
    checkpoints = tmp_path / "run" / "checkpoints"

    def run(config):
        _checkpoint(checkpoints, "ckpt-000000001")
        _checkpoint(checkpoints, "ckpt-000000002")
        _checkpoint(checkpoints, "ckpt-000000003", manifest=False)  # being written: not a checkpoint yet
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as leaving:
        command_line.run_recipe(args, run, lambda a: "config")
    assert leaving.value.code == 130
    assert capsys.readouterr().err == ("Interrupted: rerun the same command to resume from the last checkpoint "
                                       f"({checkpoints / 'ckpt-000000002'}).\n")


def test_ctrl_c_before_any_checkpoint_and_without_a_known_directory(tmp_path, capsys):
    def interrupted():
        raise KeyboardInterrupt

    status, err = _exit(interrupted, capsys, checkpoints=str(tmp_path / "checkpoints"))
    assert (status, err) == (130, f"Interrupted before the first checkpoint ({tmp_path / 'checkpoints'}): rerun the "
                                  "same command to start again.\n")
    status, err = _exit(interrupted, capsys)  # pretrain.py
    assert (status, err) == (130, "Interrupted: rerun the same command to resume from the last checkpoint in "
                                  "--model_dir.\n")
    with pytest.raises(KeyboardInterrupt):  # --debug: the traceback
        command_line.exit_on_user_error(interrupted, debug=True)
