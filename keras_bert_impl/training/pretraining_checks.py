"""Checks before a pretraining run does any work, and the run configuration recorded for resume.

`check_flags` and `check_model_dir` run first (every bad flag or directory is
one line naming the flag); the settings that define a run (`pretraining_run_settings`:
the flags, the model configuration, the sha256 of the vocabulary's tokens and
the size and sha256 of every training file) are recorded atomically in
`<model_dir>/run_config.json` before training starts, so before any checkpoint
can exist (`record_run_config`), and compared on resume (`check_resumable`):
only `MAY_CHANGE_ON_RESUME` may differ (and the training files' paths, where
the same bytes moved: `same_files_moved`), and a checkpoint without a recorded
configuration is refused. `checkpoint_trained_the_pooler` says whether a
masked-LM-only checkpoint was written while its pooler still trained.
"""

import dataclasses
import hashlib
import json
import math
import os

import keras

from keras_bert_impl.checkpoints.atomic_files import atomic_write_json
from keras_bert_impl.layers.layer_norm_backward import LAYER_NORM_BACKWARDS
from keras_bert_impl.training.attention_padding import check_attention_padding
from keras_bert_impl.training.position_init import POSITION_INITS
from keras_bert_impl.training.starting_point_identity import (
    changed_in_place,
    moved_line,
    same_bytes,
    same_path,
    starting_point_sha256,
)
from keras_bert_impl.training.steps_per_execution import check_steps_per_execution
from keras_bert_impl.training.weight_init import WEIGHT_INITS

# Settings recorded in `<model_dir>/run_config.json` (before training starts) and compared on resume.
# `vocabulary_sha256` identifies --vocab by content (the model config holds only its size): a vocab of the
# same size in another order would resume the embeddings of the old one. `train_file_fingerprints` identifies
# the --train_files by content (`training_file_fingerprints`): a corpus replaced at the same path would resume
# the old one's input position in other text.
RUN_DEFINING_SETTINGS = (
    "model_config", "sequence_length", "max_predictions_per_seq", "global_batch_size", "num_steps",
    "warmup_steps", "learning_rate", "optimizer", "adam_beta2", "weight_decay", "mixed_precision", "seed",
    "whole_word_masking", "nsp", "lowercase", "checkpoint_every", "train_files",
    "init_checkpoint", "gradient_accumulation_steps", "vocabulary_sha256", "train_file_fingerprints",
    "init_checkpoint_sha256",
)
# Of those, the ones a resumed run may change: extend a run (--num_steps), or rerun after a
# non-finite loss with a lower --learning_rate or a longer --warmup_steps. The optimizer's
# variables and the step are restored from the checkpoint; the schedule is rebuilt from the flags.
# The other flags (--validation_files, --log_every, --keep_checkpoints, --validation_steps,
# --steps_per_execution, --jit_compile, --profile_steps, --strategy, --deterministic, --verbose)
# are not recorded and may always change.
MAY_CHANGE_ON_RESUME = ("num_steps", "learning_rate", "warmup_steps")
RUN_CONFIG_FILE = "run_config.json"
# The key of run_config.json that keeps the values the run was started with of the `MAY_CHANGE_ON_RESUME`
# settings a resume changed (the top-level values are those of the last checkpoint's command).
STARTED_WITH_KEY = "started_with"
# Keys of run_config.json files written by earlier versions -> today's names.
LEGACY_KEYS = {"seq_length": "sequence_length"}
# Settings that earlier versions did not record, with the value those versions used.
LEGACY_DEFAULTS = {"adam_beta2": 0.999}
# Settings that earlier versions did not record and whose value is unknown: not compared when the recorded
# configuration lacks them (the next checkpoint records them).
UNRECORDED_BEFORE = ("vocabulary_sha256", "train_file_fingerprints", "init_checkpoint_sha256")
_HASH_BLOCK = 1 << 22  # 4 MiB read at a time: a corpus of a few GB is hashed in seconds, in little memory


def vocabulary_sha256(tokens):
    """The sha256 (hex) of the vocabulary's tokens in id order, one per line: what identifies `--vocab`."""
    tokens = [t.decode() if isinstance(t, bytes) else str(t) for t in tokens]
    return hashlib.sha256("\n".join(tokens).encode("utf-8")).hexdigest()


