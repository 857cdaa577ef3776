"""A complete BERT pretraining run: strategy, data, model, optimizer, fit, checkpoints, export.

`run_pretraining(PretrainingConfig(...))` is what `recipes/pretrain.py` calls.
It builds the `tf.data` pretraining pipeline, a `BertPretrainer` under the
chosen strategy and the paper's optimizer, then trains with `model.fit` in
"epochs" of `checkpoint_every` steps. After each epoch it evaluates on held-out
text, writes TensorBoard summaries and an atomic checkpoint. Restarting the
same command resumes from the newest checkpoint: model, optimizer, step and
the input pipeline's position (the tf.data iterator itself on one device; a
deterministic skip of the consumed batches with several replicas).
"""

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
import time

import keras

from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.head_building import use_pooler
from keras_bert_impl.models.pretrainer import BertPretrainer
from keras_bert_impl.training.optimizer import create_optimizer
from keras_bert_impl.training.precision import mixed_precision_policy, resolve_mixed_precision
from keras_bert_impl.training.attention_init import initialize_attention_qkv, width_scaled_attention_stddev
from keras_bert_impl.training.attention_padding import resolve_attention_padding
from keras_bert_impl.training.position_init import initialize_positions_sinusoidal
from keras_bert_impl.training.weight_init import redraw_plain_normal
from keras_bert_impl.training.pretraining_checks import (  # noqa: F401 (also the run's public names)
    LEGACY_KEYS,
    MAY_CHANGE_ON_RESUME,
    RUN_CONFIG_FILE,
    RUN_DEFINING_SETTINGS,
    check_flags,
    check_model_dir,
    checkpoint_trained_the_pooler,
    check_resumable,
    check_steps_in_epochs,
    read_run_config,
    record_run_config,
    resume_change_message,
    pretraining_run_settings,
)
from keras_bert_impl.training.pretraining_config import (  # noqa: F401 (also the run's public names)
    PRESET_ALIASES,
    PretrainingConfig,
    backbone_config,
    default_checkpoint_every,
    default_warmup_steps,
)
from keras_bert_impl.training.pretraining_datasets import (
    default_dataset_fn,
    distributed_dataset,
    held_out_dataset,
    owns_iterator,
    placeholder_batch,
)
from keras_bert_impl.training.pretraining_errors import NaNLossError  # noqa: F401 (raised by the NaNGuard callback)
from keras_bert_impl.training.pretraining_export import export_pretrainer
from keras_bert_impl.training.pretraining_final_validation import evaluate_held_out
from keras_bert_impl.training.process_cluster import lost_peers_as_one_line
from keras_bert_impl.training.replica_dropout import draw_own_masks_on_every_replica
from keras_bert_impl.training.remote_model_dir import RemoteModelDir, is_remote
from keras_bert_impl.training.run_checkpoints import CheckpointManager
from keras_bert_impl.training.run_lock import ModelDirInUseError, hold_model_dir  # noqa: F401 (raised by the run)
from keras_bert_impl.training.steps_per_execution import on_accelerator, resolve_steps_per_execution
from keras_bert_impl.training.strategy import (
    check_global_batch_size,
    get_strategy,
    process_group,
    resolve_jit_compile,
)
from keras_bert_impl.training.symbolic_build import build_from_element_spec
from keras_bert_impl.training.torch_random_state import restoring_at_first_batch

_export = export_pretrainer  # (its name here before `pretraining_export` held it)


def check_vocab(path):
    """Refuses, in one line naming `--vocab` and the file, a missing `--vocab` (with --train_files), a path that is
    not a file, and a file that is not UTF-8 (with the `iconv` command that re-encodes it, as the training files'
    check gives: `text.vocabulary.check_vocabulary_file`). Returns the file's bytes."""
    from keras_bert_impl.text.vocabulary import check_vocabulary_file

    if not path:
        raise ValueError(
            "--vocab is required with --train_files: a WordPiece vocab.txt, one token a line (recipes/build_vocab.py "
            "makes one from the corpus; the bundled corpus vocab is the default only without --train_files)"
        )
    return check_vocabulary_file(path, "--vocab")


