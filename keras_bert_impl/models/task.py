"""Task: the shared base of BertClassifier, BertTokenClassifier, BertSpanExtractor, BertTextEmbedder and BertPretrainer.

`Task` holds what every task model shares: the backbone and preprocessor, `compile` with the task's defaults,
`fit` / `evaluate` / `predict` on raw text, quantization, and `get_config` / `from_config`. Two bases hold the
rest: `raw_text_inputs.RawTextInputs` (how raw text, tables and feature dicts are read and checked) and
`task_saving.TaskSaving` (`save`, `export`, `save_to_preset`, `save_huggingface`, `from_preset`).
"""

import keras

from keras_bert_impl.models.failed_calls import run_recoverably
from keras_bert_impl.models.interrupts import noting_interrupts, with_interrupt_check
from keras_bert_impl.models.functional_model import FunctionalModel
from keras_bert_impl.models.head_building import BACKBONE_INPUTS
from keras_bert_impl.models.lora import LORA_LEARNING_RATE, lora_rank
from keras_bert_impl.models import quantization
from keras_bert_impl.models.loss_tracker import LossTracker
from keras_bert_impl.models.raw_text_inputs import HUGGING_FACE_FEATURE_NAMES, RawTextInputs
from keras_bert_impl.models.task_saving import PREPROCESSOR_ARGUMENTS, TaskSaving
from keras_bert_impl.models.unknown_arguments import check_arguments, check_method_arguments
from keras_bert_impl.models.user_inputs import (
    as_plain_dict, batch_shards, check_batch_shards, filled_for_every_device, is_dataset, is_torch_data_loader,
    lists_as_arrays, looks_like_text, progress_verbosity,
)
from keras_bert_impl.optimizers import GlobalClipAdamW
from keras_bert_impl.presets import PresetsAttribute