def training_file_fingerprints(patterns):
    """`{path: {"bytes": size, "sha256": hex}}` of every file `patterns` (names or globs) match: what identifies
    `--train_files` by content. Each file is read in blocks, once. A remote file (`gs://...`) is identified by
    its size alone (`"sha256": None`): hashing would download the whole corpus at every start.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    ...     _ = f.write("It was a dark night.\\n")
    >>> training_file_fingerprints([f.name])[f.name]["bytes"]
    21
    >>> os.remove(f.name)
    """
    import tensorflow as tf

    from keras_bert_impl.data.text_documents import gfile_is_file
    from keras_bert_impl.file_patterns import matching_files

    fingerprints = {}
    for pattern in [patterns] if isinstance(patterns, str) else patterns or ():
        for path in matching_files(pattern, tf.io.gfile.glob, gfile_is_file):  # (as the run expands them)
            if "://" in path:
                fingerprints[path] = {"bytes": tf.io.gfile.stat(path).length, "sha256": None}
                continue
            digest, size = hashlib.sha256(), 0
            with open(path, "rb") as f:
                while block := f.read(_HASH_BLOCK):
                    digest.update(block)
                    size += len(block)
            fingerprints[path] = {"bytes": size, "sha256": digest.hexdigest()}
    return fingerprints


def pretraining_run_settings(config, model_config, vocabulary=None):
    """The run-defining settings of `config` (`RUN_DEFINING_SETTINGS`), as recorded in run_config.json.

    Args:
        config: the resolved `PretrainingConfig`.
        model_config: the backbone's constructor arguments.
        vocabulary: the tokenizer's tokens in id order (`tokenizer.get_vocabulary()`); recorded as their
            sha256, so that a resume with another `--vocab` of the same size is refused.

    The training files are recorded by size and sha256 (`training_file_fingerprints`), so that a resume after a
    file was replaced at the same path is refused; a local `--init_checkpoint` by the sha256 of its files
    (`starting_point_sha256`), so that it resumes where it was moved.
    """
    values = dataclasses.asdict(config)
    values["model_config"] = model_config
    values["vocabulary_sha256"] = None if vocabulary is None else vocabulary_sha256(vocabulary)
    values["train_file_fingerprints"] = training_file_fingerprints(config.train_files)
    values["init_checkpoint_sha256"] = starting_point_sha256(config.init_checkpoint)
    return {key: values[key] for key in RUN_DEFINING_SETTINGS}