def run_pretraining(config, dataset_fn=None):
    """Runs (or resumes) pretraining as `config` says; returns a dict of results.

    Args:
        config: a `PretrainingConfig`.
        dataset_fn: optional `(files, tokenizer, batch_size, seed, repeat,
            shuffle, input_context) -> tf.data.Dataset` to replace
            `keras_bert_impl.data.pretraining_dataset`.

    Returns:
        dict with `step`, `validation` metrics, `model_dir`, `logs_dir`,
        `export_dir` (written by the chief only), `is_chief`, `sequences_per_second`, `jit_compile` (what `--jit_compile`
        resolved to: `strategy.resolve_jit_compile`), `masked_word_guesses` (the chief's: the trained model's top 3
        at the masked words of the held-out probe sentences, `pretraining_callbacks.masked_word_guesses`),
        `held_out_curve` (`(step, held-out MLM accuracy)` after every checkpoint of the run, those written before a
        resume included: `pretraining_callbacks.held_out_accuracies`).

    Raises:
        ModelDirInUseError: another process is running in `config.model_dir` (`run_lock.hold_model_dir`: the run
            holds the directory's lock from before it reads the checkpoints until it returns).
    """
    with contextlib.ExitStack() as held:
        return _run_pretraining(config, dataset_fn, held)


