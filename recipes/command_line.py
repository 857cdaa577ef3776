"""What the fine-tuning recipes' command lines share: one-line errors, the run flags, and starting the job.

Every recipe fails the same way on bad input: one line `error: ...` on stderr
and exit status 2, for a bad flag (`OneLineParser`) as for a missing or bad
file found while the job runs (`exit_on_user_error`); `--debug` shows the
traceback instead. This module sits beside the recipes, not in the package,
and imports only the standard library (and `interruption.py` beside it): a bad
flag fails before Keras or TensorFlow is imported. Ctrl-C ends a recipe with one
line and exit status 130 at any point, its imports included: that is
`interruption.py`'s (`one_line_on_ctrl_c`, which every recipe calls before its
first import of Keras or TensorFlow), whose `leave` also ends the process on a
user error here.

    >>> parser = OneLineParser(prog="finetune_example.py")
    >>> add_run_arguments(parser)
    >>> args = parser.parse_args(["--model_dir", "/tmp/run"])
    >>> args.strategy, args.mixed_precision, args.seed, args.compilation_cache, args.debug
    ('auto', 'auto', 42, 'auto', False)
    >>> args.coordinator_address, args.num_processes, args.process_id
    (None, None, None)
"""

import argparse
import math
import os
import shutil
import sys
import traceback

import interruption

STRATEGIES = ("auto", "cpu", "gpu", "mirrored", "multiworker", "tpu")
LARGEST_SEED = 2**32 - 1  # NumPy's seeds, which keras.utils.set_random_seed sets, are 0 .. 2**32 - 1


class OneLineParser(argparse.ArgumentParser):
    """`argparse` whose errors are one line, `error: <message> (see --help)`, with exit status 2."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


FINETUNING_SEED = 42  # every fine-tuning recipe's and run config's default --seed (Hugging Face's Trainer's too)


def add_run_arguments(parser, seed=FINETUNING_SEED, model_dir_aliases=(), model_dir_default=None,
                      model_dir_help=None):
    """The flags of where and how a job runs, the same in every recipe: --strategy (and the JAX / PyTorch cluster
    flags of multiworker), --mixed_precision, --seed (default 42, as every fine-tuning config; pretrain.py passes
    its own), --compilation_cache, --triton_gemm, --model_dir (and its `model_dir_aliases`, e.g. Hugging Face's
    --output_dir; required unless `model_dir_default` is given, as pretrain.py's is), --debug."""
    parser.add_argument("--strategy", default="auto", choices=STRATEGIES,
                        help="TensorFlow: all; JAX: auto, cpu, gpu, mirrored, multiworker; PyTorch: auto, cpu, gpu, "
                             "multiworker (torchrun) (docs/finetuning.md)")
    parser.add_argument("--coordinator_address", default=None,
                        help="--strategy multiworker on JAX or PyTorch: host:port of process 0 (with --num_processes "
                             "and --process_id; none of the three: the cluster comes from torchrun, SLURM or the "
                             "Cloud TPU environment)")
    parser.add_argument("--num_processes", type=int, default=None, help="the number of processes (multiworker)")
    parser.add_argument("--process_id", type=int, default=None, help="this process's index (multiworker)")
    parser.add_argument("--mixed_precision", default="auto",
                        help="auto (default): bf16 on a TPU or a GPU with bfloat16 (compute capability 8.0+), "
                             "float32 elsewhere; none, bf16 or fp16")
    parser.add_argument("--seed", type=seed_value, default=seed,
                        help=f"random seed, 0 to {LARGEST_SEED} (2**32 - 1; default {seed})")
    parser.add_argument("--compilation_cache", default="auto",
                        help="JAX's persistent XLA compilation cache: auto (default: ~/.cache/keras_bert_impl/"
                             "jax_compilation_cache on a GPU or TPU, off on a CPU), none, or a folder")
    parser.add_argument("--triton_gemm", default="auto", choices=("auto", "on", "off"),
                        help="XLA's own Triton kernels for some matmuls on a GPU: auto (default: off on JAX, so "
                             "cuBLAS runs every matmul, 5%% faster for BERT-base's training step on an H200, "
                             "docs/benchmarks.md; XLA's choice on TensorFlow and PyTorch; an XLA_FLAGS that names the "
                             "option wins), on (XLA's choice), or off")
    aliases = f" (alias: {', '.join(model_dir_aliases)})" if model_dir_aliases else ""
    parser.add_argument("--model_dir", *model_dir_aliases, dest="model_dir", required=model_dir_default is None,
                        default=model_dir_default,
                        help=(model_dir_help or "where the results, predictions and model go") + aliases)
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error")


def positive(kind):
    """An argparse `type` that takes numbers of `kind` (int or float) above 0, and finite: `--epochs 0` is the one
    line `error: argument --epochs: must be positive, got 0 (see --help)`, `--learning_rate inf` `... must be a
    finite number > 0, got inf ...`.

    >>> positive(float)("2e-5"), positive(int)("3")
    (2e-05, 3)
    """
    what = "an integer" if kind is int else "a number"

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what} > 0, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