def read_run_config(model_dir):
    """The settings recorded in `<model_dir>/run_config.json` (legacy keys renamed), or None."""
    path = os.path.join(model_dir, RUN_CONFIG_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            saved = json.load(f)
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: cannot be read as JSON ({error}); restore it or use a new --model_dir") from None
    if not isinstance(saved, dict):
        raise ValueError(f"{path}: expected a JSON object of the run's settings; restore it or use a new --model_dir")
    for old, new in LEGACY_KEYS.items():
        if old in saved and new not in saved:
            saved[new] = saved.pop(old)
    return saved


def _file_changes(old, new):
    """How the training files differ, one phrase a file: `<path>: size 1,234,567 -> 2,345,678 bytes`,
    `<path>: same size, other content`, `<path>: no longer there`, `<path>: new`."""
    old, new = old or {}, new or {}
    changes = []
    for path in sorted(set(old) | set(new)):
        before, now = old.get(path), new.get(path)
        if before == now:
            continue
        if now is None:
            changes.append(f"{path}: no longer there")
        elif before is None:
            changes.append(f"{path}: new (not there when the run started)")
        elif before.get("bytes") != now.get("bytes"):
            changes.append(f"{path}: size {before.get('bytes'):,} -> {now.get('bytes'):,} bytes")
        else:
            changes.append(f"{path}: same size, other content")
    return changes


def _difference(key, old, new, model_dir):
    """One refused difference of `check_resumable`'s message."""
    if key == "train_file_fingerprints":
        return ("--train_files changed since the run started (" + "; ".join(_file_changes(old, new)) + ")")
    if isinstance(old, dict) and isinstance(new, dict):  # the model configuration: its fields that differ, not both
        fields = sorted(name for name in set(old) | set(new) if old.get(name) != new.get(name))  # whole (two dicts)
        shown = ", ".join(f"{name} {json.dumps(old.get(name))} in {model_dir} vs {json.dumps(new.get(name))} now"
                          for name in fields)
        return f"{_flag(key)}: {shown}"
    return f"{_flag(key)}: {json.dumps(old)} in {model_dir} vs {json.dumps(new)} now"


def _flag(key):
    if key == "model_config":
        return "--config/--dropout (the model configuration)"
    if key == "vocabulary_sha256":
        return "--vocab (sha256 of its tokens)"
    return f"--{key}"


def check_resumable(model_dir, settings, checkpoint=None):
    """Refuses to resume `model_dir` with settings other than those it records, except `MAY_CHANGE_ON_RESUME` and
    training files that moved with their bytes (`same_files_moved`).

    Called only when `model_dir` holds a checkpoint: a model_dir without one
    has nothing to resume, whatever a failed earlier start left in it. A
    checkpoint without `run_config.json` (left by a version that recorded it
    only after the first checkpoint, killed in between) is refused: the
    flags of this command could not be checked against the run's.

    Args:
        model_dir: the run's directory.
        settings: `pretraining_run_settings(...)` of this command.
        checkpoint: the checkpoint that would be resumed, named in the error.

    Returns:
        The `(key, started, last, now)` of the settings that changed and may change: the value the run was
        started with, the one its last checkpoint was written with (`record_run_config`) and this command's.
    """
    saved = read_run_config(model_dir)
    if saved is None:
        raise ValueError(
            f"--model_dir {model_dir} holds the checkpoint {checkpoint or os.path.join(model_dir, 'checkpoints')} "
            f"but no {RUN_CONFIG_FILE} (the settings the run was started with), so this command's flags cannot be "
            "checked against the run's; refusing to resume it: use a new --model_dir"
        )
    started = saved.pop(STARTED_WITH_KEY, None) or {}
    saved = {**LEGACY_DEFAULTS, **saved}
    settings = json.loads(json.dumps(settings))
    for key in UNRECORDED_BEFORE:
        if key not in saved:
            settings.pop(key, None)
    differ = [(key, saved.get(key), settings.get(key)) for key in sorted(set(saved) | set(settings))
              if saved.get(key) != settings.get(key) and not (key == "init_checkpoint" and same_path(
                  saved.get(key), settings.get(key)))]  # the same folder typed another way
    may_change = MAY_CHANGE_ON_RESUME
    if same_files_moved(saved.get("train_file_fingerprints"), settings.get("train_file_fingerprints")):
        # The corpus at other paths (another mount, a new install's bundled corpus), byte for byte: it resumes.
        differ = [d for d in differ if d[0] != "train_file_fingerprints"]
        may_change = (*may_change, "train_files")
    if same_bytes(saved.get("init_checkpoint_sha256"), settings.get("init_checkpoint_sha256")):
        may_change = (*may_change, "init_checkpoint")  # moved or copied, the same files
    elif not any(key == "init_checkpoint" for key, _, _ in differ):
        may_change = (*may_change, "init_checkpoint_sha256")  # the same folder, written again: the run goes on
    refused = [d for d in differ if d[0] not in may_change]
    if any(key == "train_files" for key, _, _ in refused):  # other files: their contents say nothing more
        refused = [d for d in refused if d[0] != "train_file_fingerprints"]
    if any(key == "init_checkpoint" for key, _, _ in refused):
        refused = [d for d in refused if d[0] != "init_checkpoint_sha256"]
    if refused:
        advice = []
        if any(key != "train_file_fingerprints" for key, _, _ in refused):
            advice.append("restore the other flags")
        for key, old, new in refused:
            if key == "train_file_fingerprints":
                several = len(_file_changes(old, new)) > 1
                advice.append(f"put the original training file{'s' if several else ''} back")
        raise ValueError(
            f"--model_dir {model_dir} holds a run with a different configuration; refusing to resume it. "
            "Differences: " + "; ".join(_difference(key, old, new, model_dir) for key, old, new in refused)
            + ". Only " + ", ".join(_flag(key) for key in MAY_CHANGE_ON_RESUME)
            + " may change on resume: " + " and ".join(advice) + ", or use a new --model_dir."
        )
    return [(key, started.get(key, old), old, new) for key, old, new in differ]


def checkpoint_trained_the_pooler(state, model, optimizer):
    """Whether the checkpoint of `state` (its state.json) was written with the pooler trainable, where `model`
    froze it as unused: a masked-LM-only run started before `BertPretrainer(nsp=False)` froze the pooler
    (`head_building.freeze_unused_pooler`) holds optimizer slots for the pooler's kernel and bias that `optimizer`
    (built) lacks. The run then resumes with the pooler trainable, as it started (`head_building.use_pooler`);
    with it frozen, the checkpoint's optimizer variables would not match and the run could not resume at all.
    Any other difference is left to `CheckpointManager.restore`, which names it.

    Example:
    >>> import types
    >>> from keras_bert_impl.models.backbone import BertBackbone
    >>> from keras_bert_impl.models.pretrainer import BertPretrainer
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
    >>> model = BertPretrainer(backbone, nsp=False)  # freezes the pooler
    >>> optimizer = keras.optimizers.AdamW()
    >>> optimizer.build(model.trainable_variables)
    >>> old = {"num_model_variables": len(model.variables), "num_optimizer_variables": len(optimizer.variables) + 4}
    >>> checkpoint_trained_the_pooler(old, model, optimizer)  # 2 slots (m, v) for the kernel and the bias
    True
    >>> checkpoint_trained_the_pooler(dict(old, num_optimizer_variables=len(optimizer.variables)), model, optimizer)
    False
    """
    if not getattr(model.backbone.pooled_dense, "frozen_as_unused", False):
        return False
    return (state.get("num_model_variables") == len(model.variables)
            and state.get("num_optimizer_variables", 0) > len(optimizer.variables))


def same_files_moved(old, new):
    """Whether the training files of fingerprints `new` are those of `old` at other paths: the same number of
    files, each of the same size and sha256, in the same order (the order the run reads them in). A remote file
    (no sha256: identified by its size alone) never counts as moved.

    >>> old = {"/data/a.txt": {"bytes": 5, "sha256": "aa"}, "/data/b.txt": {"bytes": 7, "sha256": "bb"}}
    >>> same_files_moved(old, {"/mnt/a.txt": {"bytes": 5, "sha256": "aa"}, "/mnt/b.txt": {"bytes": 7, "sha256": "bb"}})
    True
    >>> same_files_moved(old, {"/mnt/b.txt": {"bytes": 7, "sha256": "bb"}, "/mnt/a.txt": {"bytes": 5, "sha256": "aa"}})
    False
    >>> same_files_moved(old, old)  # not moved
    False
    """
    if not old or not new or list(old) == list(new) or len(old) != len(new):
        return False
    pairs = list(zip(old.values(), new.values()))
    return all(before == now and before.get("sha256") for before, now in pairs)


def resume_change_message(key, started, last, now, model_dir=None, init_checkpoint=None):
    """The line a resumed run prints for a setting it changes (`check_resumable`'s tuple): one of
    `MAY_CHANGE_ON_RESUME`, `train_files` moved (`same_files_moved`), `init_checkpoint` moved or copied, or the
    files of the run's `init_checkpoint` changed in place (`init_checkpoint_sha256`; the run's `model_dir`).

    >>> resume_change_message("learning_rate", 0.001, 0.0005, 0.0002)
    'Resuming with --learning_rate 0.0002 (the run was started with 0.001; its last checkpoint was written with 0.0005).'
    >>> resume_change_message("num_steps", 2, 2, 4)
    'Resuming with --num_steps 4 (the run was started with 2).'
    >>> resume_change_message("train_files", ["/data/a.txt"], ["/data/a.txt"], ["/mnt/a.txt"])
    'Resuming with --train_files ["/mnt/a.txt"]: the files of ["/data/a.txt"], moved (the same bytes, sha256).'
    """
    if key == "train_files":
        return (f"Resuming with --train_files {json.dumps(now)}: the files of {json.dumps(last)}, moved (the same "
                "bytes, sha256).")
    if key == "init_checkpoint":
        return moved_line("--init_checkpoint", last, now)
    if key == "init_checkpoint_sha256":
        return changed_in_place("--init_checkpoint", init_checkpoint, model_dir)
    line = f"Resuming with --{key} {now} (the run was started with {started}"
    if last != started:
        line += f"; its last checkpoint was written with {last}"
    return line + ")."


def record_run_config(model_dir, settings, fresh=False):
    """Writes `<model_dir>/run_config.json` atomically, unless it already says the same.

    The run calls it before training starts (so the settings are on disk before any checkpoint can be) and
    after each checkpoint (to record a changed `MAY_CHANGE_ON_RESUME` setting once a checkpoint used it). The
    value a run was started with of each such setting a resume changed stays under `STARTED_WITH_KEY`, so that
    every later resume names the original value (not the previous resume's). `fresh`: the run starts from step 0
    (a record left by a failed start without a checkpoint is no earlier run's).
    """
    settings = json.loads(json.dumps(settings))
    recorded = read_run_config(model_dir)
    if recorded is not None and not fresh:
        last = {key: value for key, value in recorded.items() if key != STARTED_WITH_KEY}
        started = {**{key: last[key] for key in MAY_CHANGE_ON_RESUME
                      if key in last and last[key] != settings.get(key)}, **(recorded.get(STARTED_WITH_KEY) or {})}
        if started:
            settings[STARTED_WITH_KEY] = started
    if recorded == settings:
        return
    atomic_write_json(os.path.join(model_dir, RUN_CONFIG_FILE), settings)


RECOMPUTE_ACTIVATION_CHOICES = ("on", "off")  # --recompute_activation: BertBackbone(recompute_activation=True/False)


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"--{name}={value!r}: must be an integer >= 1")