def _run_pretraining(config, dataset_fn, held):
    """`run_pretraining`'s body; `held` (an `ExitStack`) keeps the model_dir's run lock until the run returns."""
    from keras_bert_impl.training import pretraining_callbacks as callbacks_lib

    # === Check every flag, the model_dir and every input file before any work or any write ===
    # The defaults: a resumed run keeps the warm-up and the checkpoint interval it ran with.
    auto_warmup, auto_checkpoint_every = config.warmup_steps is None, config.checkpoint_every is None
    config, strategy, remote, tokenizer, model_config, settings = _checked_start(config, dataset_fn, held,
                                                                                  auto_checkpoint_every)

    # === One run at a time in a model_dir: the lock is taken before the checkpoints are read (the writer of a
    # multi-process job takes it); the kernel frees it when the process ends, however it ends ===
    if strategy is None or callbacks_lib.is_chief(strategy):
        held.enter_context(hold_model_dir(config.model_dir))

    # === Resume: only a model_dir with a checkpoint holds a run; its recorded flags must match ===
    manager = CheckpointManager(os.path.join(config.model_dir, "checkpoints"), keep=config.keep_checkpoints)
    latest = manager.latest()
    config, settings, start_step, latest_state = _resume_point(config, settings, latest, auto_warmup,
                                                               auto_checkpoint_every)

    # === Seed, strategy, precision ===
    strategy, processes, replicas = _seeded_strategy(config, strategy, start_step)

    # === Model and optimizer, under the strategy ===
    steps_per_execution = resolve_steps_per_execution(
        config.steps_per_execution, config.checkpoint_every, config.log_every, on_accelerator(strategy))
    attention_padding = resolve_attention_padding(
        config.attention_padding, config.mixed_precision, _attention_dropout(config, model_config))
    model, optimizer, pooler_trained_as_started = _model_and_optimizer(
        config, strategy, tokenizer, model_config, latest, latest_state, steps_per_execution, attention_padding)

    # === Data ===
    train_iterator, train_data, validation_data, validation_feed = _training_feeds(
        config, strategy, processes, replicas, model, dataset_fn or default_dataset_fn(config), tokenizer, start_step)

    restored = manager.restore(latest, model, optimizer, iterator=train_iterator) if latest else None
    if processes:  # PyTorch processes start from process 0's weights and draw dropout masks of their own
        processes.start_from_process_zero(model)
    if restored:
        print(f"Resumed from {latest} at step {start_step}.", flush=True)
    if restored and pooler_trained_as_started:
        print("The pooler trains on, as when this run started (its checkpoints hold the pooler's optimizer slots); "
              "a new masked-LM-only run freezes it, since masked LM alone never reads it.", flush=True)

    logs_dir = os.path.join(config.model_dir, "logs")
    export_dir = os.path.join(config.model_dir, "export")
    probe = callbacks_lib.probe_sentences(config.validation_files or config.train_files, tokenizer,
                                          config.sequence_length)
    chief = callbacks_lib.is_chief(strategy)  # the one writer: the TF chief, JAX process 0
    if chief and not latest:
        # The run's settings are on disk (atomically) before its first checkpoint can be: a run killed between
        # the two would otherwise leave a checkpoint that any flags could resume.
        record_run_config(config.model_dir, settings, fresh=True)
        if remote is not None:  # a bucket this run cannot write to fails now, not at the first checkpoint
            remote.push()
    # (it keeps the held-out accuracy after every checkpoint of the run, those before a resume included, where they
    # were measured on the same held-out set)
    measured_on = callbacks_lib.held_out_set(config.validation_files, config.validation_steps)
    earlier = callbacks_lib.held_out_accuracies(manager, restored, start_step, measured_on)
    if restored and not earlier and (restored.get(callbacks_lib.HELD_OUT_KEY) or {}):
        print("The held-out set changed since the checkpoint (--validation_files or --validation_steps): the "
              "held-out accuracy of the earlier checkpoints is left out of the summary.", flush=True)
    def saved(path):  # the settings this checkpoint was written with; a remote --model_dir gets both
        record_run_config(config.model_dir, settings)
        if remote is not None:  # (a failed copy is one line; the run goes on, and the next checkpoint copies it)
            remote.push_or_report()

    checkpointing = callbacks_lib.PretrainingCheckpoint(
        manager, optimizer, train_iterator, config.checkpoint_every,
        state={"config": config.config, callbacks_lib.HELD_OUT_SET_KEY: measured_on},
        on_saved=saved, chief=chief, held_out=earlier)

    run_callbacks = [
        restoring_at_first_batch(restored),  # PyTorch: each process's dropout stream goes on where it was
        callbacks_lib.NaNGuard(start_step, manager),
        callbacks_lib.PretrainingTensorBoard(
            logs_dir, model, tokenizer, probe, config=config, start_step=start_step,
            log_every=config.log_every, global_batch_size=config.global_batch_size,
            sequence_length=config.sequence_length, hparams=_hparams(config, replicas),
            profile_steps=config.profile_steps, chief=chief,
        ),
        checkpointing,
    ]
    epochs = config.num_steps // config.checkpoint_every
    initial_epoch = start_step // config.checkpoint_every
    # Several processes: wherever a collective fails because a peer has gone (a step, the final evaluation, the
    # export, the last barrier), the process left behind raises the one line that says how to resume.
    with lost_peers_as_one_line(processes, manager.latest):
        start_time = time.time()
        history = {}
        if initial_epoch < epochs:
            history = model.fit(
                train_data,
                epochs=epochs,
                initial_epoch=initial_epoch,
                steps_per_epoch=config.checkpoint_every,
                validation_data=validation_feed,
                validation_steps=config.validation_steps if validation_data is not None else None,
                callbacks=run_callbacks,
                verbose=config.verbose,
            ).history
        elapsed = time.time() - start_time
        trained_steps = config.num_steps - start_step

        validation, floor = evaluate_held_out(model, validation_data, validation_feed, config, tokenizer, chief,
                                              logs_dir)
        # On every process: in a job of several JAX processes the weights span them, so a forward pass, or the copy
        # that the export saves (new variables), is made by all of them together; process 0 alone writes.
        guesses = callbacks_lib.masked_word_guesses(model, tokenizer, probe, k=3)
        exported = model.inference_copy()
        if chief:
            export_pretrainer(exported, export_dir, config)
            if remote is not None:  # the export, and the logs since the last checkpoint
                remote.push()
        if processes:  # every process returns once process 0's files are written
            processes.barrier("run_pretraining: checkpoint and export written")
    return {
        "step": config.num_steps,
        "resumed_from_step": start_step,
        "validation": {k: float(v) for k, v in validation.items()},
        "unigram_floor": floor,
        "masked_word_guesses": guesses if chief else [],
        "history": {k: [float(x) for x in v] for k, v in history.items()},
        # (step, held-out MLM accuracy) after every checkpoint of the run, those before a resume included
        "held_out_curve": sorted((int(step), value) for step, value in checkpointing.held_out.items()),
        "sequences_per_second": trained_steps * config.global_batch_size / elapsed if trained_steps else None,
        "jit_compile": model.jit_compile,
        "mixed_precision": config.mixed_precision,
        "attention_padding": attention_padding,
        "recompute_activation": config.recompute_activation,
        "layer_norm_backward": config.layer_norm_backward,
        "steps_per_execution": steps_per_execution,
        "replicas": replicas,
        "is_chief": chief,
        # (a remote --model_dir's own paths, where the files were copied)
        "model_dir": remote.remote if remote else config.model_dir,
        "logs_dir": f"{remote.remote}/logs" if remote else logs_dir,
        "export_dir": f"{remote.remote}/export" if remote else export_dir,
        "model": model,
    }