def epochs_value(text):
    """An argparse `type` for --epochs: an integer >= 0, 0 meaning predict only (`--epochs 1.5` is the one line
    `error: argument --epochs: must be an integer >= 1 (or 0 with a fine-tuned --init_checkpoint model.keras, to
    predict only), got '1.5' (see --help)`).

    >>> epochs_value("3"), epochs_value("0")
    (3, 0)
    """
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError("must be an integer >= 1 (or 0 with a fine-tuned --init_checkpoint "
                                         f"model.keras, to predict only), got {text!r}")
    return value


def seed_value(text):
    """An argparse `type` for --seed: an integer from 0 to 2**32 - 1, NumPy's range (`--seed -1` is the one line
    `error: argument --seed: must be an integer from 0 to 4294967295 (2**32 - 1), got -1 (see --help)`)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to {LARGEST_SEED} (2**32 - 1), got {text!r}")
    if not 0 <= value <= LARGEST_SEED:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to {LARGEST_SEED} (2**32 - 1), got {text}")
    return value


def check_model_dir(model_dir):
    """Refuses, in one line, a local `--model_dir` that is a file or cannot be written, before any work
    (`keras_bert_impl.training.pretraining_checks.check_writable_model_dir`, pretraining's check)."""
    from keras_bert_impl.training.pretraining_checks import check_writable_model_dir
    from keras_bert_impl.training.remote_model_dir import refuse_remote_for_finetuning

    refuse_remote_for_finetuning(model_dir, "--model_dir")
    check_writable_model_dir(model_dir)


def add_lora_argument(parser):
    """--lora_rank: train LoRA factors of that rank on every block's query/key/value projection, the rest of the
    backbone frozen (`BertBackbone.enable_lora`)."""
    parser.add_argument("--lora_rank", type=positive(int), default=None,
                        help="LoRA of this rank on every block's query/key/value projection, the rest of the backbone "
                             "frozen; the --learning_rate default becomes 5e-4 (docs/finetuning.md)")


def add_subset_arguments(parser, unit, evaluated, old_names=()):
    """--max_train_samples and --max_eval_samples (Hugging Face's names; every fine-tuning recipe has both): train
    on, and score, the first N `unit` of the files only, for a quick run or a documented subset. `evaluated` says
    what the second one cuts; `old_names` are the recipe's earlier flags for the two, kept as aliases. A value
    below 1 is refused by the task's `check_flags` (`--max_train_samples=0: must be an integer >= 1`)."""
    old_train, old_eval = (tuple(old_names) + (None, None))[:2]
    parser.add_argument("--max_train_samples", *[old_train] if old_train else [], dest="max_train_samples",
                        type=int, default=None,
                        help=f"train on the first N {unit} only" + (f" (old name: {old_train})" if old_train else ""))
    parser.add_argument("--max_eval_samples", *[old_eval] if old_eval else [], dest="max_eval_samples",
                        type=int, default=None,
                        help=f"score the first N {unit} of {evaluated} only"
                             + (f" (old name: {old_eval})" if old_eval else ""))


def add_predict_batch_size_argument(parser, old_name=None):
    """--predict_batch_size: the batch of every forward pass without training (scoring and predicting)."""
    parser.add_argument("--predict_batch_size", *[old_name] if old_name else [], dest="predict_batch_size",
                        type=int, default=64,
                        help="the batch of evaluation and prediction (default 64)"
                             + (f"; old name: {old_name}" if old_name else ""))


def start_job(args):
    """What every fine-tuning job does first, before it compiles anything: refuses a --strategy this backend does
    not run and a --model_dir that cannot be written (`check_model_dir`), joins the other processes of a JAX or
    PyTorch `--strategy multiworker` job (before JAX's first computation), and turns on JAX's compilation cache
    (--compilation_cache). XLA's Triton GEMM option (--triton_gemm) is set before anything starts a JAX device."""
    import keras

    from keras_bert_impl.training.compilation_cache import enable_compilation_cache
    from keras_bert_impl.training.strategy import check_finetuning_strategy, get_strategy
    from keras_bert_impl.training.triton_gemm import apply_triton_gemm

    apply_triton_gemm(getattr(args, "triton_gemm", "auto"))
    check_finetuning_strategy(args.strategy)
    check_model_dir(args.model_dir)
    # (a predict-only run, --epochs 0, trains nothing and replaces nothing of the run whose model it reads: it was
    # told "this run trains again", and the finished run's TensorBoard logs were removed)
    starting_inside = _inside(getattr(args, "init_checkpoint", None), args.model_dir)
    try:
        note = finished_run_note(args.model_dir, starting_inside) if getattr(args, "epochs", None) != 0 else None
        if note:
            print(note, file=sys.stderr)
            if not starting_inside:
                keep_finished_run(args.model_dir)
    except FileNotFoundError:  # (another process of the job moved the finished run meanwhile)
        pass
    cluster = {name: getattr(args, name, None) for name in ("coordinator_address", "num_processes", "process_id")}
    if args.strategy == "multiworker" and keras.backend.backend() in ("jax", "torch"):
        get_strategy("multiworker", **cluster)  # the task's own get_strategy then finds the processes joined
    elif any(value is not None for value in cluster.values()):
        get_strategy(args.strategy, **cluster)  # refuses the cluster flags in one line
    directory = enable_compilation_cache(args.compilation_cache)
    if directory:
        print(f"XLA compilation cache: {directory} (--compilation_cache none turns it off)", file=sys.stderr)


PREVIOUS_RUNS = "previous_runs"  # <model_dir>/previous_runs/<time of its model.keras>: a finished run, kept


def _finished_run_folder(model_dir):
    """Where `keep_finished_run` moves the finished run of `model_dir`: named after its `model.keras`'s time, the
    same in every process of a job."""
    import time

    written = os.path.getmtime(os.path.join(model_dir, "model.keras"))
    return os.path.join(model_dir, PREVIOUS_RUNS, time.strftime("%Y-%m-%dT%H-%M-%S", time.localtime(written)))


def _inside(path, model_dir):
    """Whether `path` (a local file or folder) lies in `model_dir`, outside its `previous_runs/`."""
    if not path or "://" in str(path):
        return False
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(model_dir))
    return not relative.startswith(os.pardir) and relative.split(os.sep)[0] not in (PREVIOUS_RUNS, os.curdir)


