"""What the fine-tuning recipes' command lines share: one-line errors, the run flags, and starting the job.

Every recipe fails the same way on bad input: one line `error: ...` on stderr
and exit status 2, for a bad flag (`OneLineParser`) as for a missing or bad
file found while the job runs (`exit_on_user_error`); `--debug` shows the
traceback instead. This module sits beside the recipes, not in the package,
and imports only the standard library: a bad flag fails before Keras or
TensorFlow is imported.

    >>> parser = OneLineParser(prog="finetune_example.py")
    >>> add_run_arguments(parser, seed=42)
    >>> args = parser.parse_args(["--model_dir", "/tmp/run"])
    >>> args.strategy, args.mixed_precision, args.seed, args.compilation_cache, args.debug
    ('auto', 'auto', 42, 'auto', False)
    >>> args.coordinator_address, args.num_processes, args.process_id
    (None, None, None)
"""

import argparse
import os
import sys

STRATEGIES = ("auto", "cpu", "gpu", "mirrored", "multiworker", "tpu")


class OneLineParser(argparse.ArgumentParser):
    """`argparse` whose errors are one line, `error: <message> (see --help)`, with exit status 2."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


def add_run_arguments(parser, seed, model_dir_aliases=()):
    """The flags of where and how a fine-tuning job runs: --strategy (and the JAX / PyTorch cluster flags of
    multiworker), --mixed_precision, --seed, --compilation_cache, --model_dir (and its `model_dir_aliases`, e.g.
    Hugging Face's --output_dir), --debug."""
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
    parser.add_argument("--seed", type=int, default=seed)
    parser.add_argument("--compilation_cache", default="auto",
                        help="JAX's persistent XLA compilation cache: auto (default: ~/.cache/keras_bert_impl/"
                             "jax_compilation_cache on a GPU or TPU, off on a CPU), none, or a folder")
    aliases = f" (alias: {', '.join(model_dir_aliases)})" if model_dir_aliases else ""
    parser.add_argument("--model_dir", *model_dir_aliases, dest="model_dir", required=True,
                        help=f"where the results, predictions and model go{aliases}")
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error")


def positive(kind):
    """An argparse `type` that takes numbers of `kind` above 0: `--epochs 0` is the one line
    `error: argument --epochs: must be positive, got 0 (see --help)`."""

    def parse(text):
        if kind(text) <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return kind(text)

    return parse


def add_lora_argument(parser):
    """--lora_rank: train LoRA factors of that rank on every block's query/key/value projection, the rest of the
    backbone frozen (`BertBackbone.enable_lora`)."""
    parser.add_argument("--lora_rank", type=positive(int), default=None,
                        help="LoRA of this rank on every block's query/key/value projection, the rest of the backbone "
                             "frozen; the --learning_rate default becomes 5e-4 (docs/finetuning.md)")


def start_job(args):
    """What every fine-tuning job does first, before it compiles anything: refuses a --strategy this backend does
    not run, joins the other processes of a JAX or PyTorch `--strategy multiworker` job (before JAX's first
    computation), and turns on JAX's compilation cache (--compilation_cache)."""
    import keras

    from keras_bert_impl.training.compilation_cache import enable_compilation_cache
    from keras_bert_impl.training.strategy import check_finetuning_strategy, get_strategy

    check_finetuning_strategy(args.strategy)
    cluster = {name: getattr(args, name, None) for name in ("coordinator_address", "num_processes", "process_id")}
    if args.strategy == "multiworker" and keras.backend.backend() in ("jax", "torch"):
        get_strategy("multiworker", **cluster)  # the task's own get_strategy then finds the processes joined
    elif any(value is not None for value in cluster.values()):
        get_strategy(args.strategy, **cluster)  # refuses the cluster flags in one line
    directory = enable_compilation_cache(args.compilation_cache)
    if directory:
        print(f"XLA compilation cache: {directory} (--compilation_cache none turns it off)", file=sys.stderr)


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
        start_job(args)
        if dataclasses.is_dataclass(config) and isinstance(config, type):
            return run(config_from_args(args, config))
        return run(config(args))

    return exit_on_user_error(job, debug=args.debug)


def exit_on_user_error(job, debug=False):
    """Returns `job()`; a missing or bad file or a bad flag value (`OSError`, `ValueError`) becomes one line
    `error: ...` on stderr and exit status 2 (with `debug`, the exception and its traceback). So does the loss of
    another process of a multiworker job (`LostProcessError`), after which this process leaves at once."""
    from keras_bert_impl.training.pretraining_errors import LostProcessError

    try:
        return job()
    except LostProcessError as error:
        if debug:
            raise
        leave_after_losing_the_others(error)
    except (OSError, ValueError) as error:
        if debug:
            raise
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def leave_after_losing_the_others(error):
    """Prints `error: <the LostProcessError's line>` and ends this process at once with status 2.

    Another process of the job stopped: the distributed runtime cannot go on, and JAX's
    would abort at exit once its heartbeats time out, so the process leaves now
    (`os._exit`), with the one line that says how to restart.
    """
    print(f"error: {' '.join(str(error).split())}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(2)