def _training_feeds(config, strategy, processes, replicas, model, build_dataset, tokenizer, start_step):
    """The training feed and the held-out feeds: `(train_iterator, train_data, validation_data, validation_feed)`.

    One pipeline (one process, or a strategy whose `fit` takes an iterator): `train_iterator` is the tf.data
    iterator that the checkpoints save and restore; a distributed dataset otherwise (None). `validation_feed` is
    what each process feeds `fit` of the held-out batches `validation_data` (None without --validation_files).
    """
    from keras_bert_impl.training import pretraining_callbacks as callbacks_lib
    from keras_bert_impl.training.pretraining_inputs import split_features_labels

    split = lambda features: split_features_labels(features, nsp=config.nsp)  # noqa: E731
    single_pipeline = owns_iterator(strategy)
    if single_pipeline:
        train_dataset = build_dataset(config.train_files, tokenizer, config.global_batch_size,
                                      config.seed, True, True, None).map(split)
        train_iterator = iter(train_dataset)
        train_data = callbacks_lib.IteratorAdapter(train_iterator)
        if keras.backend.backend() != "tensorflow":  # else `fit` would spend a batch of the iterator on building
            with strategy.scope():
                build_from_element_spec(model, train_dataset.element_spec)
    else:
        train_iterator = None
        train_data = distributed_dataset(strategy, build_dataset, config, tokenizer, split, start_step)

    validation_data = validation_feed = None
    if config.validation_files:
        validation_data = held_out_dataset(build_dataset, config, tokenizer).map(split)
        # Several processes: JAX's feed their rows of the same global held-out batches, PyTorch's the whole batches.
        validation_feed = processes.local_rows(validation_data, strategy) if processes else validation_data

    if not single_pipeline and keras.backend.backend() == "tensorflow":
        from keras_bert_impl.training.multiworker_patches import (
            build_before_distributed_fit,
            patch_multiworker_metric_reduction,
        )

        patch_multiworker_metric_reduction()
        build_before_distributed_fit(model, strategy, placeholder_batch(config, replicas))
    return train_iterator, train_data, validation_data, validation_feed


def _checked_start(config, dataset_fn, held, auto_checkpoint_every):
    """Checks every flag, the model_dir and every input file before any work or any write (`auto_checkpoint_every`:
    no --checkpoint_every was given). Returns the resolved
    `config` (a remote `--model_dir`: its local copy's), the strategy where it comes before the checks (`--strategy
    multiworker`; else None), the `RemoteModelDir` (or None), the tokenizer, the backbone's arguments and the run's
    settings (`pretraining_run_settings`)."""
    from keras_bert_impl.data.pretraining import check_pretraining_files
    from keras_bert_impl.text.tokenizer import BertTokenizer
    from keras_bert_impl.training import pretraining_callbacks as callbacks_lib

    config = config.resolved()
    check_flags(config, default_checkpoint_every=auto_checkpoint_every)
    check_model_dir(config.model_dir)
    strategy = None
    if config.strategy == "multiworker" and keras.backend.backend() in ("tensorflow", "jax", "torch"):
        # MultiWorkerMirroredStrategy configures TensorFlow's collective ops, which must happen before TensorFlow
        # runs any op ("Collective ops must be configured at program startup"); the checks below run some. On JAX,
        # jax.distributed.initialize must come before the first JAX call (`--mixed_precision auto` lists devices).
        # PyTorch's processes join here too, so that a missing process fails the run before any work.
        strategy = get_strategy(config.strategy, tpu=config.tpu, coordinator_address=config.coordinator_address,
                                num_processes=config.num_processes, process_id=config.process_id)
    # A remote --model_dir (gs://): the run works in a local copy of what it needs to resume, and copies each
    # checkpoint back as it is written (`remote_model_dir`); each process of a job works in its own copy.
    remote = None
    if is_remote(config.model_dir):
        local = None
        if strategy is not None and not callbacks_lib.is_chief(strategy):
            local = tempfile.mkdtemp(prefix="keras_bert_impl_run_")
            held.callback(shutil.rmtree, local, True)
        remote = RemoteModelDir(config.model_dir, local=local)
        config = dataclasses.replace(config, model_dir=remote.local)
    # `auto` becomes bf16 or None (float32) here, before the run's settings are recorded or compared.
    config = dataclasses.replace(config, mixed_precision=resolve_mixed_precision(config.mixed_precision,
                                                                                config.strategy))
    if dataset_fn is None:
        for flag, files in (("train_files", config.train_files), ("validation_files", config.validation_files)):
            try:
                check_pretraining_files(files) if files else None
            except ValueError as error:
                raise ValueError(f"--{flag}: {error}") from None
    check_vocab(config.vocab)
    try:
        tokenizer = BertTokenizer(config.vocab, lowercase=config.lowercase)
    except ValueError as error:  # an empty or duplicated token, a special token missing
        message = str(error)
        raise ValueError(message if message.startswith("--vocab") else f"--vocab: {message}") from None
    model_config = backbone_config(config, tokenizer.vocabulary_size())
    settings = pretraining_run_settings(config, model_config, tokenizer.get_vocabulary())
    return config, strategy, remote, tokenizer, model_config, settings


