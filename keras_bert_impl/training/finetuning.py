"""The generic fine-tuning loop shared by every task (GLUE, SQuAD, CoNLL).

The pieces, all usable on their own:

- `setup_finetuning(seed=None, mixed_precision=None, strategy_name="auto")`:
  seeds Python, NumPy and the backend (`keras.utils.set_random_seed`) and sets
  the global dtype policy (`"mixed_float16"`, `"mixed_bfloat16"`, None/`"float32"`,
  or `"auto"`: bf16 on a TPU or a bf16 GPU, else float32). Call it BEFORE
  building the model: the policy applies to layers created afterwards.
- `finetune(model, train_ds, ...)`: compiles `model` with BERT's AdamW
  (warm-up over `warmup_proportion` of the steps, then linear decay; weight
  decay 0.01 except LayerNorm/bias; gradient clipping, from
  `keras_bert_impl.training.optimizer.create_optimizer`) and fits it for
  `epochs`. After every epoch it evaluates (Keras `validation_ds` and/or your
  own `eval_fn(model) -> {name: float}`, e.g. the official GLUE metric on
  dev), logs everything to TensorBoard under `model_dir/logs`, saves the best
  epoch's weights atomically to `model_dir/best.weights.h5`, optionally stops
  early, and at the end restores the best weights. Returns a
  `FinetuneResult`. An interrupted run resumes: the same call with the same
  `model_dir` goes on from the last finished epoch (`finetuning_resume`).
- `FiniteLossCheck`, `EpochTimer`, `BestEpochCheckpoint`: the callbacks `finetune` uses (`finetuning_callbacks`).

Batches come from the tasks (`keras_bert_impl.tasks.<task>.batches`), which
cut them with `keras_bert_impl.batching` (length buckets for tf.data and the
NumPy twin). `finetune` takes either.

Strategies: build the model under `strategy.scope()` and pass the same
`strategy` to `finetune` (the optimizer is created under its scope).

Several processes (`get_strategy("multiworker")`: TensorFlow workers, JAX or
PyTorch processes): every process builds the same global batches (same data,
same seed) and `finetune` feeds each its rows of every batch
(`process_cluster.take_rows_of_each_batch`); the gradients are averaged over the
processes at every step, so together they take the step one device takes on the
global batch. Every process evaluates the whole dev set
(`strategy.predicting_everywhere`), so all see the same metrics and keep the
same best epoch; only process 0 writes files (`config_of_this_process` gives the
others a private temporary `model_dir`).

Example:
>>> import numpy as np, keras, tensorflow as tf
>>> from keras_bert_impl.training.finetuning import finetune, setup_finetuning
>>> setup_finetuning(seed=0)
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
>>> model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
>>> x = np.random.rand(64, 4).astype("float32"); y = (x[:, 0] > 0.5).astype("int32")
>>> train = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
>>> dev_accuracy = lambda m: {"accuracy": float((m.predict(x, verbose=0).argmax(-1) == y).mean())}
>>> result = finetune(model, train, epochs=2, learning_rate=1e-2, eval_fn=dev_accuracy,
...                   monitor="accuracy", verbose=0)
>>> result.best_epoch in (1, 2), sorted(result.history)[:2]
(True, ['accuracy', 'loss'])
"""

import contextlib
import dataclasses
import logging
import math
import os

import keras

from keras_bert_impl.models.failed_calls import run_recoverably
from keras_bert_impl.models.interrupts import noting_interrupts, with_interrupt_check
from keras_bert_impl.training.finetuning_callbacks import BestEpochCheckpoint, EpochTimer, FiniteLossCheck
from keras_bert_impl.training.finetuning_processes import (
    distribute_to_workers,
    predicting_everywhere,
    private_directory,
    remove_private_directories,
    tensorflow_worker_index,
    tensorflow_workers,
    this_process,
)
from keras_bert_impl.training.finetuning_resume import (
    FinetuningCheckpoint,
    checkpoint_manager,
    epochs_done_in,
    finished,
    remove_checkpoints,
    resume_from_latest,
    finetuning_run_settings,
)
from keras_bert_impl.training.process_cluster import lost_peers_as_one_line, take_rows_of_each_batch
from keras_bert_impl.training.remote_model_dir import refuse_remote_for_finetuning
from keras_bert_impl.training.replica_dropout import draw_own_masks_on_every_replica
from keras_bert_impl.training.run_lock import hold_model_dir
from keras_bert_impl.training.starting_point_identity import starting_point_sha256
from keras_bert_impl.training.strategy import process_group
from keras_bert_impl.training.symbolic_build import build_from_element_spec
from keras_bert_impl.training.torch_random_state import restoring_at_first_batch

