"""Callbacks and input plumbing of a pretraining run (TensorFlow needed for tf.data and summaries).

- `IteratorAdapter`: lets `model.fit` read from a tf.data iterator that the
  run owns, so the iterator's position can be checkpointed exactly.
- `PretrainingCheckpoint`: atomic checkpoint at the end of every epoch of
  `checkpoint_every` steps.
- `NaNGuard`: stops at the first non-finite loss, naming the step and the last
  good checkpoint.
- `PretrainingTensorBoard`: train/validation scalars (losses, accuracies,
  learning rate, gradient norm, sequences/s, tokens/s), hparams, and a text
  summary of the model's top-5 guesses for masked words of held-out sentences.
"""

import math
import os
import time

import keras
import numpy as np
import tensorflow as tf
from keras.src.trainers.data_adapters.data_adapter import DataAdapter

from keras_bert_impl.models.probabilities import softmax
from keras_bert_impl.training.pretraining_errors import NaNLossError
from keras_bert_impl.training.torch_random_state import checkpoint_entry


class _OwnedIteratorDataset(tf.distribute.DistributedDataset):
    """Presents an existing iterator to Keras's TF trainer as a dataset whose `iter()` is that iterator."""

    def __init__(self, iterator):
        self._iterator = iterator

    def __iter__(self):
        return self._iterator

    @property
    def element_spec(self):
        return self._iterator.element_spec


class IteratorAdapter(DataAdapter):
    """A Keras data adapter over an iterator the caller owns (and checkpoints).

    `model.fit(IteratorAdapter(iterator), steps_per_epoch=...)` consumes exactly
    `steps_per_epoch` batches per epoch from `iterator` on the TensorFlow backend
    (and on JAX/PyTorch on CPU), so after any epoch `iterator` is positioned at
    the next unread batch.
    """

    def __init__(self, iterator):
        self.iterator = iterator

    def get_tf_dataset(self):
        return _OwnedIteratorDataset(self.iterator)

    def get_numpy_iterator(self):
        for batch in self.iterator:
            yield tf.nest.map_structure(lambda t: t.numpy(), batch)

    def get_jax_iterator(self):
        return self.get_numpy_iterator()

    def get_torch_dataloader(self):
        return self.get_numpy_iterator()

    @property
    def num_batches(self):
        return None

    @property
    def batch_size(self):
        return None

    @property
    def has_partial_batch(self):
        return False

    @property
    def partial_batch_size(self):
        return None


def is_chief(strategy=None):
    """False on the non-chief workers of a MultiWorkerMirroredStrategy and on JAX or PyTorch processes > 0 (no files).

    Pass the run's `strategy`: Keras calls callbacks outside `strategy.scope()`, where
    `tf.distribute.get_strategy()` is the default strategy and every worker would look like the chief.
    Without it, the strategy of the enclosing scope is used.
    """
    if keras.backend.backend() == "jax":
        import jax

        if jax.distributed.is_initialized() and jax.process_index() != 0:
            return False
    if keras.backend.backend() == "torch":
        from keras_bert_impl.training import torch_processes

        if torch_processes.process_index() != 0:
            return False
    if strategy is None:
        if not tf.distribute.has_strategy():
            return True
        strategy = tf.distribute.get_strategy()
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return True  # one Python client drives every TPU core
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True
    return resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0
                                             and "chief" not in resolver.cluster_spec().as_dict())


HELD_OUT_KEY = "held_out_mlm_accuracy"  # the key of a checkpoint's state.json (`PretrainingCheckpoint`)
HELD_OUT_SET_KEY = "held_out_set"  # what those accuracies were measured on (`held_out_set`)


def held_out_set(validation_files, validation_steps):
    """What the held-out accuracy is measured on, as a checkpoint's state.json records it: the validation files
    (path and size) and the number of batches. The other settings that shape the held-out batches (batch size,
    sequence length, masking, seed) cannot change on resume.

    Example:
    >>> from keras_bert_impl.data.corpus import bundled_corpus
    >>> held_out_set([bundled_corpus()["valid"]], 20)["validation_steps"]
    20
    """
    files = [[str(path), int(tf.io.gfile.stat(str(path)).length)] for path in sorted(validation_files or [])]
    return {"validation_files": files, "validation_steps": int(validation_steps)}