def _resume_point(config, settings, latest, auto_warmup, auto_checkpoint_every):
    """Resume: only a model_dir with a checkpoint (`latest`) holds a run; its recorded flags must match. Returns
    `config` and `settings` (the run's own warm-up and checkpoint interval where no flag named them), the step to
    start from and the checkpoint's `state.json`."""
    start_step, latest_state = 0, {}
    if latest:
        with open(os.path.join(latest, "state.json")) as f:
            latest_state = json.load(f)
        start_step = latest_state["step"]
        recorded = read_run_config(config.model_dir) or {}
        recorded_warmup = recorded.get("warmup_steps")
        if auto_warmup and isinstance(recorded_warmup, int) and 0 <= recorded_warmup <= config.num_steps:
            # No --warmup_steps: the run's own (extending a 300-step run to 600 keeps its 30), not the new default.
            config = dataclasses.replace(config, warmup_steps=recorded_warmup)
            settings = dict(settings, warmup_steps=recorded_warmup)
        recorded_interval = recorded.get("checkpoint_every")
        if auto_checkpoint_every and isinstance(recorded_interval, int) and recorded_interval >= 1:
            # No --checkpoint_every: the run's own (extending a 50-step run to 100 keeps its 50), which the new
            # --num_steps must then be a multiple of.
            config = dataclasses.replace(config, checkpoint_every=recorded_interval)
            settings = dict(settings, checkpoint_every=recorded_interval)
            check_steps_in_epochs(config, recorded_interval)
        changed = check_resumable(config.model_dir, settings, checkpoint=latest)
        if config.num_steps < start_step:
            raise ValueError(
                f"--num_steps={config.num_steps} is below step {start_step} of the checkpoint {latest}: a run "
                f"cannot be shortened; pass --num_steps >= {start_step}, or use a new --model_dir"
            )
        for change in changed:
            print(resume_change_message(*change, model_dir=config.model_dir, init_checkpoint=config.init_checkpoint),
                  flush=True)
    return config, settings, start_step, latest_state


def _seeded_strategy(config, strategy, start_step):
    """Seeds the run and returns `(strategy, processes, replicas)`: the strategy (built here unless `_checked_start`
    built it), its group of JAX or PyTorch processes (else None) and its replica count, with the batch size and
    `--jit_compile` checked against them and the mixed-precision policy set."""
    import tensorflow as tf

    if config.deterministic:
        tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(config.seed)

    if strategy is None:
        strategy = get_strategy(config.strategy, tpu=config.tpu, coordinator_address=config.coordinator_address,
                                num_processes=config.num_processes, process_id=config.process_id)
    processes = process_group(strategy)  # several JAX or PyTorch processes, else None
    draw_own_masks_on_every_replica()  # a strategy built by the caller too: each replica its own dropout masks
    if processes:  # all must resume from the same step
        processes.check_same_on_every_process("the checkpoint step to resume from", start_step,
                                              f"--model_dir {config.model_dir} (a filesystem all processes see)")
    replicas = strategy.num_replicas_in_sync
    check_global_batch_size(config.global_batch_size, replicas)
    if config.jit_compile is False and replicas > 1 and keras.backend.backend() == "jax":
        # Eager ops over several JAX CPU devices can deadlock XLA's CPU collectives (two programs each waiting
        # for its all-reduce partner); compiled steps are one program and do not.
        raise ValueError(
            f"--jit_compile false with {replicas} JAX devices: JAX runs data parallelism through compiled steps "
            f"(eager ops across devices can deadlock XLA's collectives); use --jit_compile true or auto"
        )
    keras.mixed_precision.set_global_policy(mixed_precision_policy(config.mixed_precision))
    return strategy, processes, replicas