logger = logging.getLogger(__name__)

BEST_WEIGHTS_NAME = "best.weights.h5"


def setup_finetuning(seed=None, mixed_precision=None, strategy_name="auto"):
    """Seeds all random generators, sets the global Keras dtype policy, and returns the precision used.

    Call before building the model (the policy is read when layers are built).

    Args:
        seed: int or None. Seeds Python's `random`, NumPy and the backend
            (`keras.utils.set_random_seed`); None leaves them unseeded.
        mixed_precision: None, `"float32"`, `"mixed_float16"` (GPU; Keras wraps
            the optimizer in a loss-scale optimizer at compile) or
            `"mixed_bfloat16"` (TPU, recent GPUs/CPUs). Also accepts
            `"fp16"`/`"bf16"`, and `"auto"` (the recipes' default): bf16 on a TPU
            or a GPU with bfloat16 (compute capability >= 8.0), else float32.
        strategy_name: the run's `--strategy`, for `"auto"` (`"tpu"` means bf16).

    Returns:
        `mixed_precision` with `"auto"` resolved (None for float32), to record.

    Example:
    >>> setup_finetuning(seed=1, mixed_precision="auto", strategy_name="cpu") is None
    True
    """
    from keras_bert_impl.training.precision import mixed_precision_policy, resolve_mixed_precision

    mixed_precision = resolve_mixed_precision(mixed_precision, strategy_name)
    policy = mixed_precision_policy(mixed_precision)
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"`seed` must be a non-negative int, got {seed!r}.")
        keras.utils.set_random_seed(seed)
    keras.config.set_dtype_policy(policy)
    return mixed_precision


@dataclasses.dataclass
class FinetuneResult:
    """What `finetune` returns.

    Attributes:
        history: dict name -> list of per-epoch values (training loss/metrics,
            `val_*` from `validation_ds`, and the keys returned by `eval_fn`).
        best_epoch: 1-based epoch whose weights were kept (None without any
            evaluation: then the last epoch's weights are kept).
        best_metrics: the evaluation values of that epoch.
        best_weights_path: path of the saved best weights, or None without `model_dir` (and on the processes
            other than process 0 of a job of several: process 0 alone writes files).
        epoch_seconds: wall time of each epoch's training (evaluation excluded).
        train_steps: optimizer steps per epoch used for the schedule.
        stopped_early: whether early stopping ended training.

    With `finetune(..., keep_checkpoints=True)`, call `remove_checkpoints()` once the run's own outputs are
    written (every process calls it; process 0 removes them).
    """

    history: dict
    best_epoch: int | None
    best_metrics: dict
    best_weights_path: str | None
    epoch_seconds: list
    train_steps: int
    stopped_early: bool
    _remove_checkpoints: object = None

    def remove_checkpoints(self):
        """Removes the run's checkpoints: the run is finished, its outputs written (nothing left to resume)."""
        finished["outputs_written"] += 1
        if self._remove_checkpoints is not None:
            self._remove_checkpoints()


