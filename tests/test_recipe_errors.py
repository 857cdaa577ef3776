"""The recipes' command-line errors that recipes/command_line.py makes one line: --seed out of NumPy's range, a
--model_dir that cannot be written, --strategy tpu without a TPU on a fine-tuning recipe, Ctrl-C (a line that says
how to resume, exit status 130; also while the recipe still imports TensorFlow and Keras: recipes/interruption.py),
and a JSON file that does not parse (named)."""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import pytest
from repo_scripts import REPO, load_script

command_line = load_script("recipes/command_line.py")
interruption = sys.modules["interruption"]  # the module command_line.py imported: one `_run_state` for both


@pytest.fixture(autouse=True)
def _run_state_as_it_was(monkeypatch):
    """Every test leaves `interruption._run_state` as it found it: the recipes loaded by other tests share it."""
    for key, value in list(interruption._run_state.items()):
        monkeypatch.setitem(interruption._run_state, key, value)


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


def test_a_remote_model_dir_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    """Before: a fine-tuning run into `--model_dir gs://b/sst2` wrote everything under a local folder named `gs:`."""
    monkeypatch.chdir(tmp_path)
    args = _run_args("--model_dir", "gs://bucket/sst2", "--strategy", "cpu")
    ran = []
    with pytest.raises(SystemExit) as leaving:
        command_line.run_recipe(args, lambda config: ran.append(config), lambda a: "config")
    assert leaving.value.code == 2 and not ran and os.listdir(tmp_path) == []
    assert capsys.readouterr().err == (
        "error: --model_dir gs://bucket/sst2: fine-tuning writes its checkpoints and outputs to a local directory "
        "(pretraining alone works in a local copy of a remote one): give a local directory, and copy it there when "
        "the run ends (e.g. gsutil -m cp -r DIR gs://bucket/sst2)\n")


def test_model_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "run").write_text("notes\n")
    with pytest.raises(ValueError, match=r"^--model_dir .*run is a file, not a directory: pass a new directory"):
        command_line.check_model_dir(tmp_path / "run")
    command_line.check_model_dir(tmp_path / "new" / "run")  # to be created: fine


def test_model_dir_that_is_a_link_to_nothing_is_refused(tmp_path):
    # Before: fine-tuning, a 51-line NotFoundError traceback from the TensorBoard writer once the model was built;
    # pretraining, "[Errno 17] File exists".
    (tmp_path / "runs").symlink_to(tmp_path / "mounted" / "runs")
    with pytest.raises(ValueError) as error:
        command_line.check_model_dir(tmp_path / "runs")
    assert str(error.value) == (f"--model_dir {tmp_path / 'runs'} is a symbolic link to {tmp_path / 'mounted' / 'runs'}"
                                ", which does not exist: create it, or pass another --model_dir")
    with pytest.raises(ValueError) as error:
        command_line.check_model_dir(tmp_path / "runs" / "sst2")
    assert str(error.value) == (f"--model_dir {tmp_path / 'runs' / 'sst2'} is inside {tmp_path / 'runs'}, a symbolic "
                                f"link to {tmp_path / 'mounted' / 'runs'}, which does not exist: create it, or pass "
                                "another --model_dir")
    (tmp_path / "mounted" / "runs").mkdir(parents=True)
    command_line.check_model_dir(tmp_path / "runs" / "sst2")


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


# === Defect: Ctrl-C while a recipe still imported TensorFlow and Keras printed a 90-line traceback (exit -SIGINT) ===

STARTING = "Interrupted while starting, before any work: rerun the same command."
FINISHED = "Interrupted after the run had finished, while printing its results: its outputs are in --model_dir."
# Each recipe's command line as far as its flags go: the run never gets past its imports.
RECIPE_COMMANDS = {
    "pretrain.py": ["--model_dir", "{tmp}/run"],
    "finetune_glue.py": ["--task", "rte", "--data_dir", "{tmp}/glue", "--model_dir", "{tmp}/run"],
    "finetune_classifier.py": ["--train_file", "{tmp}/train.csv", "--validation_file", "{tmp}/dev.csv",
                               "--text_column", "text", "--label_column", "label", "--model_dir", "{tmp}/run"],
    "finetune_conll.py": ["--data_dir", "{tmp}/conll", "--preset", "bert_tiny_en_uncased",
                          "--model_dir", "{tmp}/run"],
    "finetune_squad.py": ["--train_file", "{tmp}/train.json", "--predict_file", "{tmp}/dev.json",
                          "--preset", "bert_tiny_en_uncased", "--model_dir", "{tmp}/run"],
}