def _model_and_optimizer(config, strategy, tokenizer, model_config, latest, latest_state, steps_per_execution,
                         attention_padding):
    """The `BertPretrainer` and its optimizer, built and compiled under the strategy: from `--init_checkpoint`, or
    from scratch with the starting values docs/pretraining.md measured. Returns `(model, optimizer,
    pooler_trained_as_started)`; the last is true where the checkpoint's run trained the pooler."""
    # How the backward pass trades memory traffic on a GPU (docs/models.md); the same values either way.
    memory_settings = {"recompute_activation": config.recompute_activation == "on",
                       "layer_norm_backward": config.layer_norm_backward}
    with strategy.scope():
        if config.init_checkpoint:
            backbone = BertBackbone.from_preset(config.init_checkpoint, attention_padding=attention_padding,
                                                **memory_settings, **(
                {"dropout": config.dropout} if config.dropout is not None else {}))
            if backbone.vocabulary_size != tokenizer.vocabulary_size():
                raise ValueError(
                    f"--init_checkpoint {config.init_checkpoint} has vocabulary_size="
                    f"{backbone.vocabulary_size} but --vocab {config.vocab} has "
                    f"{tokenizer.vocabulary_size()} tokens: leave --vocab out (the checkpoint's own is the default)"
                    " or give the vocab.txt it was trained with."
                )
        else:
            backbone = BertBackbone(**model_config, attention_padding=attention_padding, **memory_settings)
            initialize_attention_qkv(backbone, config.attention_init_stddev or width_scaled_attention_stddev(
                backbone.hidden_dim), seed=config.seed)
        model = BertPretrainer(backbone, nsp=config.nsp,
                               vocabulary_padding_multiple=config.vocabulary_padding_multiple)
        if not config.init_checkpoint:  # from scratch: the starting values docs/pretraining.md measured
            if not latest and config.config not in PRESET_ALIASES and not os.path.isfile(config.config):
                # A preset's full name (`--preset bert_base_en_uncased`, as keras-hub users type it) names its
                # architecture here, not its weights: say so, and how to start from them.
                print(f"--config {config.config}: its architecture, trained from scratch (to go on from its "
                      f"weights and vocabulary: --init_checkpoint {config.config}).", flush=True)
            if config.weight_init == "normal":
                redraw_plain_normal(model, seed=config.seed + 1000)  # the QKV kernels keep the init above
            if config.position_init == "sinusoidal":  # after the redraw, which draws the position table too
                initialize_positions_sinusoidal(backbone)

        def compile_model():
            optimizer = create_optimizer(
                config.learning_rate, config.num_steps, config.warmup_steps,
                optimizer=config.optimizer, beta_2=config.adam_beta2, weight_decay=config.weight_decay,
                gradient_accumulation_steps=config.gradient_accumulation_steps,
                mixed_precision=config.mixed_precision,
            )
            model.compile(
                optimizer=optimizer,
                jit_compile=resolve_jit_compile(config.jit_compile, strategy),
                steps_per_execution=steps_per_execution,
            )
            optimizer.build(model.trainable_variables)
            return optimizer

        optimizer = compile_model()
        pooler_trained_as_started = latest and checkpoint_trained_the_pooler(latest_state, model, optimizer)
        if pooler_trained_as_started:  # a masked-LM-only run started before masked LM alone froze the pooler
            use_pooler(model.backbone)
            optimizer = compile_model()
    return model, optimizer, pooler_trained_as_started


def _hparams(config, replicas):
    values = {k: v for k, v in dataclasses.asdict(config).items()
              if isinstance(v, (int, float, str, bool)) and not isinstance(v, type(None))}
    values["num_replicas"] = replicas
    values["backend"] = keras.backend.backend()
    return values


def _attention_dropout(config, model_config):
    """The attention-probability dropout the run trains with (`--attention_padding auto` needs it to be 0)."""
    if config.init_checkpoint:
        from keras_bert_impl.checkpoints.loading import read_preset_config

        architecture = dict(read_preset_config(config.init_checkpoint))
        if config.dropout is not None:
            architecture["dropout"] = config.dropout
    else:
        architecture = model_config
    if architecture.get("attention_dropout") is not None:
        return architecture["attention_dropout"]
    return architecture.get("dropout", 0.1)