def finetune(
    model,
    train_ds,
    *,
    epochs,
    learning_rate,
    validation_ds=None,
    eval_fn=None,
    monitor=None,
    mode="auto",
    warmup_proportion=0.1,
    weight_decay=0.01,
    clipnorm=1.0,
    optimizer="adamw",
    steps_per_epoch=None,
    model_dir=None,
    strategy=None,
    seed=None,
    early_stopping_patience=None,
    restore_best_weights=True,
    resume=True,
    tensorboard=True,
    loss=None,
    metrics=None,
    callbacks=(),
    verbose="auto",
    jit_compile="auto",
    run_identity=None,
    keep_checkpoints=False,
):
    """Fine-tunes `model` on `train_ds` with BERT's optimizer, evaluating each epoch.

    Args:
        model: a `keras.Model`. If it is not compiled, `loss` is required; if it
            is compiled (e.g. `BertClassifier` compiles its own loss), its loss
            and metrics are kept and only the optimizer is replaced.
        train_ds: a `tf.data.Dataset` (or anything `model.fit` takes) of
            batches `(features, labels)`; shuffle it yourself (reshuffled each
            epoch by tf.data).
        epochs: int >= 1.
        learning_rate: float, peak learning rate after warm-up.
        validation_ds: optional dataset for `model.evaluate` each epoch
            (logged as `val_loss`, `val_<metric>`).
        eval_fn: optional callable `eval_fn(model) -> dict[str, float]` run after
            each epoch, e.g. the task's official metrics on dev predictions; one with
            an `epoch` keyword is told the epoch (counted from the run's start, a
            resumed run's earlier epochs included).
        monitor: name of the value that selects the best epoch and drives early
            stopping. Default: the first key of `eval_fn`'s result, else
            `"val_loss"` when `validation_ds` is given, else none.
        mode: `"max"`, `"min"` or `"auto"` (min if "loss" or "error" in the name).
        warmup_proportion: fraction of all steps used for linear warm-up.
        weight_decay, clipnorm, optimizer: passed to `create_optimizer`.
        steps_per_epoch: optimizer steps per epoch: each epoch runs this
            many, the data running on across epochs (a tf.data input
            repeats when it ends). Default: one pass over `train_ds`, its
            cardinality or (for bucketed datasets of unknown cardinality)
            counted by iterating `train_ds` once.
        model_dir: optional directory for `best.weights.h5` and TensorBoard
            `logs/`.
        strategy: optional `tf.distribute.Strategy` the model was built under.
        seed: optional int; seeds before compiling (see `setup_finetuning`,
            which you should also call before building the model).
        early_stopping_patience: None or int: stop after this many epochs
            without improvement of `monitor`.
        restore_best_weights: load the best epoch's weights at the end.
        resume: with `model_dir`, write a checkpoint after every epoch and, when
            `model_dir/checkpoints` holds one from an interrupted run with the
            same settings, go on from it (`finetuning_resume`; a tf.data input
            resumes exactly). The checkpoints are removed when the run
            finishes. In a job of several processes, `model_dir` is one
            folder they all see: process 0 writes the checkpoints, and every
            process resumes from the same one.
        run_identity: optional dict of what else defines the run, e.g. the task, the starting checkpoint, a
            digest of the training examples (`finetuning_resume.data_digest`) and the labels: a checkpoint
            written by a run with other values (or another `seed`) is refused in one line, never resumed. Its
            `"starting_point"`, where a local file or folder, is identified by its files' sha256 too
            (`starting_point_identity`): moved or copied elsewhere, it resumes.
        keep_checkpoints: leave the checkpoints when training ends, for the caller to remove with
            `result.remove_checkpoints()` once its own outputs (predictions, model file) are written: a run
            stopped while writing them then resumes with its training done, rather than from the start.
        tensorboard: write TensorBoard logs when `model_dir` is set.
        loss, metrics: compile arguments for an uncompiled model (or to override).
        callbacks: extra Keras callbacks.
        verbose: passed to `model.fit`.
        jit_compile: passed to `model.compile`. `"auto"` is Keras's choice,
            which on the TensorFlow backend turns XLA *off* on CPU-only
            machines; `True` compiles each batch shape once (a few seconds to
            tens of seconds per bucket on a CPU) for faster steps afterwards.

    Returns:
        A `FinetuneResult`.

    Example: see the module docstring.
    """
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"`epochs` must be a positive int, got {epochs!r}.")
    if not (learning_rate > 0 and math.isfinite(learning_rate)):
        raise ValueError(f"`learning_rate` must be a finite number > 0, got {learning_rate!r}.")
    if not 0.0 <= warmup_proportion < 1.0:
        raise ValueError(f"`warmup_proportion` must be in [0, 1), got {warmup_proportion!r}.")
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"`mode` must be 'auto', 'min' or 'max', got {mode!r}.")
    if early_stopping_patience is not None and (
        isinstance(early_stopping_patience, bool)
        or not isinstance(early_stopping_patience, int)
        or early_stopping_patience < 1
    ):
        raise ValueError(f"`early_stopping_patience` must be None or a positive int, got {early_stopping_patience!r}.")
    if seed is not None:
        keras.utils.set_random_seed(seed)

    group = process_group(strategy)  # several JAX or PyTorch processes, else None
    if strategy is not None:  # a tf.distribute strategy built by the caller: each replica its own dropout masks
        draw_own_masks_on_every_replica()
    this = this_process(strategy)  # (index, count, runtime) of a job of several processes, else None
    writes = this is None or this[0] == 0  # one writer
    if group is not None:
        if not type(train_ds).__module__.startswith("tensorflow"):
            raise ValueError(
                f"finetune with {strategy.num_processes} {group.RUNTIME} processes takes a tf.data.Dataset of global "
                f"batches (each process feeds its rows of each), got {type(train_ds).__name__}"
            )
        train_ds = take_rows_of_each_batch(train_ds, group.process_index(), strategy.num_processes)
        validation_ds = group.local_rows(validation_ds, strategy)
        if eval_fn is not None:
            eval_fn = predicting_everywhere(eval_fn, group)

    workers = tensorflow_workers(strategy)  # MultiWorkerMirroredStrategy over several workers, else 1
    global_batches = train_ds
    if workers > 1:  # each worker's rows; distributed after compiling, below
        train_ds = take_rows_of_each_batch(global_batches, tensorflow_worker_index(strategy), workers)

    # A tf.data input is one stream of batches across the epochs, each epoch `steps_per_epoch` of them (a pass of
    # the data unless given). Run to its end instead, Keras's TensorFlow trainer counts one more optimizer iteration
    # at each epoch's end on an input of unknown length (a bucketed one) or on TensorFlow workers, which moves the
    # learning-rate schedule a step ahead every epoch; and the stream is what an interrupted run resumes exactly.
    if model_dir:
        refuse_remote_for_finetuning(model_dir)
    fit_steps_per_epoch = steps_per_epoch
    if steps_per_epoch is None:
        steps_per_epoch = _count_batches(train_ds)
    is_tf_data = type(train_ds).__module__.startswith("tensorflow")
    if is_tf_data:
        train_ds = train_ds.repeat()  # Keras keeps one iterator across epochs of a given length
        fit_steps_per_epoch = steps_per_epoch
    num_train_steps = max(1, steps_per_epoch * epochs)
    warmup_steps = int(round(num_train_steps * warmup_proportion))

    # Processes > 0 write their best weights to a private folder: every process runs the same saving code (JAX's
    # saving creates variables, which all processes of a distribution create together). It is removed when `finetune`
    # returns or raises, not only at exit: a process of several that stops leaves with `os._exit`, which runs no exit
    # handler.
    private = private_directory(this[0]) if model_dir and not writes else None
    # One run at a time in a model_dir (`run_lock`, as pretraining's): two fine-tuning runs there both trained to the
    # end, each overwriting the other's checkpoints and best weights. The writer holds it until `finetune` returns.
    lock = hold_model_dir(model_dir) if model_dir and writes else contextlib.nullcontext()
    lock.__enter__()
    try:
        # Resume: every process reads the shared model_dir's newest checkpoint (process 0 alone writes them).
        checkpoints = checkpoint_manager(model_dir) if model_dir and resume else None
        epochs_to_skip = epochs_done_in(checkpoints) if checkpoints is not None else 0
        if group is not None and checkpoints is not None:  # all processes must resume from the same epoch
            group.check_same_on_every_process("the fine-tuning epoch to resume from", epochs_to_skip,
                                              f"that model_dir {model_dir} is one folder every process sees")

        if loss is None and not model.compiled and hasattr(type(model), "compiled_with_default_loss"):
            # A task model loaded from an inference-only save (a run's model.keras, trained further): its defaults,
            # as its own `fit` would take them (before: "not compiled and no `loss` was given").
            with strategy.scope() if strategy is not None else contextlib.nullcontext():
                model.compile()
        compile_loss = loss
        if compile_loss is None:  # the model's own: a task's "auto" stays "auto" (its reported loss counts real rows)
            compile_loss = "auto" if getattr(model, "compiled_with_default_loss", False) else getattr(model, "loss", None)
        if compile_loss is None:
            raise ValueError(
                "`model` is not compiled and no `loss` was given: pass loss=... "
                "(e.g. keras.losses.SparseCategoricalCrossentropy(from_logits=True))."
            )
        compile_metrics = metrics
        compile_weighted_metrics = None
        if compile_metrics is None and getattr(model, "_compile_config", None) is not None:
            compile_metrics = model._compile_config.config.get("metrics")
            compile_weighted_metrics = model._compile_config.config.get("weighted_metrics")

        from keras_bert_impl.training.optimizer import create_optimizer

        def _compile():
            opt = create_optimizer(
                learning_rate=learning_rate,
                num_train_steps=num_train_steps,
                warmup_steps=warmup_steps,
                optimizer=optimizer,
                weight_decay=weight_decay,
                clipnorm=clipnorm,
            )
            model.compile(optimizer=opt, loss=compile_loss, metrics=compile_metrics, weighted_metrics=compile_weighted_metrics,
                          jit_compile=jit_compile)

        if strategy is not None:
            with strategy.scope():
                _compile()
        else:
            _compile()
        if workers > 1:
            train_ds = distribute_to_workers(model, train_ds, global_batches, strategy, epochs_to_skip * steps_per_epoch)
        elif is_tf_data and keras.backend.backend() != "tensorflow":
            with strategy.scope() if strategy is not None else contextlib.nullcontext():
                build_from_element_spec(model, train_ds.element_spec)  # reads no batch of it

        if monitor is None and eval_fn is None and validation_ds is not None:
            monitor = "val_loss"
        best_tracker = BestEpochCheckpoint(
            eval_fn=eval_fn,
            monitor=monitor,
            mode=mode,
            weights_path=os.path.join(private or model_dir, BEST_WEIGHTS_NAME) if model_dir else None,
            early_stopping_patience=early_stopping_patience,
        )
        timer = EpochTimer()
        all_callbacks = [FiniteLossCheck(learning_rate), timer, best_tracker]
        epochs_done, earlier_history = 0, {}
        if checkpoints is not None:  # after the evaluation: a resumed run knows its best epoch
            # The run's identity first: a changed --sequence_length is named as such, not as the steps per epoch that
            # its length buckets changed.
            identity = dict(run_identity or {})
            if "starting_point" in identity:
                identity["starting_point_sha256"] = starting_point_sha256(identity["starting_point"])
            settings = finetuning_run_settings(
                **identity, dtype_policy=_dtype_policy_name(model),
                epochs=epochs, steps_per_epoch=steps_per_epoch, learning_rate=learning_rate,
                warmup_proportion=warmup_proportion, weight_decay=weight_decay, clipnorm=clipnorm,
                optimizer=optimizer if isinstance(optimizer, str) else type(optimizer).__name__, monitor=monitor,
                early_stopping_patience=early_stopping_patience, seed=seed)
            best_tracker.save_after_checkpoint = True  # a killed run never holds a best file newer than its checkpoint
            # The best weights file of the run is process 0's, in the shared model_dir.
            shared_best = os.path.join(model_dir, BEST_WEIGHTS_NAME)
            with strategy.scope() if strategy is not None else contextlib.nullcontext():  # optimizer variables
                epochs_done, earlier_history, saved = resume_from_latest(checkpoints, model, settings, best_tracker,
                                                                         timer, best_weights_file=shared_best)
            all_callbacks.append(FinetuningCheckpoint(checkpoints, settings, best_tracker, timer, earlier_history,
                                                 writes=writes))
            all_callbacks.append(restoring_at_first_batch(saved))  # PyTorch: each process's dropout stream goes on
            if epochs_done and is_tf_data and workers == 1:  # the stream goes on after the finished epochs' batches
                train_ds = train_ds.skip(epochs_done * steps_per_epoch)
        if model_dir and tensorboard and writes:
            all_callbacks.append(keras.callbacks.TensorBoard(log_dir=os.path.join(model_dir, "logs"), update_freq="epoch"))
        all_callbacks.extend(callbacks)

        if group is not None:
            group.start_from_process_zero(model)  # PyTorch: process 0's weights, dropout masks of each process's own
        latest = checkpoints.latest if checkpoints is not None else lambda: None  # what a restart resumes from
        # Several processes: a collective that fails because another process stopped, in a step or at the last barrier,
        # becomes one line (a LostProcessError) that says how to resume, not the runtime's text.
        with lost_peers_as_one_line(group, latest):
            with strategy.scope() if group is not None else contextlib.nullcontext():  # JAX: each process's rows
                # run_recoverably: stopped (Ctrl-C, an error), the model keeps the weights of its last step, on JAX too;
                # noting_interrupts: a Ctrl-C that Keras drops while JAX computes a step stops it by the next batch
                # (a packed training model is a plain keras.Model, which Task.fit does not cover).
                with noting_interrupts() as noting:
                    new_history = {} if epochs_done >= epochs or best_tracker.stopped_early else run_recoverably(
                        model, "train_function", lambda: model.fit(
                            train_ds,
                            epochs=epochs,
                            initial_epoch=epochs_done,
                            steps_per_epoch=fit_steps_per_epoch,
                            validation_data=validation_ds,
                            shuffle=not type(train_ds).__module__.startswith("tensorflow"),  # (Keras warned: ignored)
                            callbacks=with_interrupt_check(all_callbacks, noting),
                            verbose=verbose,
                        )).history

        def finish():
            if checkpoints is None:
                return
            if group is not None:  # all are done with the checkpoints before 0 removes them
                with lost_peers_as_one_line(group, latest):
                    group.barrier("finetune: finished")
            if writes:
                remove_checkpoints(checkpoints)  # finished: nothing left to resume

        if not keep_checkpoints:
            finish()
        history = {key: earlier_history.get(key, []) + [float(v) for v in new_history.get(key, [])]
                   for key in dict.fromkeys([*earlier_history, *new_history])}
        if restore_best_weights and best_tracker.best_weights is not None:
            model.set_weights(best_tracker.best_weights)
        return FinetuneResult(
            history=history,
            best_epoch=best_tracker.best_epoch,
            best_metrics=dict(best_tracker.best_metrics),
            best_weights_path=best_tracker.weights_path if writes and best_tracker.best_epoch is not None else None,
            epoch_seconds=list(timer.epoch_seconds),
            train_steps=steps_per_epoch,
            stopped_early=best_tracker.stopped_early,
            _remove_checkpoints=finish if keep_checkpoints else None,
        )
    finally:
        lock.__exit__(None, None, None)
        if private is not None:
            remove_private_directories(private)


def _count_batches(dataset):
    if not type(dataset).__module__.startswith("tensorflow"):  # PyDataset, lists: no TensorFlow needed
        try:
            return len(dataset)
        except TypeError as error:
            raise ValueError("Pass `steps_per_epoch`: cannot count the batches of this input.") from error
    from keras_bert_impl.batching.tf_batches import count_batches  # a tf.data input: TensorFlow is there

    return count_batches(dataset)


def _dtype_policy_name(model):
    """The precision the model computes in (`float32`, `mixed_bfloat16`, ...: --mixed_precision)."""
    policy = getattr(model, "dtype_policy", None) or keras.config.dtype_policy()
    return getattr(policy, "name", str(policy))