def prediction_rows(count, batch_size=None):
    """Rows of a batch of raw-text predictions: `batch_size` (default 32), or fewer for fewer examples, the next power
    of two up from `count`, so that one text is one row, not 31 filler rows beside it (a compiled step still sees
    at most six batch shapes: 1, 2, 4, 8, 16, 32).

    >>> prediction_rows(1), prediction_rows(3), prediction_rows(100), prediction_rows(5, batch_size=4)
    (1, 4, 32, 4)
    """
    batch_size = 32 if batch_size is None else batch_size
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1 or count < 1:
        return batch_size  # (the preprocessor's checks say what is wrong)
    rows = min(batch_size, 1 << (count - 1).bit_length())
    shards = batch_shards()  # (a DataParallel distribution gives each device a part of every batch: equal ones)
    return -(-rows // shards) * shards


class Task(RawTextInputs, TaskSaving, FunctionalModel):
    """A `BertBackbone` with a task head and a `preprocessor`, keras-hub style.

    Subclasses build their head and functional graph in `__init__`, call
    `super().__init__(inputs=..., outputs=..., backbone=..., preprocessor=...)`
    and define `head_config()` (their own constructor arguments),
    `default_loss()` and `default_metrics()`. This base then gives every task:

    - `from_preset(preset, ...)`: the backbone's weights from anything
      `BertBackbone.from_preset` reads (a preset name, a Hugging Face, Google,
      keras-hub, own or pretraining-export directory) and the matching
      preprocessor (vocabulary and casing from the same preset); the head is
      new, unless `preset` is a directory written by `save_to_preset` of the
      same task, or a `transformers` checkpoint fine-tuned for it, whose head
      weights are then loaded too (`heads_loaded` names a transformers head
      that loaded).
    - `fit`, `evaluate` and `predict` on raw strings: the preprocessor turns
      them into length-bucketed batches (a `tf.data.Dataset`, which Keras
      feeds to the TensorFlow, JAX and PyTorch backends alike). Feature dicts
      and datasets of features pass through unchanged.
    - `compile()` with the task's defaults (the task loss and metrics, and
      Hugging Face `Trainer`'s AdamW step at 5e-5: `default_optimizer`); an
      uncompiled task compiles with them on its first `fit` or `evaluate`.
    - `save(path)` for inference: the `.keras` file holds the model and its
      preprocessor (vocabulary inside) but no optimizer state
      (`include_optimizer=True` keeps it); `keras.saving.load_model` reads it
      back silently, after `import keras_bert_impl`.
    - `get_config` / `from_config`, `save_to_preset(dir)`, and
      `save_huggingface(dir)`: the task as `transformers` names it.

    The preprocessors run TensorFlow string ops (as keras-hub's do); without a
    preprocessor, a task needs no TensorFlow and takes feature dicts only.
    """

    presets = PresetsAttribute()  # the names `from_preset` takes (keras-hub's `Class.presets`)
    # The heads `from_preset` read from the checkpoint (set there).
    heads_loaded = ()
    # Head arguments that change the head's layers or their meaning: `from_preset` does not load a preset's saved
    # head when one of them differs.
    head_shape_arguments = ("num_classes", "label_names")
    # A transformers checkpoint fine-tuned for this task: the architectures that name it in its config.json, and the
    # prefix of its head's tensors; `from_preset` then reads the trained head (and its labels, where the task has them).
    hugging_face_architectures = ()
    hugging_face_head_prefix = None
    # What `fit` / `evaluate` on raw text take as `y` (the noun, and the call's arguments), for the one line that says
    # it is missing; None: the task learns from the text alone (masked LM).
    raw_labels = ("labels", "texts, labels")
    # The table columns `x` may be, by example names (said when a table of other columns is given).
    raw_text_columns = (("text",),)
    # The SavedModel endpoints `export` writes that take raw text: endpoint -> its `[batch]` string inputs (the first
    # is also `serving_default`). Empty: the SavedModel takes packed features only.
    serving_text_inputs = {}
    # None: the text endpoints pack the preprocessor's features and return `serving_outputs`; else the name of the
    # graph that runs the task's whole text pipeline ("entities": the tagger's `predict_entities`, in
    # `text/token_classifier_serving.py`; "answer": the span extractor's `answer`, windows included, in
    # `text/span_extractor_serving.py`).
    serving_text_graph = None
    # True: the default loss averages over the sum of the sample weights (`reduction="mean_with_sample_weight"`), so
    # the weight-0 filler rows of raw text's fixed-size batches count for nothing; `loss_weight` then weighs a batch
    # by that sum.
    default_loss_averages_sample_weights = False

    hugging_face_attributes = {
        "config": "get_config() (the settings it was built with), or backbone.get_config() (the encoder's)",
        "bert": "backbone (the encoder)",
        "save_pretrained": "save_huggingface(directory) (a transformers directory), or save_to_preset(directory)",
        "push_to_hub": "save_huggingface(directory), then huggingface_hub.upload_folder(folder_path=directory, "
                       "repo_id=...)",
    }

    def hugging_face_head_dense(self):
        """The `Dense` layer that holds a transformers checkpoint's task head (`hugging_face_head_prefix`)."""
        return None

    @classmethod
    def head_arguments_from_checkpoint(cls, head, kwargs):
        """`kwargs` with what a fine-tuned transformers checkpoint's `head` (`read_task_head_config`) says about the
        head where the caller did not (classes, label names)."""
        return kwargs

    def takes_checkpoint_head(self, head):
        """Whether a fine-tuned transformers checkpoint's `head` fits this model (the same classes)."""
        return True

    @classmethod
    def check_arguments(cls, kwargs):
        """One line for a keyword this task does not take (Hugging Face's names point to ours). Subclasses call it
        first, before their own checks, so `num_labels=2` is named as such rather than as a missing `num_classes`."""
        check_arguments(cls, kwargs, also_known=PREPROCESSOR_ARGUMENTS,
                        note="`from_preset` also takes its preprocessor's arguments (e.g. `sequence_length`).")

    def __init__(self, *args, backbone, preprocessor=None, compile_defaults=True, **kwargs):
        self.check_arguments(kwargs)
        expected = type(self).preprocessor_class() if preprocessor is not None else None
        if expected is not None and not isinstance(preprocessor, expected):
            raise ValueError(f"{type(self).__name__} reads its text with a {expected.__name__}, got a "
                             f"{type(preprocessor).__name__}: build it with {expected.__name__}.from_preset(...), or "
                             f"let {type(self).__name__}.from_preset make it.")
        super().__init__(*args, **kwargs)
        # Set after Model.__init__, so the torch backend can track them.
        self.backbone = backbone
        self.preprocessor = preprocessor
        self._check_sequence_length()
        self.compile_defaults = compile_defaults
        if compile_defaults:
            self.compile()

    # === Hooks for subclasses ===

    def head_config(self):
        """The subclass's own constructor arguments (JSON-serialisable)."""
        return {}

    def default_loss(self):
        raise NotImplementedError

    def default_metrics(self):
        return None

    def default_weighted_metrics(self):
        return None

    @classmethod
    def preprocessor_class(cls):
        """The preprocessor layer class that `from_preset` builds (imported lazily: it needs TensorFlow)."""
        return None

    def serving_outputs(self, outputs):
        """The model's outputs (backend tensors) as the named outputs of an exported SavedModel (`export`)."""
        return dict(outputs) if isinstance(outputs, dict) else {"outputs": outputs}

    # === Compile ===

    def compile(self, optimizer="auto", loss="auto", metrics="auto", weighted_metrics="auto", **kwargs):
        """`keras.Model.compile` with the task's defaults for every `"auto"` argument.

        The `"auto"` optimizer is `default_optimizer()`: Hugging Face `Trainer`'s
        AdamW step at 5e-5, or at 5e-4 when the backbone trains LoRA factors
        (`backbone.enable_lora`; Hu et al.'s GLUE rate); `fit` picks it again if
        LoRA was enabled after `compile`.
        """
        check_method_arguments(self, "compile", kwargs, keras.Model.compile)  # (learning_rate=: where it goes)
        arguments = dict(optimizer=optimizer, loss=loss, metrics=metrics, weighted_metrics=weighted_metrics, **kwargs)
        library = type(optimizer).__module__.split(".")[0]
        if library in ("torch", "optax"):  # (Keras: "Could not interpret optimizer identifier", and its repr)
            raise ValueError(
                f"compile(optimizer=...) takes a Keras optimizer, and got {library}'s {type(optimizer).__name__}: "
                "pass keras.optimizers.AdamW(learning_rate=...) (or leave the task's default), or train in your own "
                "loop, calling the model with training=True for dropout.")
        if optimizer == "auto":
            optimizer = self.default_optimizer()
        if loss == "auto":
            loss = self.default_loss()
        if weighted_metrics == "auto":
            # The task's weighted accuracy joins its default metrics only: metrics=["accuracy"] is one accuracy.
            weighted_metrics = self.default_weighted_metrics() if metrics == "auto" else None
        if metrics == "auto":
            metrics = self.default_metrics()
        self.check_loss(loss)
        metrics, weighted_metrics = (self._metrics_by_name(m) for m in (metrics, weighted_metrics))
        for given in (metrics, weighted_metrics):
            self.check_metrics(given)
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, weighted_metrics=weighted_metrics, **kwargs)
        # Recorded once compiled: a compile refused above leaves the model as its last compile made it. Untracked:
        # Keras would add the metric objects given here to the model's own metrics, a second time after the
        # compiled ones (`evaluate` gave their values twice in its list, and `metrics_names` their names twice).
        with keras.src.utils.tracking.DotNotTrackScope():
            self._compile_arguments = arguments
        self._compiled_with_lora = lora_rank(self.backbone) is not None
        if self.compiled_with_default_loss:
            # The reported loss weighs each batch by what the default loss averaged it over (`loss_weight`).
            with keras.src.utils.tracking.DotNotTrackScope():  # as Keras's own tracker: not one of `self._metrics`
                self._loss_tracker = LossTracker()

    def check_loss(self, loss):
        """Refuses, in one line, a loss of the user's that cannot read this model's outputs or labels (a
        cross-entropy on probabilities where the model gives logits, ...); tasks say what they check."""

    def check_metrics(self, metrics):
        """Refuses, in one line, a metric given to `compile` (a name left to Keras, or a metric object) that cannot
        read this model's outputs or labels; tasks say what they check."""

    def metric_for_name(self, name):
        """The metric that a metric's name given to `compile` (e.g. `"accuracy"`) means on this task's outputs, or
        None for Keras's own reading of the name."""
        return None

    def _metrics_by_name(self, metrics):
        if not isinstance(metrics, (list, tuple)):
            return metrics
        return [self.metric_for_name(m) or m if isinstance(m, str) else m for m in metrics]

    @property
    def compiled_with_default_loss(self):
        """Whether the last `compile` took `loss="auto"`, the task's `default_loss()` (then the reported `loss`
        is the mean over the real rows, `LossTracker`)."""
        return getattr(self, "_compile_arguments", {}).get("loss") == "auto"

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """`keras.Model.compute_loss`; with the default loss, also adds the batch to the reported `loss`."""
        loss = super().compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training)
        if isinstance(self._loss_tracker, LossTracker):
            # Loss objects scale the loss by 1 / replicas under a TensorFlow strategy; the tracker's mean is per
            # example, as Keras's own tracker does.
            self._loss_tracker.add_batch(keras.src.losses.loss.unscale_loss_for_distribution(loss),
                                         self.loss_weight(x, y, sample_weight))
        return loss

    def loss_weight(self, x, y, sample_weight):
        """What the default loss averages one batch over: the sum of the sample weights when it averages over them
        (`default_loss_averages_sample_weights`, and weights given), else its number of rows (as Keras counts);
        other tasks say what counts (the labelled windows or tokens)."""
        if self.default_loss_averages_sample_weights and sample_weight is not None:
            return keras.ops.sum(keras.ops.cast(sample_weight, "float32"))
        return keras.ops.shape(next(t for t in keras.tree.flatten(x) if t is not None))[0]

    def default_optimizer(self):
        """The `"auto"` optimizer: the step Hugging Face's `Trainer` takes with its default arguments.

        `torch.optim.AdamW` with epsilon 1e-8 added after the bias correction (`keras_bert_impl.optimizers.AdamW`;
        Keras adds it before, which shrinks the first steps), no weight decay, and the gradient clipped to a global
        norm of 1 (`max_grad_norm`; after the all-reduce on several devices, `GlobalClipAdamW`). The rate is 5e-5
        (5e-4 when the backbone trains LoRA factors) and stays constant, as keras-hub's; the `Trainer` also decays
        it linearly to 0 by the last step, which needs the number of steps: pass
        `compile(optimizer=keras_bert_impl.training.create_optimizer(...))` for that schedule.
        (`tests/test_training_optimizer.py` steps this optimizer beside `torch.optim.AdamW` + `clip_grad_norm_`.)
        """
        return GlobalClipAdamW(learning_rate=LORA_LEARNING_RATE if lora_rank(self.backbone) is not None else 5e-5,
                               weight_decay=0.0, epsilon=1e-8, global_clipnorm=1.0)

    def compile_from_config(self, config):
        """Re-compiles a model loaded from `save(path, include_optimizer=True)` and builds its optimizer, so the
        saved optimizer state loads (Keras skips this for models whose `compile` is overridden, as here)."""
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def _compile_if_needed(self):
        """Compiles with the defaults if not compiled, and keeps the optimizer and the compiled step in line with
        the trainable weights, which may have changed since (`backbone.trainable = False`, a layer unfrozen,
        `backbone.enable_lora`): Keras would go on training frozen layers (TensorFlow's traced step keeps the old
        list), or stop inside the step (JAX, or "Unknown variable").

        - The `"auto"` optimizer is chosen again (`compile` with the same arguments): for a changed set of
          trainable weights, or when LoRA was enabled after `compile`, before the first step.
        - Another optimizer goes on with fewer weights than it was built for (a layer frozen) on TensorFlow and
          PyTorch, whose step is traced again; otherwise (JAX, or new weights) it is one line: compile again.
        """
        if not self.compiled:
            self.compile()
            return
        arguments = getattr(self, "_compile_arguments", None)
        auto = arguments is not None and arguments["optimizer"] == "auto"
        lora_changed = auto and self._compiled_with_lora != (lora_rank(self.backbone) is not None)
        change = self._trainable_change()
        if auto and (change or (lora_changed and int(keras.ops.convert_to_numpy(self.optimizer.iterations)) == 0)):
            self.compile(**arguments)
        elif change == "fewer" and keras.backend.backend() != "jax":
            pass  # the step is traced again (`_retrace_if_trainable_changed`)
        elif change:
            what = "layers frozen" if change == "fewer" else "layers unfrozen or LoRA enabled"
            raise ValueError(
                f"This {type(self).__name__}'s trainable weights changed since its optimizer was built ({what}): "
                "call compile(optimizer=...) with a new optimizer before fit."
            )

    def _retrace_if_trainable_changed(self):
        """Drops the step function traced for other trainable weights than the model's now (TensorFlow keeps the
        list it was traced with, and would go on training a frozen layer, or not train an unfrozen one)."""
        trainable = tuple(id(variable) for variable in self.trainable_variables)
        if getattr(self, "_step_traced_for", trainable) != trainable:
            self.train_function = None
        self._step_traced_for = trainable

    def _trainable_change(self):
        """How the trainable weights differ from those the built optimizer knows: None (the same, or no optimizer
        built yet), "fewer" (some frozen since) or "other" (new ones)."""
        optimizer = getattr(self, "optimizer", None)
        known = getattr(optimizer, "_trainable_variables_indices", None)
        if not getattr(optimizer, "built", False) or known is None:
            return None
        keys = {optimizer._var_key(variable) for variable in self.trainable_variables}
        if not keys <= set(known):
            return "other"
        return "fewer" if len(keys) < len(known) else None

    # === Raw strings ===

    def __call__(self, *args, **kwargs):
        """The model on packed features (`keras.Model.__call__`); raw strings are one line pointing to `predict`
        (Keras would say the model "expects 3 input(s) but it received N input tensors", N the number of strings)."""
        if args and looks_like_text(args[0]):
            raise ValueError(
                f"{type(self).__name__} is called on packed features {{{', '.join(BACKBONE_INPUTS)}}}, not raw text: "
                f"use {type(self).__name__}.predict(texts), or call it on model.preprocessor(texts)."
            )
        if args:  # (transformers' BatchEncoding is a Mapping, not a dict)
            args = (as_plain_dict(args[0]),) + args[1:]
        renamed = [f"{theirs} is {ours}" for theirs, ours in HUGGING_FACE_FEATURE_NAMES.items()
                   if args and isinstance(args[0], dict) and theirs in args[0] and ours not in args[0]]
        if renamed:  # (Keras: "Missing data for input "padding_mask". You passed a data dictionary with keys ...")
            raise ValueError(f"{type(self).__name__} is called on the features {{{', '.join(BACKBONE_INPUTS)}}}; the "
                             f"dict given has {sorted(args[0])} (Hugging Face's {', '.join(renamed)}).")
        return super().__call__(*args, **kwargs)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, validation_data=None, sample_weight=None,
            shuffle=True, seed=None, validation_split=0.0, class_weight=None, **kwargs):
        """`keras.Model.fit`; `x` may also be raw strings (then `y` are the labels), or a dataset of strings.

        Raw strings are tokenized once and batched by length bucket (see the
        preprocessor's `make_dataset`), reshuffled every epoch (`seed` fixes
        the order). `validation_data` may be `(texts, labels)`; with raw
        strings, `validation_split` keeps the last fraction of the examples
        for validation (as Keras does with arrays), and `class_weight`
        (classifiers: `{class id or label name: weight}`) weighs the training
        examples.
        """
        check_method_arguments(self, "fit", kwargs, keras.Model.fit)
        kwargs["verbose"] = progress_verbosity(kwargs.get("verbose", "auto"))
        self._compile_if_needed()
        self._retrace_if_trainable_changed()
        self._check_monitors(kwargs.get("callbacks"))
        check_batch_shards(batch_size, f"{type(self).__name__}.fit")
        x, y, sample_weight = self._read_tables(x, y, sample_weight)
        x = self._refuse_raw_text_batches(x, "fit")
        if isinstance(validation_data, tuple):
            validation_data = self._read_tables(*validation_data)[:len(validation_data)]
        self._check_raw_labels(x, y, "fit")
        self._check_feature_inputs(x, "fit")
        if not self._is_raw(x) and y is not None and not is_dataset(x):
            self._check_feature_labels(y, "fit")
        x, y, sample_weight = lists_as_arrays(x, y, sample_weight)
        if isinstance(validation_data, tuple) and isinstance(validation_data[0], dict):
            validation_data = lists_as_arrays(*validation_data)[:len(validation_data)]
        if self._is_raw(x) and not is_dataset(x):
            self._check_one_process()
            if validation_split and validation_data is None:
                x, y, sample_weight, validation_data = self._split_off_validation(x, y, sample_weight, validation_split)
            validation_split = 0.0
            if class_weight is not None:
                sample_weight = self._class_weight_as_sample_weight(y, class_weight, sample_weight)
                class_weight = None
        validation_data = self._raw_validation(validation_data, batch_size)
        if self._is_raw(x):
            x = self._raw_dataset(x, y, sample_weight, batch_size=batch_size, shuffle=shuffle, seed=seed)
            y = sample_weight = batch_size = None
        if is_dataset(x) or is_torch_data_loader(x):
            shuffle = False  # a dataset (a DataLoader) shuffles itself; Keras would only warn
        return _label_errors_as_one_line(lambda: self._keras_call(
            super(Task, self).fit, "train_function", x=x, y=y, batch_size=batch_size, epochs=epochs,
            validation_data=validation_data, sample_weight=sample_weight, shuffle=shuffle,
            validation_split=validation_split, class_weight=class_weight, **kwargs))

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None, return_dict=False):
        """`keras.Model.train_on_batch`; `x` may also be raw strings (`y` the labels), one batch of them."""
        self._compile_if_needed()
        x, y, sample_weight = self._raw_batch(x, y, sample_weight, "train_on_batch")
        if batch_shards() > 1 and y is not None and sample_weight is not None:  # (a row a device, weighing 0)
            x, y, sample_weight = filled_for_every_device((x, y, sample_weight))[1]
        return super().train_on_batch(x, y, sample_weight=sample_weight, class_weight=class_weight,
                                      return_dict=return_dict)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """`keras.Model.test_on_batch`; `x` may also be raw strings (`y` the labels), one batch of them."""
        self._compile_if_needed()
        x, y, sample_weight = self._raw_batch(x, y, sample_weight, "test_on_batch")
        if batch_shards() > 1 and y is not None and sample_weight is not None:  # (a row a device, weighing 0)
            x, y, sample_weight = filled_for_every_device((x, y, sample_weight))[1]
        return super().test_on_batch(x, y, sample_weight=sample_weight, return_dict=return_dict)

    def predict_on_batch(self, x):
        """`keras.Model.predict_on_batch`; `x` may also be raw strings, one batch of them (a span extractor's: one
        row per window)."""
        rows, features = filled_for_every_device(self._raw_batch(x)[0])
        outputs = super().predict_on_batch(features)
        return outputs if batch_shards() == 1 else keras.tree.map_structure(lambda a: a[:rows], outputs)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        """`keras.Model.evaluate`; `x` may also be raw strings (`y` the labels)."""
        check_method_arguments(self, "evaluate", kwargs, keras.Model.evaluate)
        kwargs["verbose"] = progress_verbosity(kwargs.get("verbose", "auto"))
        self._compile_if_needed()
        check_batch_shards(batch_size, f"{type(self).__name__}.evaluate")
        x, y, sample_weight = self._read_tables(x, y, sample_weight)
        x = self._refuse_raw_text_batches(x, "evaluate")
        self._check_raw_labels(x, y, "evaluate")
        self._check_feature_inputs(x, "evaluate")
        if not self._is_raw(x) and y is not None and not is_dataset(x):
            self._check_feature_labels(y, "evaluate")
        x, y, sample_weight = lists_as_arrays(x, y, sample_weight)
        if self._is_raw(x):
            x = self._raw_dataset(x, y, sample_weight, batch_size=batch_size)
            y = sample_weight = batch_size = None
        return _label_errors_as_one_line(lambda: self._keras_call(
            super(Task, self).evaluate, "test_function", x=x, y=y, batch_size=batch_size,
            sample_weight=sample_weight, **kwargs))

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """`keras.Model.predict`; `x` may also be raw strings (one output row per example, in order)."""
        verbose = progress_verbosity(verbose)
        if x is None:  # (Keras's own error is "KeyError: 'pop from an empty set'")
            raise ValueError(f"{type(self).__name__}.predict: `x` is None; give the examples (raw strings in any form "
                             "`fit` takes, or the preprocessed features).")
        check_batch_shards(batch_size, f"{type(self).__name__}.predict")
        x = self._refuse_raw_text_batches(self._read_tables(x)[0], "predict")
        self._check_feature_inputs(x, "predict")
        x = lists_as_arrays(x)[0]
        if self._is_raw(x) and not is_dataset(x):
            self._check_preprocessor()
            count = self._count_examples(x)
            dataset = self._raw_dataset(x, batch_size=prediction_rows(count, batch_size), predicting=True)
            outputs = self._keras_call(super(Task, self).predict, "predict_function", x=dataset, verbose=verbose,
                                       steps=steps, callbacks=callbacks)
            # Fixed-size batches end with filler rows: keep the real ones.
            return keras.tree.map_structure(lambda a: a[:count], outputs)
        if self._is_raw(x):
            x = self._raw_dataset(x, batch_size=batch_size)
            batch_size = None
        if batch_shards() == 1 or not isinstance(x, dict):
            return self._keras_call(super(Task, self).predict, "predict_function", x=x, batch_size=batch_size,
                                    verbose=verbose, steps=steps, callbacks=callbacks)
        # A batch of fewer rows than devices (one text, or the last batch) cannot be split: filled, then dropped.
        rows, x = filled_for_every_device(x, 32 if batch_size is None else batch_size)
        outputs = self._keras_call(super(Task, self).predict, "predict_function", x=x, batch_size=batch_size,
                                   verbose=verbose, steps=steps, callbacks=callbacks)
        return keras.tree.map_structure(lambda a: a[:rows], outputs)

    def _keras_call(self, method, function_name, **arguments):
        """Runs Keras's `fit`, `evaluate` or `predict` (`method`, on `arguments`): undone if it fails
        (`failed_calls.run_recoverably`), and stopped by the next batch after Ctrl-C (`interrupts.noting_interrupts`,
        with a `StopAtNotedInterrupt` among the call's callbacks: Keras drops a Ctrl-C that comes while JAX computes
        a step)."""
        with noting_interrupts() as noting:
            arguments["callbacks"] = with_interrupt_check(arguments.get("callbacks"), noting)
            return run_recoverably(self, function_name, lambda: method(**arguments))

    # === Quantization (models/quantization.py) ===

    def quantize(self, mode=None, *args, **kwargs):
        """Keras's `Model.quantize` on the whole task (`"int8"`, `"int4"`, `"float8"`): backbone and head, without a
        warning per layer that has nothing to quantize. `save`, `save_to_preset` and `export` keep the quantized
        layers (they load quantized); `fit` after it trains what stays float (biases, LayerNorms, LoRA factors).

        Example:
        >>> classifier.quantize("int8")  # doctest: +SKIP
        >>> classifier.predict_labels(["a great film"])  # doctest: +SKIP
        """
        return quantization.quantize_quietly(super().quantize, mode, *args, **kwargs)

    def quantized_head_layers(self):
        """`{layer path: quantization}` of the task's own quantized layers (the backbone's config records its own)."""
        return quantization.quantized_layers(self, exclude=self.backbone._flatten_layers())

    def _check_float_weights(self, what):
        quantized = quantization.quantized_layers(self)
        if quantized:
            path, name = next(iter(quantized.items()))
            raise ValueError(f"{what} holds float weights, and this {type(self).__name__} has {len(quantized)} "
                             f"quantized layers ({path!r}: {name}, ...): write it before `quantize`.")

    # === Serialisation ===

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "preprocessor": (
                None if self.preprocessor is None else keras.saving.serialize_keras_object(self.preprocessor)
            ),
            "compile_defaults": self.compile_defaults,
            **self.head_config(),
            **({"quantized_layers": quantized} if (quantized := self.quantized_head_layers()) else {}),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("backbone", "preprocessor"):
            if isinstance(config.get(key), dict):
                config[key] = keras.saving.deserialize_keras_object(config[key])
        quantized = config.pop("quantized_layers", None)
        model = cls(**config)
        quantization.quantize_layers(model, quantized)
        return model


def _label_errors_as_one_line(call):
    """Runs `call()`; a label check that failed inside a `tf.data.Dataset`'s read (`text.dataset_labels`) becomes
    its one line (a `ValueError`), not the runtime's error with the pipeline's trace."""
    try:
        return call()
    except Exception as error:
        if type(error).__module__.startswith("tensorflow"):  # (the read of a dataset: TensorFlow is here)
            from keras_bert_impl.text.dataset_labels import labels_error_as_one_line

            line = labels_error_as_one_line(error)
            if line:
                raise ValueError(line) from None
        raise


# transformers' names of a labelled head's attributes (the classifier's and the tagger's).
LABEL_ATTRIBUTES = {
    "num_labels": "num_classes",
    "id2label": "label_names (the names in id order; transformers' dict: dict(enumerate(model.label_names)))",
    "label2id": "label_names (the names in id order; transformers' dict: {name: i for i, name in "
                "enumerate(model.label_names)})",
}