def finished_run_note(model_dir, starting_inside=False):
    """The line a run prints when `model_dir` holds a finished run's outputs (its `model.keras`, and no checkpoints
    to resume from): this run trains again, and those outputs move to `previous_runs/<time>` first
    (`keep_finished_run`). A stopped run, which has checkpoints, resumes instead.

    >>> import tempfile, os
    >>> directory = tempfile.mkdtemp(); finished_run_note(directory) is None
    True
    >>> open(os.path.join(directory, "model.keras"), "wb").close()
    >>> finished_run_note(directory).startswith(f"note: {directory} holds a finished run's outputs (model.keras of ")
    True
    """
    import time

    model_file = os.path.join(model_dir, "model.keras")
    if not os.path.isfile(model_file) or os.path.isdir(os.path.join(model_dir, "checkpoints")):
        return None
    written = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(model_file)))
    if starting_inside:  # (training further from its own model.keras: its files stay where the flag names them)
        return (f"note: {model_dir} holds a finished run's outputs (model.keras of {written}), and --init_checkpoint "
                "starts from them: this run replaces them as it writes its own")
    return (f"note: {model_dir} holds a finished run's outputs (model.keras of {written}); this run trains again, "
            f"and they move to {_finished_run_folder(model_dir)} first (TensorBoard shows its logs there as a run of "
            f"their own){_previous_runs_held(model_dir)}")