def same_held_out_set(recorded, now):
    """Whether two `held_out_set` records name the same held-out set: the same number of batches and the same
    files, by name and size in order, wherever they are (a moved corpus keeps its curve).

    >>> a = {"validation_files": [["/data/valid.txt", 2048]], "validation_steps": 20}
    >>> same_held_out_set(a, {"validation_files": [["/mnt/valid.txt", 2048]], "validation_steps": 20})
    True
    >>> same_held_out_set(a, {"validation_files": [["/data/valid.txt", 2048]], "validation_steps": 10})
    False
    >>> same_held_out_set(a, {"validation_files": [["/data/other.txt", 2048]], "validation_steps": 20})
    False
    """
    def by_name(record):
        return ([(os.path.basename(str(path)), size) for path, size in record.get("validation_files") or []],
                record.get("validation_steps"))

    return by_name(recorded) == by_name(now)


def held_out_accuracies(manager, restored_state, start_step, measured_on=None):
    """`{"<step>": accuracy}`: the held-out MLM accuracy after each checkpoint of the run up to `start_step`.

    From the resumed checkpoint's state.json (`restored_state`, `HELD_OUT_KEY`); a checkpoint written before that
    key existed gives what the checkpoints still in `manager`'s directory say of their own step (their `logs`).
    Accuracies measured on another held-out set than `measured_on` (`held_out_set`: --validation_files or
    --validation_steps changed on resume) are left out: one curve never mixes two sets. The same files moved
    (another mount, a new install's bundled corpus: the same names and sizes) are the same set.
    """
    if not restored_state:
        return {}
    recorded_set = restored_state.get(HELD_OUT_SET_KEY)
    if measured_on is not None and recorded_set is not None and not same_held_out_set(recorded_set, measured_on):
        return {}
    if isinstance(restored_state.get(HELD_OUT_KEY), dict):
        return {str(step): float(value) for step, value in restored_state[HELD_OUT_KEY].items()
                if int(step) <= start_step}
    import json

    found = {}
    for step in manager.all_steps():
        if step > start_step:
            continue
        try:
            with open(os.path.join(manager.path(step), "state.json")) as f:
                value = json.load(f).get("logs", {}).get("val_mlm_accuracy")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, (int, float)):
            found[str(step)] = float(value)
    return found


class PretrainingCheckpoint(keras.callbacks.Callback):
    """Saves an atomic checkpoint (model, optimizer, step, iterator) after each epoch.

    On PyTorch the checkpoint also holds every process's global random generators, which
    Keras's unseeded dropout draws from (`torch_random_state`).

    `on_saved(path)` is called after each save (the run records its configuration again then, so a
    setting that may change on resume is recorded once a checkpoint used it; the first record is written
    before training starts, so no checkpoint exists without one).

    Each checkpoint's state.json also holds the held-out MLM accuracy after every checkpoint of the run up to
    it (`HELD_OUT_KEY`, `{"<step>": accuracy}`): `held_out` starts from the resumed checkpoint's
    (`held_out_accuracies`), so a resumed run reports the accuracy of the checkpoints written before it
    started too, and a checkpoint removed by `keep` takes none of it away.
    """

    def __init__(self, manager, optimizer, iterator, steps_per_epoch, state=None, on_saved=None, chief=None,
                 held_out=None):
        super().__init__()
        self.chief = chief  # None: ask `is_chief()` at each save
        self.on_saved = on_saved
        self.manager = manager
        self.optimizer = optimizer
        self.iterator = iterator
        self.steps_per_epoch = steps_per_epoch
        self.state = dict(state or {})
        self.held_out = dict(held_out or {})  # "<step>" -> held-out MLM accuracy after that checkpoint
        self.last_path = manager.latest()

    def on_epoch_end(self, epoch, logs=None):
        if getattr(self.model, "_nan_detected", False):
            return
        step = (epoch + 1) * self.steps_per_epoch
        if "val_mlm_accuracy" in (logs or {}):
            self.held_out[str(step)] = float(logs["val_mlm_accuracy"])
        if self.held_out:
            self.state[HELD_OUT_KEY] = dict(sorted(self.held_out.items(), key=lambda item: int(item[0])))
        random_states = checkpoint_entry()  # PyTorch's generators, of every process (gathered: all call it)
        if self.chief if self.chief is not None else is_chief():
            self.last_path = self.manager.save(
                step, self.model, self.optimizer, iterator=self.iterator,
                state=dict(self.state, logs={k: float(v) for k, v in (logs or {}).items()}, **random_states),
            )
            if self.on_saved is not None:
                self.on_saved(self.last_path)