def _maps(pid):
    try:
        with open(f"/proc/{pid}/maps") as f:
            return f.read()
    except OSError:
        return ""


def _signal_when(process, ready, signum):
    """Sends `signum` to `process` once `ready()` returns; its `(stdout, stderr)` once it has ended (killed if a
    failed check leaves it running)."""
    try:
        ready()
        process.send_signal(signum)
        return process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _default_sigint():
    """A child's SIGINT as a terminal gives it, whatever the test runner has: a runner started in the background
    (`nohup`, `cmd &`) ignores SIGINT, its children inherit that, and `one_line_on_ctrl_c` then rightly does nothing
    (a session-40 CI rehearsal started with nohup failed two of these tests so)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/maps"), reason="needs /proc/<pid>/maps (Linux)")
@pytest.mark.parametrize("recipe", sorted(RECIPE_COMMANDS))
def test_ctrl_c_while_the_recipe_imports_is_one_line_and_status_130(recipe, tmp_path):
    """SIGINT once the recipe has started importing NumPy (the first of the heavy imports, before TensorFlow's,
    which go on for seconds): not after a fixed delay, which a loaded machine could make land before Python has
    started or after the imports."""
    argv = [arg.format(tmp=tmp_path) for arg in RECIPE_COMMANDS[recipe]]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
    process = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "recipes", recipe), *argv], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_sigint)

    def importing_numpy():
        deadline = time.monotonic() + 300
        while "numpy" not in _maps(process.pid):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the recipe did not start importing NumPy in 300 s"
            time.sleep(0.005)

    stdout, stderr = _signal_when(process, importing_numpy, signal.SIGINT)
    assert "Traceback" not in stderr, stderr
    assert process.returncode == 130, stderr
    assert [line for line in stderr.splitlines() if line.strip()][-1] == STARTING, stderr
    assert stdout == ""


def test_ctrl_c_outside_the_job_says_whether_the_run_had_started_or_finished(monkeypatch):
    monkeypatch.setitem(interruption._run_state, "job", None)
    assert interruption.interrupted_outside_job_line() == STARTING
    assert command_line.exit_on_user_error(lambda: "results") == "results"
    assert interruption.interrupted_outside_job_line() == FINISHED


@pytest.mark.parametrize("debug", [False, True])
def test_an_uncaught_ctrl_c_after_the_job_is_one_line_and_status_130(debug):
    """A Ctrl-C while a recipe prints its results (after `exit_on_user_error`): one line, or with --debug the
    traceback."""
    script = ("import command_line, interruption\n"
              "interruption.one_line_on_ctrl_c()\n"
              "command_line.exit_on_user_error(lambda: None)\n"
              "print('results')\n"
              "raise KeyboardInterrupt\n")
    result = subprocess.run([sys.executable, "-c", script, *(["--debug"] if debug else [])],
                            cwd=os.path.join(REPO, "recipes"), capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3"),
                            preexec_fn=_default_sigint)
    assert result.stdout == "results\n"
    if debug:
        assert "Traceback" in result.stderr and result.returncode != 130
    else:
        assert "Traceback" not in result.stderr, result.stderr
        assert result.returncode == 130, result.stderr
        assert [line for line in result.stderr.splitlines() if line.strip()][-1] == FINISHED


def test_a_ctrl_c_lost_in_a_callback_comes_again_instead_of_the_run_going_on():
    """A SIGINT that arrives while the garbage collector runs is raised in its callbacks (JAX registers one), where
    Python drops it (`Exception ignored in ...`): 3 of 25 Ctrl-Cs during pretrain.py's start went unheeded so, and
    the run trained to the end."""
    script = ("import time\n"
              "import interruption\n"
              "interruption.one_line_on_ctrl_c()\n"
              "class Callback:\n"
              "    def __del__(self):\n"
              "        raise KeyboardInterrupt  # as a Ctrl-C handled in a gc callback\n"
              "Callback()\n"
              "time.sleep(60)\n"
              "print('went on')\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=os.path.join(REPO, "recipes"), capture_output=True,
                            text=True, timeout=300, preexec_fn=_default_sigint)
    assert (result.returncode, result.stdout, result.stderr) == (130, "", STARTING + "\n")


def test_a_recipe_that_imported_tensorflow_prints_only_its_one_line(tmp_path):
    """finetune_classifier.py imports TensorFlow before it reads its files: its stderr is the one error line."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    missing = tmp_path / "train.csv"
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "recipes", "finetune_classifier.py"), "--train_file", str(missing),
         "--validation_file", str(missing), "--text_column", "sentence", "--label_column", "label",
         "--model_dir", str(tmp_path / "run"), "--strategy", "cpu"],
        capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: "), result.stderr