def _previous_runs_held(model_dir):
    """What `previous_runs/` holds already, for the note: each rerun of a finished command adds a run to it (a
    BERT-base model.keras alone is 440 MB), and nothing removes them but the user."""
    folder = os.path.join(model_dir, PREVIOUS_RUNS)
    runs = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    if not runs:
        return ""
    size = sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(folder) for name in names
               if not os.path.islink(os.path.join(root, name)))
    return (f"; {folder} holds {len(runs)} earlier run{'s' if len(runs) > 1 else ''} already ({size / 1e6:,.1f} MB): "
            f"remove those you no longer need (rm -r {os.path.join(folder, runs[0])})")


def keep_finished_run(model_dir):
    """Moves a finished run's outputs (every entry of `model_dir` but `previous_runs/` and hidden files) into
    `previous_runs/<time of its model.keras>/`, so that the new run neither replaces them nor mixes its files with
    theirs. Before, they were replaced as the new run wrote its own, and a rerun stopped early left the old
    `model.keras` and results beside the new run's files, the old TensorBoard logs already deleted. Each process of
    a job may call it: an entry another process moved already is passed over. Returns the folder."""
    target = _finished_run_folder(model_dir)
    os.makedirs(target, exist_ok=True)
    for name in sorted(os.listdir(model_dir)):
        if name == PREVIOUS_RUNS or name.startswith("."):
            continue
        try:
            shutil.move(os.path.join(model_dir, name), os.path.join(target, name))
        except FileNotFoundError:  # (moved by another process of the job)
            pass
    return target


def config_from_args(args, config_class):
    """The flags as `config_class` (a task's config dataclass): every flag named like one of its fields."""
    import dataclasses

    fields = {field.name for field in dataclasses.fields(config_class)}
    return config_class(**{key: value for key, value in vars(args).items() if key in fields})


def run_recipe(args, run, config):
    """Starts the job (`start_job`), builds its config and returns `run(config)`; a user error, in the flags'
    values as in the files, is one line and exit status 2.

    Args:
        args: the parsed flags.
        run: the task's `run(config)`.
        config: the task's config dataclass (built from the flags named like its fields, `config_from_args`), or a
            function of `args` that builds the config.
    """
    import dataclasses

    def job():
        import warnings

        from keras_bert_impl.training.strategy import NoTPUError

        python_form = warnings.formatwarning
        if not args.debug:
            one_line_warnings()
        try:
            start_job(args)
            if dataclasses.is_dataclass(config) and isinstance(config, type):
                return run(config_from_args(args, config))
            return run(config(args))
        except NoTPUError as error:  # its advice names pretrain.py's --tpu, which these recipes do not have
            raise ValueError(no_tpu_line(error.reason)) from error
        finally:
            warnings.formatwarning = python_form  # (the job's own: a caller in the same process keeps its form)

    import time

    started = time.time()
    result = exit_on_user_error(job, debug=args.debug, checkpoints=os.path.join(args.model_dir, "checkpoints"))
    line = outputs_line(args.model_dir, started)
    if line:
        print(line, flush=True)  # (before the recipe's JSON summary, which stays its last line)
    return result