class NaNGuard(keras.callbacks.Callback):
    """Stops training at the first non-finite loss and raises `NaNLossError` with the step."""

    def __init__(self, start_step, manager):
        super().__init__()
        self.manager = manager
        self.steps_per_epoch = None
        self.epoch = 0

    def on_train_begin(self, logs=None):
        self.steps_per_epoch = self.params.get("steps")

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            step = self.epoch * self.steps_per_epoch + batch + 1
            self.model._nan_detected = True  # noqa: SLF001
            self.model.stop_training = True
            last = self.manager.latest()
            raise NaNLossError(
                f"Training loss is {float(loss)} at step {step}; stopped. "
                + (f"The last good checkpoint is {last} (it was kept)."
                   if last else "No checkpoint was written before it.")
                + " Run the same command again with a lower --learning_rate or a larger --warmup_steps"
                + (" (both may change on resume: it continues from that checkpoint)" if last else "")
                + "; with --mixed_precision fp16, start a new --model_dir with bf16."
            )


PROBE_MIN_WORDS = 10  # probe lines of at least this many words are preferred
PROBE_SCAN_LINES = 100_000  # lines read at most looking for them, once shorter ones are in hand


def probe_sentences(files, tokenizer, sequence_length, count=3, every=6):
    """A few fixed held-out sentences with every `every`-th word piece masked, for the text summary.

    The first `count` lines of at least `PROBE_MIN_WORDS` words; a corpus of
    shorter sentences (legitimate) gives its longest lines instead, so that
    the probe is never empty.

    Raises:
        ValueError: `files` hold no non-blank line (the start-up file check
            refuses such text files before).
    """
    lines, shorter, scanned = [], [], 0
    for path in files:
        with tf.io.gfile.GFile(path) as f:
            for line in f:
                line = line.strip()
                scanned += 1
                if len(line.split()) >= PROBE_MIN_WORDS:
                    lines.append(line)
                elif line:
                    shorter.append((-len(line.split()), scanned, line))
                    shorter = sorted(shorter)[:count]  # the longest, the first of equal length
                if len(lines) >= count or (scanned >= PROBE_SCAN_LINES and len(lines) + len(shorter) >= count):
                    break
        if len(lines) >= count or (scanned >= PROBE_SCAN_LINES and len(lines) + len(shorter) >= count):
            break
    lines += [line for _, _, line in sorted(shorter)][: count - len(lines)]
    if not lines:
        raise ValueError(f"{', '.join(files)}: no non-blank line to build the held-out probe sentences from")
    ids = tokenizer.tokenize(tf.constant(lines, tf.string)).to_list()
    max_predictions = max(1, (sequence_length - 2) // every)
    batch = {k: [] for k in ("token_ids", "segment_ids", "padding_mask", "mask_positions",
                             "mask_ids", "mask_weights")}
    cls_id, sep_id, mask_id = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id
    for row in ids:
        row = [int(t) for t in row][: sequence_length - 2]
        tokens = [cls_id] + row + [sep_id]
        positions = list(range(1, len(tokens) - 1, every))[:max_predictions]
        labels = [tokens[p] for p in positions]
        for p in positions:
            tokens[p] = mask_id
        pad = sequence_length - len(tokens)
        fill = max_predictions - len(positions)
        batch["token_ids"].append(tokens + [0] * pad)
        batch["segment_ids"].append([0] * sequence_length)
        batch["padding_mask"].append([1] * len(tokens) + [0] * pad)
        batch["mask_positions"].append(positions + [0] * fill)
        batch["mask_ids"].append(labels + [0] * fill)
        batch["mask_weights"].append([1] * len(positions) + [0] * fill)
    return {k: np.asarray(v, "int32") for k, v in batch.items()}


def masked_word_guesses(model, tokenizer, probe, k=5):
    """The model's `k` likeliest pieces at each masked position of the probe sentences.

    Returns:
        One dict per probe sentence: `{"masked": the sentence's pieces with
        [MASK]s, "guesses": [(truth, [(piece, probability), ...]), ...]}`.
    """
    inputs = {n: probe[n] for n in ("token_ids", "segment_ids", "padding_mask", "mask_positions")}
    logits = keras.ops.convert_to_numpy(model(inputs, training=False)["mlm"])
    vocab = [v.decode() if isinstance(v, bytes) else v for v in tokenizer.get_vocabulary()]
    sentences = []
    for i in range(len(probe["token_ids"])):
        length = int(probe["padding_mask"][i].sum())
        guesses = []
        for j in range(len(probe["mask_ids"][i])):
            if not probe["mask_weights"][i][j]:
                continue
            row = logits[i, j]
            probabilities = softmax(row)
            best = np.argsort(-row, kind="stable")[:k]
            guesses.append((vocab[probe["mask_ids"][i][j]], [(vocab[t], float(probabilities[t])) for t in best]))
        sentences.append({"masked": " ".join(vocab[t] for t in probe["token_ids"][i][1:length - 1]),
                          "guesses": guesses})
    return sentences


def top_k_report(model, tokenizer, probe, k=5):
    """Markdown: each probe sentence with [MASK]s, then truth -> top-k guesses per masked word."""
    parts = []
    for sentence in masked_word_guesses(model, tokenizer, probe, k):
        parts.append(f"**{sentence['masked']}**\n")
        parts.append("| masked | top-5 guesses |\n|---|---|")
        for truth, guesses in sentence["guesses"]:
            parts.append(f"| {truth} | {', '.join(f'{piece} ({p:.2f})' for piece, p in guesses)} |")
        parts.append("")
    return "\n".join(parts)


def mark_session_start(writer, step):
    """Writes a `SessionLog.START` event at `step` with `writer`: where a run resumes from a checkpoint, TensorBoard
    then drops what the stopped run logged at `step` and after (the steps trained again), rather than drawing both.
    Its default reader (the Rust data server) does so already by the steps alone; the Python reader
    (`tensorboard --load_fast=false`, or no data server) only at this event, as it did for TF1's `Supervisor`. A run's
    first start marks nothing to drop. Nothing is written where TensorFlow lacks the (internal) op.

    Example:
    >>> import tempfile, tensorflow as tf
    >>> mark_session_start(tf.summary.create_file_writer(tempfile.mkdtemp()), step=501)
    """
    try:
        from tensorflow.python.ops.summary_ops_v2 import import_event
    except ImportError:  # a TensorFlow without it: the Python reader shows the retrained steps twice
        return
    event = tf.compat.v1.Event(wall_time=time.time(), step=step,
                               session_log=tf.compat.v1.SessionLog(status=tf.compat.v1.SessionLog.START))
    with writer.as_default():
        import_event(tf.constant(event.SerializeToString()))
    writer.flush()


class PretrainingTensorBoard(keras.callbacks.Callback):
    """Writes the run's TensorBoard data under `logs_dir/{train,validation}`."""

    def __init__(self, logs_dir, model, tokenizer, probe, *, config, start_step, log_every,
                 global_batch_size, sequence_length, hparams, profile_steps=None, chief=None):
        super().__init__()
        chief = is_chief() if chief is None else chief
        self.logs_dir = logs_dir if chief else os.path.join(logs_dir, "non_chief_workers")
        self.tokenizer = tokenizer
        self.probe = probe
        self.log_every = log_every
        self.global_batch_size = global_batch_size
        self.sequence_length = sequence_length
        self.hparams = hparams
        self.profile = _parse_profile_steps(profile_steps)
        self.start_step = start_step
        self.epoch = 0
        self.steps_per_epoch = None
        self._train_writer = tf.summary.create_file_writer(os.path.join(self.logs_dir, "train"))
        self._validation_writer = tf.summary.create_file_writer(os.path.join(self.logs_dir, "validation"))
        self._last_time = None
        self._last_step = start_step
        self._profiling = False
        self._profiled = False

    def on_train_begin(self, logs=None):
        from tensorboard.plugins.hparams import api as hp

        self.steps_per_epoch = self.params.get("steps")
        for writer in (self._train_writer, self._validation_writer):
            mark_session_start(writer, self.start_step + 1)
        with self._train_writer.as_default():
            hp.hparams(self.hparams, trial_id=os.path.basename(os.path.dirname(self.logs_dir)) or "run")
        self._train_writer.flush()
        self._last_time = time.time()

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def _step(self, batch):
        return self.epoch * self.steps_per_epoch + batch + 1

    def on_train_batch_begin(self, batch, logs=None):
        # With several steps a host call, `batch` advances by --steps_per_execution: the trace starts with the
        # first call at or after START (once), not only at exactly START.
        if (self.profile and self.profile[0] <= self._step(batch) < self.profile[1] and not self._profiling
                and not self._profiled):
            tf.profiler.experimental.start(os.path.join(self.logs_dir, "profile"))
            self._profiling = self._profiled = True

    def on_train_batch_end(self, batch, logs=None):
        step = self._step(batch)
        if self._profiling and step >= self.profile[1]:
            tf.profiler.experimental.stop()
            self._profiling = False
        if step % self.log_every and step != self.start_step + 1:
            return
        now = time.time()
        steps = step - self._last_step
        scalars = {k: float(v) for k, v in (logs or {}).items()}
        scalars["learning_rate"] = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        scalars["gradient_norm"] = self._gradient_norm()
        if steps > 0 and now > self._last_time:
            sequences = steps * self.global_batch_size / (now - self._last_time)
            scalars["sequences_per_second"] = sequences
            scalars["tokens_per_second"] = sequences * self.sequence_length
        with self._train_writer.as_default(step=step):
            for name, value in scalars.items():
                tf.summary.scalar(name, value)
        self._train_writer.flush()
        self._last_time, self._last_step = time.time(), step

    def on_epoch_end(self, epoch, logs=None):
        step = (epoch + 1) * self.steps_per_epoch
        with self._validation_writer.as_default(step=step):
            for name, value in (logs or {}).items():
                if name.startswith("val_"):
                    tf.summary.scalar(name[4:], float(value))
        self._validation_writer.flush()
        with self._train_writer.as_default(step=step):
            tf.summary.text("masked_word_guesses", top_k_report(self.model, self.tokenizer, self.probe))
        self._train_writer.flush()
        self._last_time = time.time()

    def on_train_end(self, logs=None):
        if self._profiling:
            tf.profiler.experimental.stop()
        self._train_writer.flush()
        self._validation_writer.flush()

    def _gradient_norm(self):
        return probe_gradient_norm(self.model, self.probe)


def probe_gradient_norm(model, probe):
    """Global norm of the MLM loss gradient on a fixed batch (no dropout), on any Keras backend.

    A training-health scalar for TensorBoard: it is measured on the same
    held-out probe batch every time, so its trend is not batch noise.

    Args:
        model: a `BertPretrainer`.
        probe: dict of NumPy arrays `token_ids, segment_ids, padding_mask,
            mask_positions, mask_ids, mask_weights` (one batch).

    Returns:
        float, the L2 norm over all trainable weights' gradients.

    Example:
    >>> probe_gradient_norm(pretrainer, probe_batch)  # doctest: +SKIP
    1.73
    """
    x = {n: probe[n] for n in ("token_ids", "segment_ids", "padding_mask", "mask_positions")}
    weights = np.asarray(probe["mask_weights"], "float32")
    labels = np.asarray(probe["mask_ids"])
    variables = model.trainable_variables
    backend = keras.backend.backend()

    def mlm_loss(logits):
        ce = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        return keras.ops.sum(keras.ops.multiply(ce, keras.ops.convert_to_tensor(weights))) / max(float(weights.sum()), 1.0)

    def norm(grads):
        return float(np.sqrt(sum(float((np.asarray(g, "float64") ** 2).sum()) for g in grads if g is not None)))

    if backend == "tensorflow":
        with tf.GradientTape() as tape:
            loss = mlm_loss(model(x, training=False)["mlm"])
        return norm([tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, variables) if g is not None])
    if backend == "jax":
        import jax

        trainable = [v.value for v in variables]
        non_trainable = [v.value for v in model.non_trainable_variables]

        def loss_fn(values):
            out, _ = model.stateless_call(values, non_trainable, x, training=False)
            return mlm_loss(out["mlm"])

        return norm(jax.grad(loss_fn)(trainable))
    if backend == "torch":
        import torch

        parameters = [v.value for v in variables]
        with torch.enable_grad():
            loss = mlm_loss(model(x, training=False)["mlm"])
            grads = torch.autograd.grad(loss, parameters, allow_unused=True)
        return norm([g.detach().cpu().numpy() for g in grads if g is not None])
    return float("nan")


def _parse_profile_steps(value):
    if not value:
        return None
    try:
        start, end = (int(v) for v in str(value).split(","))
    except ValueError:
        raise ValueError(f"--profile_steps {value!r}: expected 'START,END', e.g. '20,25'.") from None
    if not 0 < start <= end:
        raise ValueError(f"--profile_steps {value!r}: expected 0 < START <= END.")
    return start, end