def test_ctrl_c_while_a_finished_run_removes_its_checkpoints_says_its_outputs_are_written(tmp_path, capsys,
                                                                                        monkeypatch):
    """Ctrl-C after the outputs were written, while the checkpoints went: was 'Interrupted before the first
    checkpoint (...): rerun the same command to start again', and the rerun trained anew."""
    from keras_bert_impl.training import finetuning_resume
    from keras_bert_impl.training.finetuning import FinetuneResult

    monkeypatch.setitem(finetuning_resume.finished, "outputs_written", 3)  # earlier runs of this process count not
    result = FinetuneResult(history={}, best_epoch=1, best_metrics={}, best_weights_path=None, epoch_seconds=[],
                            train_steps=1, stopped_early=False,
                            _remove_checkpoints=lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    status, err = _exit(result.remove_checkpoints, capsys, checkpoints=str(tmp_path / "checkpoints"))
    assert (status, err) == (130, "Interrupted after the run had finished, while removing its checkpoints: its "
                                  "outputs are in --model_dir.\n")
    status, err = _exit(lambda: (_ for _ in ()).throw(KeyboardInterrupt()), capsys,
                        checkpoints=str(tmp_path / "checkpoints"))  # the next job's Ctrl-C, before its outputs
    assert (status, err) == (130, f"Interrupted before the first checkpoint ({tmp_path / 'checkpoints'}): rerun "
                                  "the same command to start again.\n")


def test_a_warning_of_a_recipe_run_is_one_line(tmp_path):
    """A TruncationWarning in a fine-tuning recipe printed Python's two lines: recipes/command_line.py's path and line
    (where `run` was called) with the category, then that source line. `--debug` keeps Python's form. (The format is
    checked, not stderr: pytest records warnings instead of printing them.)"""
    import argparse
    import warnings

    from keras_bert_impl.text import TruncationWarning

    python_form = warnings.formatwarning
    parser = argparse.ArgumentParser()
    command_line.add_run_arguments(parser, seed=0)
    message = "3 of 16 examples (18.8%) are longer than sequence_length=8 tokens"

    def run(config):
        return warnings.formatwarning(message, TruncationWarning, command_line.__file__, 156)

    args = parser.parse_args(["--model_dir", str(tmp_path / "debug"), "--compilation_cache", "none", "--debug"])
    assert command_line.run_recipe(args, run, lambda args: None).splitlines()[0].endswith(
        f": TruncationWarning: {message}")
    args = parser.parse_args(["--model_dir", str(tmp_path / "out"), "--compilation_cache", "none"])
    assert command_line.run_recipe(args, run, lambda args: None) == f"warning: {message}\n"
    assert warnings.formatwarning is python_form  # the run's own: the caller's form is back after it


def test_a_run_in_a_finished_runs_model_dir_keeps_its_outputs_in_previous_runs(tmp_path, capfd):
    """Rerunning a finished command (its checkpoints removed at the end) trains again. Its outputs were replaced as
    the new run wrote its own, and a rerun stopped early left them mixed with the new run's files, the old
    TensorBoard logs deleted. Now they move to previous_runs/<time> first. A stopped run's directory (checkpoints/
    present) resumes and says nothing here."""
    import argparse

    parser = argparse.ArgumentParser()
    command_line.add_run_arguments(parser, seed=0)
    model_dir = tmp_path / "out"
    model_dir.mkdir()
    args = parser.parse_args(["--model_dir", str(model_dir), "--compilation_cache", "none"])
    command_line.start_job(args)
    assert "note:" not in capfd.readouterr().err
    (model_dir / "model.keras").write_bytes(b"a finished run's model")
    os.utime(model_dir / "model.keras", (0, 1_700_000_000))
    (model_dir / "logs" / "train").mkdir(parents=True)
    (model_dir / "logs" / "train" / "events.out.tfevents.1").write_bytes(b"the finished run's curves")
    (model_dir / "dev_results.json").write_text("{}")
    (model_dir / ".run.lock").write_text("")
    command_line.start_job(args)
    written = time.strftime("%Y-%m-%d %H:%M", time.localtime(1_700_000_000))
    kept = model_dir / "previous_runs" / time.strftime("%Y-%m-%dT%H-%M-%S", time.localtime(1_700_000_000))
    assert capfd.readouterr().err.splitlines() == [
        f"note: {model_dir} holds a finished run's outputs (model.keras of {written}); this run trains again, and "
        f"they move to {kept} first (TensorBoard shows its logs there as a run of their own)"]
    assert sorted(os.listdir(model_dir)) == [".run.lock", "previous_runs"]  # the new run's files alone, to come
    assert sorted(os.listdir(kept)) == ["dev_results.json", "logs", "model.keras"]
    assert (kept / "model.keras").read_bytes() == b"a finished run's model"
    assert (kept / "logs" / "train" / "events.out.tfevents.1").exists()
    # The next rerun keeps that one too, beside the run before it.
    (model_dir / "model.keras").write_bytes(b"the second run's model")
    os.utime(model_dir / "model.keras", (0, 1_700_000_600))
    command_line.start_job(args)
    second = model_dir / "previous_runs" / time.strftime("%Y-%m-%dT%H-%M-%S", time.localtime(1_700_000_600))
    # ... and says what the folder held already: each rerun adds a run there, and nothing but the user removes them.
    assert capfd.readouterr().err.splitlines()[-1].endswith(
        f"they move to {second} first (TensorBoard shows its logs there as a run of their own); "
        f"{model_dir / 'previous_runs'} holds 1 earlier run already (0.0 MB): remove those you no longer need "
        f"(rm -r {kept})")
    assert len(os.listdir(model_dir / "previous_runs")) == 2
    # Training further from the run's own model.keras in the same folder: its files stay where the flag names them.
    (model_dir / "model.keras").write_bytes(b"the third run's model")
    further = argparse.Namespace(**vars(args), init_checkpoint=str(model_dir / "model.keras"))
    command_line.start_job(further)
    assert capfd.readouterr().err.splitlines()[-1].endswith(
        "and --init_checkpoint starts from them: this run replaces them as it writes its own")
    assert (model_dir / "model.keras").exists() and len(os.listdir(model_dir / "previous_runs")) == 2
    # A predict-only run (--epochs 0) into the same directory, as the quickstart shows: no note, the logs stay.
    (model_dir / "logs" / "train").mkdir(parents=True)
    predicting = argparse.Namespace(**vars(args), epochs=0)
    command_line.start_job(predicting)
    assert "note:" not in capfd.readouterr().err and (model_dir / "logs" / "train").exists()
    (model_dir / "checkpoints").mkdir()
    command_line.start_job(args)
    assert "note:" not in capfd.readouterr().err


@pytest.mark.parametrize("sigint_ignored", [False, True])
def test_sigterm_stops_a_recipe_with_one_line_that_says_how_to_resume_and_status_143(tmp_path, sigint_ignored):
    """SIGTERM is what a scheduler or a preempted machine sends. Before: no line, status 143 from Python's default
    (and where the job was started with nohup, as such jobs are, the same). Now the Ctrl-C line, naming SIGTERM."""
    checkpoints = tmp_path / "checkpoints"
    _checkpoint(checkpoints, "ckpt-000000002")
    script = ("import sys, time\n"
              "import command_line, interruption\n"
              "interruption.one_line_on_ctrl_c()\n"
              "def job():\n"
              "    print('ready', flush=True)\n"
              "    time.sleep(120)\n"
              f"command_line.exit_on_user_error(job, checkpoints={str(checkpoints)!r})\n")

    def signals():
        signal.signal(signal.SIGINT, signal.SIG_IGN if sigint_ignored else signal.SIG_DFL)

    process = subprocess.Popen([sys.executable, "-c", script], cwd=os.path.join(REPO, "recipes"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=signals,
                               env=dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3"))

    def job_started():
        assert process.stdout.readline() == "ready\n"

    stdout, stderr = _signal_when(process, job_started, signal.SIGTERM)
    assert "Traceback" not in stderr, stderr
    assert process.returncode == 143, stderr
    assert stderr.splitlines()[-1] == (
        f"Stopped by SIGTERM: rerun the same command to resume from the last checkpoint "
        f"({checkpoints / 'ckpt-000000002'}).")


def test_sigterm_to_the_whole_group_still_prints_the_line_through_the_stderr_filter(tmp_path):
    """SLURM's scancel, systemd and `kill -- -PGID` send SIGTERM to every process of the group. Before: the recipe's
    stderr filter (`native_logs.quiet_native_logs`, a forked child) could die of it first, and the recipe's
    `Stopped by SIGTERM` line then went into a dead pipe: status 143 and no line (2 runs in 3). Here the filter gets
    its SIGTERM first, every time."""
    checkpoints = tmp_path / "checkpoints"
    _checkpoint(checkpoints, "ckpt-000000002")
    script = ("import sys, time\n"
              "import command_line, interruption, native_logs\n"
              "interruption.one_line_on_ctrl_c()\n"
              "native_logs.quiet_native_logs([])\n"
              "def job():\n"
              "    print(native_logs._filter['pid'], flush=True)\n"
              "    time.sleep(120)\n"
              f"command_line.exit_on_user_error(job, checkpoints={str(checkpoints)!r})\n")
    process = subprocess.Popen([sys.executable, "-c", script], cwd=os.path.join(REPO, "recipes"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint,
                               env=dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2"))
    try:
        stderr_filter = int(process.stdout.readline())
        os.kill(stderr_filter, signal.SIGTERM)
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 143, stderr
    assert stderr.splitlines()[-1:] == [
        f"Stopped by SIGTERM: rerun the same command to resume from the last checkpoint "
        f"({checkpoints / 'ckpt-000000002'})."]


def test_an_interrupted_jax_process_leaves_at_once_after_its_line(monkeypatch, capsys):
    """A JAX pretraining run stopped by Ctrl-C 5-8 s into its first epoch printed its line, then crashed in Python's
    shutdown (`Segmentation fault`, exit status 139) one time in two here. Now it leaves with `os._exit(130)` right
    after the line; without JAX it leaves through `SystemExit`, as before."""
    calls = []

    class Left(BaseException):
        pass

    def exit_now(status):
        calls.append(status)
        raise Left

    monkeypatch.setattr(interruption.os, "_exit", exit_now)
    monkeypatch.setitem(interruption._run_state, "signal", signal.SIGINT)
    monkeypatch.setitem(interruption._run_state, "recipe_process", True)  # (one_line_on_ctrl_c was called)
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    with pytest.raises(Left):
        interruption.leave("Interrupted: rerun the same command to resume.", status=130)
    assert calls == [130] and capsys.readouterr().err == "Interrupted: rerun the same command to resume.\n"
    with pytest.raises(SystemExit) as leaving:  # an error's status: the normal way out
        interruption.leave("error: bad flag", status=2)
    assert leaving.value.code == 2 and calls == [130]
    monkeypatch.setattr(keras.backend, "backend", lambda: "tensorflow")
    with pytest.raises(SystemExit) as leaving:  # TensorFlow's shutdown is safe: the normal way out
        interruption.leave("Interrupted: rerun the same command to resume.", status=130)
    assert leaving.value.code == 130 and calls == [130]
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    monkeypatch.setitem(interruption._run_state, "recipe_process", False)
    with pytest.raises(SystemExit):  # a job run inside another program (a test, a notebook) is never ended at once
        interruption.leave("Interrupted: rerun the same command to resume.", status=130)


# === Defect: a Ctrl-C at the end of a finished recipe run, after main returned, was lost: status 0, no line ===

FINISHED_SCRIPT = ("import atexit, os, signal, sys, threading, time\n"
                   "import command_line, interruption, native_logs\n"
                   "native_logs.quiet_native_logs()\n"
                   "interruption.one_line_on_ctrl_c()\n"
                   "command_line.exit_on_user_error(lambda: None)  # the job has returned: its outputs are written\n"
                   "print('results', flush=True)\n")
# Where the signal comes once `main` has returned, each at a fixed point of Python's shutdown.
LATE_SIGNALS = {
    # in an exit handler (TensorFlow, JAX, logging register theirs after one_line_on_ctrl_c): the KeyboardInterrupt
    # was dropped there (`Exception ignored in atexit callback`), status 0
    "exit handler": "atexit.register(lambda: os.kill(os.getpid(), SIGNAL))\n",
    # while Python waits for the threads at exit: dropped as well
    "thread join": ("def late():\n"
                    "    while threading.main_thread().is_alive():  # (until Python's shutdown has begun)\n"
                    "        time.sleep(0.001)\n"
                    "    os.kill(os.getpid(), SIGNAL)\n"
                    "    time.sleep(0.2)\n"
                    "threading.Thread(target=late).start()\n"),
    # received where Python runs no handler any more (here held by a blocked mask, as a signal that comes after
    # Python's last instruction): the process left with status 0 and the signal unheeded
    "last instant": ("def held():\n"
                     "    signal.pthread_sigmask(signal.SIG_BLOCK, {SIGNAL})\n"
                     "    os.kill(os.getpid(), SIGNAL)\n"
                     "atexit.register(held)\n"),
}


def _run_finished_recipe(tail, signum=signal.SIGINT):
    script = FINISHED_SCRIPT + tail.replace("SIGNAL", f"signal.{signal.Signals(signum).name}")
    return subprocess.run([sys.executable, "-c", script], cwd=os.path.join(REPO, "recipes"), capture_output=True,
                          text=True, timeout=60, check=False, preexec_fn=_default_sigint,
                          env=dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3"))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("instant", sorted(LATE_SIGNALS))
def test_a_signal_while_a_finished_run_exits_is_its_one_line_and_status(instant, signum):
    """A Ctrl-C (or SIGTERM) after a finished recipe's main returned, while Python shut down, went unheeded: exit
    status 0 and no line (randomly timed Ctrl-Cs 0-4 ms after the job: 22 of 100 so, and 6 ended by SIGINT without a
    line; with Keras imported 59 of 60 in the 30 ms after the job). Now: the documented line and 130 (143)."""
    result = _run_finished_recipe(LATE_SIGNALS[instant], signum)
    line = FINISHED if signum == signal.SIGINT else "Stopped by SIGTERM" + FINISHED[len("Interrupted"):]
    assert (result.returncode, result.stdout, result.stderr) == (128 + signum, "results\n", line + "\n")


def test_a_second_ctrl_c_after_the_line_prints_no_second_line():
    """The second Ctrl-C comes after the line was printed, before the process has left."""
    tail = ("def again():  # (called after the line is printed)\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    for _ in range(10000):  # Python runs a signal's handler between instructions\n"
            "        pass\n"
            "interruption._remove_private_folders = again\n"
            "os.kill(os.getpid(), signal.SIGINT)\n"
            "time.sleep(5)\n")
    result = _run_finished_recipe(tail)
    assert (result.returncode, result.stdout, result.stderr) == (130, "results\n", FINISHED + "\n")


@pytest.mark.parametrize("tail, status, stderr", [
    ("", 0, ""),
    ("sys.exit(0)\n", 0, ""),
    ("sys.exit(3)\n", 3, ""),
    ("sys.exit('error: a message')\n", 1, "error: a message\n"),
    ("interruption.leave('error: a bad file', status=2)\n", 2, "error: a bad file\n"),
    ("raise KeyError('a bug')\n", 1, "KeyError: 'a bug'\n"),
])
def test_a_finished_run_without_a_signal_leaves_with_pythons_status(tail, status, stderr):
    """A finished run's process now leaves from its last exit handler (`os._exit`), not at the end of Python's
    shutdown: with the status and the output it had before."""
    result = _run_finished_recipe(tail + "print('not reached')\n" if tail else tail)
    assert (result.returncode, result.stdout) == (status, "results\n"), result.stderr
    assert result.stderr.endswith(stderr), result.stderr
    assert ("Traceback" in result.stderr) == tail.startswith("raise"), result.stderr


def test_a_full_disk_is_one_line_whatever_raised_it(tmp_path, capsys):
    """Session 56's audit on a real full tmpfs: the TensorBoard writer's ResourceExhaustedError was a 54-line
    traceback (exit status 1), an HDF5 write a raw `[Errno 28] Can't synchronously write data (...buf = 0x...)`, and
    Python's `[Errno 28] No space left on device` named no file. A checkpoint's own message (which says what to do)
    is kept as it is."""
    import tensorflow as tf

    events = tmp_path / "logs" / "train" / "events.out.tfevents.1796.host.v2"
    advice = ("free space there (or choose another output folder) and run the same command again; a training run "
              "resumes from its last checkpoint, and nothing half-written is read\n")
    cases = [
        (tf.errors.ResourceExhaustedError(None, None, f"{{{{function_node __wrapped__CreateSummaryFileWriter}}}} "
                                                      f"{events}; No space left on device [Op:CreateSummaryFileWriter]"),
         f"error: no space left on device (writing {events}): {advice}"),
        (OSError(28, "Can't synchronously write data (file write failed: time = Wed Dec 2, filename = "
                     f"'{tmp_path}/.vm-1.best.weights.h5', file descriptor = 7, errno = 28, error message = 'No "
                     "space left on device', buf = 0x561d, total write size = 4096)"),
         f"error: no space left on device (writing {tmp_path}/.vm-1.best.weights.h5): {advice}"),
        (OSError(28, "No space left on device", str(tmp_path / "model.keras")),
         f"error: no space left on device (writing {tmp_path / 'model.keras'}): {advice}"),
        (OSError(27, "File too large"), "error: file too large: " + advice.replace(" there", "")),
    ]
    for error, line in cases:
        def job(error=error):
            raise error
        assert _exit(job, capsys) == (2, line)
    ours = OSError(28, "Could not write checkpoint ckpt-2 (No space left on device). Free disk space (or point "
                       "--model_dir elsewhere) and run the same command again.")
    ours.strerror = str(ours.args[1])
    assert _exit(lambda: (_ for _ in ()).throw(ours), capsys)[1].startswith("error: [Errno 28] Could not write")


def test_the_commands_a_run_prints_quote_a_path_with_spaces(tmp_path):
    # Pasted into a shell, `--init_checkpoint /runs/run 1/model.keras` was two arguments (session 56's audit).
    run = tmp_path / "run 1 é"
    run.mkdir()
    (run / "model.keras").write_bytes(b"")
    line = command_line.outputs_line(str(run), 0)
    assert line == f"Written to {run}: model.keras (to predict with it: --init_checkpoint '{run}/model.keras' --epochs 0)"


def test_a_full_disk_at_the_run_lock_names_the_lock_file(tmp_path, capsys, monkeypatch):
    # A real full tmpfs (session 56): the run's first write, its lock file's line, failed with a bare
    # "[Errno 28] No space left on device" that named no file, in pretrain.py and the fine-tuning recipes.
    from keras_bert_impl.training import run_lock

    def full(fd, data, offset):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_lock.os, "pwrite", full)

    def job():
        with run_lock.hold_model_dir(tmp_path / "run"):
            pass

    lock = tmp_path / "run" / ".run.lock"
    assert _exit(job, capsys) == (2, f"error: no space left on device (writing {lock}): free space there (or choose "
                                     "another output folder) and run the same command again; a training run resumes "
                                     "from its last checkpoint, and nothing half-written is read\n")


def test_another_users_run_lock_file_is_locked_read_only_or_named_with_what_to_do(tmp_path, capsys, monkeypatch):
    # Session 56's storage audit: a run started as root, resumed as oneself, stopped at once on the root-owned
    # lock file with a bare "[Errno 13] Permission denied: '.../.run.lock'". A lock does not need writing: the run
    # goes on, locked; a lock file that cannot even be read is one line saying what to do.
    import errno

    from keras_bert_impl.training import run_lock

    model_dir = tmp_path / "run"
    model_dir.mkdir()
    lock = model_dir / ".run.lock"
    lock.write_text("pid 1 on host, started 2026-11-30 01:23:45\n")
    real_open = os.open
    refused = {os.O_RDWR | os.O_CREAT}

    def open_as_another_user(path, flags, *mode):
        if flags in refused:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *mode)

    monkeypatch.setattr(run_lock.os, "open", open_as_another_user)
    with run_lock.hold_model_dir(model_dir) as held:
        assert held == str(lock)
        with pytest.raises(run_lock.ModelDirInUseError, match=r"in use by another run \(pid 1 on host"):
            with run_lock.hold_model_dir(model_dir):
                pass
    assert lock.read_text() == "pid 1 on host, started 2026-11-30 01:23:45\n"  # (not ours to write)

    refused.add(os.O_RDONLY)
    monkeypatch.setattr(run_lock, "_owner", lambda path: "; it belongs to root")

    def job():
        with run_lock.hold_model_dir(model_dir):
            pass

    assert _exit(job, capsys) == (2, f"error: {lock} cannot be opened (permission denied; it belongs to root): it is "
                                     f"the run lock of --model_dir {model_dir} and holds no state; remove it (rm "
                                     f"{lock}) once no run uses that folder, or run as the user who owns the folder, "
                                     "then run the same command again\n")