def check_flags(config, default_checkpoint_every=False):
    """Checks every numeric flag of `config` and their relations; raises `ValueError` naming the flag.
    `default_checkpoint_every`: no --checkpoint_every was given (its value is `default_checkpoint_every`'s)."""
    check_attention_padding(config.attention_padding)
    if config.strategy == "multiworker" and config.mixed_precision == "fp16" and keras.backend.backend() == "torch":
        # Keras's loss scaling skips a step whose local gradient overflowed before the optimizer averages the
        # gradients: that process would skip the all-reduce the others wait in.
        raise ValueError(
            "--mixed_precision fp16 with --strategy multiworker on PyTorch: loss scaling decides each process's "
            "step before the gradients are averaged; use --mixed_precision bf16 or none"
        )
    for name, choices in (("recompute_activation", RECOMPUTE_ACTIVATION_CHOICES),
                          ("layer_norm_backward", LAYER_NORM_BACKWARDS)):
        if getattr(config, name) not in choices:
            raise ValueError(f"--{name}={getattr(config, name)!r}: expected {' or '.join(choices)}")
    for name in ("num_steps", "checkpoint_every", "global_batch_size", "max_predictions_per_seq",
                 "keep_checkpoints", "log_every", "validation_steps"):
        _positive(name, getattr(config, name))
    if config.gradient_accumulation_steps is not None:
        _positive("gradient_accumulation_steps", config.gradient_accumulation_steps)
    minimum = 5 if config.nsp else 3
    if isinstance(config.sequence_length, bool) or not isinstance(config.sequence_length, int) or (
            config.sequence_length < minimum):
        layout = "[CLS] A [SEP] B [SEP]" if config.nsp else "[CLS] A [SEP]"
        raise ValueError(
            f"--sequence_length={config.sequence_length!r} is too small for {layout} with at least one token "
            f"in each segment: it must be >= {minimum}"
        )
    if config.max_predictions_per_seq > config.sequence_length:
        raise ValueError(f"--max_predictions_per_seq={config.max_predictions_per_seq} exceeds "
                         f"--sequence_length={config.sequence_length}")
    if isinstance(config.warmup_steps, bool) or not isinstance(config.warmup_steps, int) or not (
            0 <= config.warmup_steps <= config.num_steps):
        raise ValueError(
            f"--warmup_steps={config.warmup_steps!r} must be an integer in [0, --num_steps={config.num_steps}]: "
            f"the warm-up must end within the run"
        )
    if not (isinstance(config.learning_rate, (int, float)) and math.isfinite(config.learning_rate)
            and config.learning_rate > 0):
        raise ValueError(f"--learning_rate={config.learning_rate!r}: must be a finite number > 0")
    if not (isinstance(config.weight_decay, (int, float)) and 0 <= config.weight_decay < math.inf):
        raise ValueError(f"--weight_decay={config.weight_decay!r}: must be a finite number >= 0")
    if config.dropout is not None and not 0 <= config.dropout < 1:
        raise ValueError(f"--dropout={config.dropout!r}: must be in [0, 1)")
    beta2 = config.adam_beta2
    if not (isinstance(beta2, (int, float)) and not isinstance(beta2, bool) and 0 <= beta2 < 1):
        raise ValueError(f"--adam_beta2={beta2!r}: must be a number in [0, 1) (BERT's is 0.999, the main job's 0.98)")
    stddev = config.attention_init_stddev
    if stddev is not None and not (isinstance(stddev, (int, float)) and math.isfinite(stddev) and stddev > 0):
        raise ValueError(f"--attention_init_stddev={stddev!r}: must be a finite number > 0 (BERT's is 0.02)")
    if config.weight_init not in WEIGHT_INITS:
        raise ValueError(f"--weight_init={config.weight_init!r}: expected one of {', '.join(WEIGHT_INITS)} "
                         "(BERT's truncated normal, or transformers' plain normal)")
    if config.position_init not in POSITION_INITS:
        raise ValueError(f"--position_init={config.position_init!r}: expected one of {', '.join(POSITION_INITS)} "
                         "(sine/cosine starting values, or BERT's random draw)")
    multiple = config.vocabulary_padding_multiple
    if multiple is not None and (isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1):
        raise ValueError(f"--vocabulary_padding_multiple={multiple!r}: must be an integer >= 1 (e.g. 128)")
    check_steps_in_epochs(config, default=default_checkpoint_every)
    from keras_bert_impl.training.pretraining_callbacks import _parse_profile_steps

    _parse_profile_steps(config.profile_steps)