def outputs_line(model_dir, since):
    """The line that says which files a run wrote into `model_dir` (those changed since `since`, a time), and how
    its `model.keras` predicts; None when it wrote none.

    >>> import os, tempfile, time
    >>> run = tempfile.mkdtemp(); started = time.time() - 1
    >>> for name in ("model.keras", "dev_results.json"):
    ...     open(os.path.join(run, name), "w").close()
    >>> outputs_line(run, started) == (f"Written to {run}: dev_results.json, model.keras (to predict with it: "
    ...                                f"--init_checkpoint {run}/model.keras --epochs 0)")
    True
    """
    if not os.path.isdir(model_dir):
        return None
    names = sorted(name for name in os.listdir(model_dir) if not name.startswith(".")
                   and os.path.isfile(os.path.join(model_dir, name))
                   and os.path.getmtime(os.path.join(model_dir, name)) >= since - 1)
    if not names:
        return None
    line = f"Written to {model_dir}: {', '.join(names)}"
    if "model.keras" in names:
        import shlex

        model = shlex.quote(os.path.join(model_dir, "model.keras"))
        line += f" (to predict with it: --init_checkpoint {model} --epochs 0)"
    return line


def one_line_warnings():
    """A warning of the run (`TruncationWarning`: examples cut to --sequence_length, Keras's own) prints as one line
    `warning: <message>`, not Python's two (`<file of the call>:<line>: <Category>: ...` and that file's source line,
    which in a recipe is this module's), with the recipe's flag where the library names its attribute. `--debug`
    keeps Python's form.

    >>> import warnings
    >>> python_form = warnings.formatwarning
    >>> one_line_warnings(); warnings.formatwarning("3 of 16 examples are cut: raise "
    ...                                             "preprocessor.sequence_length to keep more.", UserWarning, "x.py", 1)
    'warning: 3 of 16 examples are cut: raise --sequence_length to keep more.\\n'
    >>> warnings.formatwarning = python_form
    """
    import warnings

    def one_line(message, category, filename, lineno, line=None):
        return f"warning: {str(message).replace('preprocessor.sequence_length', '--sequence_length')}\n"

    warnings.formatwarning = one_line


def no_tpu_line(reason):
    """The fine-tuning recipes' one line for `--strategy tpu` where no TPU answers (they take the TPU of this VM).

    >>> no_tpu_line("NotFoundError: TPUs not found in the cluster")  # doctest: +NORMALIZE_WHITESPACE
    '--strategy tpu: no TPU was found on this machine (NotFoundError: TPUs not found in the cluster); the fine-tuning
    recipes use the TPU of the Cloud TPU VM they run on: run there, or pass --strategy auto, cpu or gpu'
    """
    return (f"--strategy tpu: no TPU was found on this machine ({reason}); the fine-tuning recipes use the TPU of "
            "the Cloud TPU VM they run on: run there, or pass --strategy auto, cpu or gpu")


USER_ERRORS = (OSError, ValueError)
# What a full disk (or quota, or `ulimit -f`) says, in Python's, TensorFlow's and HDF5's messages alike.
_FULL_DISK = ("No space left on device", "Disk quota exceeded", "File too large")