def check_steps_in_epochs(config, recorded=None, default=False):
    """Refuses a `--num_steps` that is not a multiple of `--checkpoint_every` (training runs in epochs of
    checkpoint_every steps), in one line that says what to pass, and a `--steps_per_execution` that does not divide
    `--checkpoint_every`. `recorded`: the interval of the run being resumed, which it keeps (no --checkpoint_every
    given), named as such; so is the interval of the run already in `config.model_dir` where it is the one given
    (a smaller --checkpoint_every would then be refused as a change). `default`: no --checkpoint_every was given.

    >>> import types
    >>> check_steps_in_epochs(types.SimpleNamespace(num_steps=1100, checkpoint_every=500, steps_per_execution="auto"))
    Traceback (most recent call last):
    ...
    ValueError: --num_steps=1100 must be a multiple of --checkpoint_every=500 (training runs in epochs of \
checkpoint_every steps): add --checkpoint_every 275, or pass --num_steps 1500
    """
    interval = config.checkpoint_every
    if config.num_steps % interval:
        # What to pass instead: the largest --checkpoint_every up to the one given that divides --num_steps (a short
        # trial run, `--num_steps 200`, gets `--checkpoint_every 200`), or the next multiple for --num_steps. A
        # resumed run keeps its interval: only --num_steps can change.
        multiple = -(-config.num_steps // interval) * interval
        model_dir = getattr(config, "model_dir", None)
        if recorded is None and model_dir and not default:
            try:
                in_model_dir = (read_run_config(model_dir) or {}).get("checkpoint_every")
            except ValueError:  # an unreadable run_config.json: named by the resume check
                in_model_dir = None
            recorded = interval if in_model_dir == interval else None
        if recorded is None and default:
            below = config.num_steps - config.num_steps % interval
            raise ValueError(
                f"--num_steps={config.num_steps} has no divisor from 50 to {interval} for the default "
                f"--checkpoint_every (checkpoints, each followed by the held-out evaluation, come every checkpoint_every "
                f"steps, and --num_steps must be a multiple of it): pass --checkpoint_every {config.num_steps} (one "
                f"checkpoint, at the end), or --num_steps " + (f"{below} or {multiple}" if below else f"{multiple}")
            )
        if recorded is not None:
            raise ValueError(
                f"--num_steps={config.num_steps} must be a multiple of --checkpoint_every={interval}, the interval of "
                f"the run in {config.model_dir} (training runs in epochs of checkpoint_every steps): pass --num_steps "
                f"{multiple}"
            )
        divisor = max(d for d in range(1, min(interval, config.num_steps) + 1) if config.num_steps % d == 0)
        raise ValueError(
            f"--num_steps={config.num_steps} must be a multiple of --checkpoint_every={interval} (training runs in "
            f"epochs of checkpoint_every steps): add --checkpoint_every {divisor}, or pass --num_steps {multiple}"
        )
    check_steps_per_execution(config.steps_per_execution, interval)


def check_model_dir(model_dir):
    """Refuses a `--model_dir` that is a file, cannot be written, or whose `export/` holds a user's files.

    Nothing is created: the directory is made by the first write of the run.
    `gs://` and other remote paths are not checked here.
    """
    from keras_bert_impl.checkpoints import own_preset

    if "://" in str(model_dir):
        return
    check_writable_model_dir(model_dir)
    model_dir = os.fspath(model_dir)
    export_dir = os.path.join(model_dir, "export")
    if os.path.exists(export_dir):
        if not os.path.isdir(export_dir):
            raise ValueError(f"--model_dir {model_dir}: {export_dir} is a file; the run exports the backbone "
                             "to that directory at the end: move the file, or use another --model_dir")
        foreign = sorted(set(os.listdir(export_dir)) - set(own_preset.PRESET_FILES))
        if foreign:
            raise ValueError(
                f"--model_dir {model_dir}: {export_dir} holds {', '.join(foreign[:5])}"
                f"{' ...' if len(foreign) > 5 else ''}, which a pretraining run does not write; the run exports "
                "the backbone there at the end: move those files, or use another --model_dir"
            )


def check_writable_model_dir(model_dir):
    """Refuses, in one line, a local `model_dir` that is a file or cannot be written, nor its `checkpoints/` and
    `logs/` (what a run writes to as it trains: not the TensorBoard writer's PermissionDeniedError inside `fit`).
    Nothing is created; `gs://` and other remote paths are not checked. Pretraining and the fine-tuning recipes
    (`recipes/command_line.start_job`) both check their `--model_dir` with it.

    >>> check_writable_model_dir("/proc/no_run_here")
    Traceback (most recent call last):
    ...
    ValueError: --model_dir /proc/no_run_here cannot be written (/proc is read-only or not ours): pass a writable directory
    """
    if "://" in str(model_dir):
        return
    model_dir = os.fspath(model_dir)
    existing = os.path.abspath(model_dir)
    while not os.path.exists(existing):
        if os.path.islink(existing):  # (fine-tuning: a 51-line traceback once the model was built; pretraining:
            # "[Errno 17] File exists")
            what = "is" if existing == os.path.abspath(model_dir) else f"is inside {existing},"
            raise ValueError(f"--model_dir {model_dir} {what} a symbolic link to {os.readlink(existing)}, which does "
                             "not exist: create it, or pass another --model_dir")
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        what = "is a file" if existing == os.path.abspath(model_dir) else f"is inside a file ({existing})"
        raise ValueError(f"--model_dir {model_dir} {what}, not a directory: pass a new directory or one "
                         "holding a run to resume")
    if not _writable(existing):
        raise ValueError(f"--model_dir {model_dir} cannot be written ({existing} is read-only or not ours): "
                         "pass a writable directory")
    for sub in ("checkpoints", "logs"):  # what a run writes as it trains (the resume checkpoints, TensorBoard)
        path = os.path.join(model_dir, sub)
        if os.path.exists(path) and (not os.path.isdir(path) or not _writable(path)):
            raise ValueError(f"--model_dir {model_dir}: {path} is not a writable directory: make it writable, "
                             "or pass another --model_dir")


def _writable(directory):
    """True when a file can be created in `directory` (also for root on a read-only mount)."""
    import tempfile

    try:
        fd, path = tempfile.mkstemp(dir=directory, prefix=".write-test-")
    except OSError:
        return False
    os.close(fd)
    os.remove(path)
    return True