def full_disk_line(error):
    """One line for a write that a full disk stopped, where the error says only Python's `[Errno 28] ...`, or is a
    TensorFlow error (the TensorBoard writer's `ResourceExhaustedError`: a 54-line traceback) or HDF5's; None for
    any other error, and for the errors that already say what to do (a checkpoint's `CheckpointWriteError`).

    >>> full_disk_line(OSError(28, "No space left on device"))  # doctest: +NORMALIZE_WHITESPACE
    'error: no space left on device: free space (or choose another output folder) and run the same command again;
    a training run resumes from its last checkpoint, and nothing half-written is read'
    >>> full_disk_line(RuntimeError("CreateSummaryFileWriter: runs/a/logs/train/events.out.tfevents.1.x; No space "
    ...                             "left on device"))  # doctest: +NORMALIZE_WHITESPACE
    'error: no space left on device (writing runs/a/logs/train/events.out.tfevents.1.x): free space there (or
    choose another output folder) and run the same command again; a training run resumes from its last checkpoint,
    and nothing half-written is read'
    """
    import re

    text = " ".join(str(error).split())
    cause = next((phrase for phrase in _FULL_DISK if phrase in text), None)
    if cause is None and isinstance(error, OSError) and error.errno in (28, 122, 27):  # ENOSPC, EDQUOT, EFBIG
        cause = os.strerror(error.errno)
    if cause is None or "run the same command again" in text:
        return None
    if isinstance(error, OSError) and not text.startswith("[Errno"):
        return None  # one of ours, which names its file and says what to do
    where = getattr(error, "filename", None)
    if where is None:
        found = re.search(r"filename = '([^']+)'", text) or re.search(rf"(\S+); {cause}", text)
        where = found.group(1) if found else None
    where = f" (writing {where})" if where else ""
    there = " there" if where else ""
    return (f"error: {cause.lower()}{where}: free space{there} (or choose another output folder) and run the same "
            "command again; a training run resumes from its last checkpoint, and nothing half-written is read")


def _outputs_written():
    """How many fine-tuning runs of this process have written their outputs (`finetuning_resume.finished`)."""
    resume = sys.modules.get("keras_bert_impl.training.finetuning_resume")
    return 0 if resume is None else resume.finished["outputs_written"]


def exit_on_user_error(job, debug=False, user_errors=USER_ERRORS, checkpoints=None, interrupted_line=None):
    """Returns `job()`; a user error ends the process with one line `error: ...` on stderr and exit status 2.

    User errors are a missing or bad file or a bad flag value (`user_errors`: `OSError`, `ValueError`), and the
    loss of another process of a multiworker job (`LostProcessError`). With `debug`, the exception's traceback
    instead. In a job of several JAX or PyTorch processes, every error, a bug's traceback too, ends the process at
    once (`interruption.leave`): the others then fail fast with their own one line instead of waiting in a
    collective.

    Ctrl-C (`KeyboardInterrupt`, or any exception after a Ctrl-C that `interruption.one_line_on_ctrl_c` noted) ends
    it with one line saying that the same command resumes, and exit status 130 (143 after SIGTERM;
    `interruption.interrupted_line`; `checkpoints`: the run's checkpoint directory, named with its newest
    checkpoint; `interrupted_line`: the line instead, for a job with no checkpoints, such as a data-preparation
    recipe's, whose outputs are written whole at the end). A checkpoint being written is never picked up half-written (`run_checkpoints`: written aside,
    renamed last). The job's start and end are noted in `interruption._run_state`, the one state of the process,
    where a Ctrl-C outside the job finds them.
    """
    state = interruption._run_state  # (the module's dict itself: `one_line_on_ctrl_c`'s handlers read it)
    state["job"] = "running"
    outputs_before = _outputs_written()
    try:
        result = job()
        state["job"] = "done"
        return result
    except SystemExit:
        raise
    except BaseException as error:
        if not debug and (isinstance(error, KeyboardInterrupt) or state["interrupted"]):
            finished = _outputs_written() > outputs_before  # this job's run wrote its outputs
            line = (interrupted_line if interrupted_line is not None else interruption.CLEANING_UP if finished
                    else interruption.interrupted_line(checkpoints))
            interruption.leave(interruption.signalled_line(line), status=interruption.interrupted_status())
        # (a LostProcessError is raised only where its module was imported: this one imports no Keras)
        errors = sys.modules.get("keras_bert_impl.training.pretraining_errors")
        lost_process = (errors.LostProcessError,) if errors is not None else ()
        full_disk = None if debug or not isinstance(error, Exception) else full_disk_line(error)
        if full_disk is not None:
            interruption.leave(full_disk, status=2)
        if not debug and isinstance(error, (*lost_process, *user_errors)):
            interruption.leave(f"error: {' '.join(str(error).split())}", status=2)
        if not interruption.several_processes_joined():
            raise
        traceback.print_exc()
        interruption.leave("error: the traceback above ended this process of the multiworker job", status=1)
