"""Task: the shared base of BertClassifier, BertTokenClassifier, BertSpanExtractor, BertTextEmbedder and BertPretrainer."""

import inspect
import json
import os
import types
import warnings

import keras

from keras_bert_impl.checkpoints.own_preset import TASK_CONFIG_FILE, TASK_WEIGHTS_FILE
from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.failed_calls import run_recoverably
from keras_bert_impl.models.functional_model import FunctionalModel
from keras_bert_impl.models.head_building import BACKBONE_INPUTS
from keras_bert_impl.models.lora import LORA_LEARNING_RATE, lora_rank
from keras_bert_impl.models import quantization
from keras_bert_impl.models.loss_tracker import LossTracker
from keras_bert_impl.table_columns import table_as_labels, table_as_texts
from keras_bert_impl.models.unknown_arguments import check_arguments, check_method_arguments
from keras_bert_impl.models.user_inputs import (
    chained, is_dataset, joined_processes, lists_as_arrays, looks_like_text, numpy_text_as_lists, progress_verbosity,
)
from keras_bert_impl.optimizers import GlobalClipAdamW
from keras_bert_impl.presets import PresetsAttribute

# Hugging Face tokenizers' names for the features (named in the one line that says a feature is missing).
HUGGING_FACE_FEATURE_NAMES = {"input_ids": "token_ids", "token_type_ids": "segment_ids",
                              "attention_mask": "padding_mask"}


class Task(FunctionalModel):
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
        arguments = dict(optimizer=optimizer, loss=loss, metrics=metrics, weighted_metrics=weighted_metrics, **kwargs)
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
        """What the default loss averages one batch over: its number of rows here (as Keras counts); tasks whose
        batches hold filler rows say what counts (the sum of the weights, the labelled windows or tokens)."""
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
        return super().__call__(*args, **kwargs)

    def _is_raw(self, x):
        if isinstance(x, dict) or x is None:
            return False
        if self.preprocessor is not None:
            # A Python list or tuple is never a model input here (those are dicts): the preprocessor reads it, and
            # names the item that is not text, or says that it is empty.
            return self.preprocessor.is_raw_text(x) or isinstance(x, (list, tuple))
        return looks_like_text(x)

    def _check_preprocessor(self):
        if self.preprocessor is None:
            raise ValueError(
                f"This {type(self).__name__} has no `preprocessor`, so it cannot read raw strings: build it with "
                f"{type(self).__name__}.from_preset(...) or pass preprocessor=..., or give the "
                "token_ids/segment_ids/padding_mask dict."
            )
        self._check_sequence_length()  # the preprocessor's length may have been set since

    def _check_sequence_length(self):
        """Refuses, in one line, a preprocessor that packs rows longer than the backbone's position table."""
        length = getattr(self.preprocessor, "sequence_length", None)
        positions = getattr(self.backbone, "max_sequence_length", None)
        if length is not None and positions is not None and length > positions:
            raise ValueError(
                f"The preprocessor packs up to sequence_length={length} tokens, but the backbone has "
                f"{positions} positions (max_sequence_length): use sequence_length <= {positions}."
            )

    def _raw_dataset(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False, seed=None, predicting=False):
        """Raw text -> the preprocessor's batches. Filler rows (one step shape per bucket) when `predicting` (their
        outputs are dropped) or when the losses and metrics ignore them (`_takes_filler_rows`)."""
        self._check_preprocessor()
        options = {} if predicting or self._takes_filler_rows() else {"fixed_batch_size": False}
        return self.preprocessor.make_dataset(
            x, y, sample_weight, batch_size=32 if batch_size is None else batch_size, shuffle=shuffle, seed=seed,
            **options
        )

    def _takes_filler_rows(self):
        """Whether batches of raw text may end with weight-0 filler rows (one step shape per length bucket): with
        the default loss and metrics, which count only the real rows. A loss or metric of the user's counts every
        row (a `sum_over_batch_size` loss would be divided by the filler too), so it gets a short last batch."""
        arguments = getattr(self, "_compile_arguments", None)
        if arguments is None:
            return True
        return arguments["loss"] == "auto" and all(
            given in ("auto", None) or (isinstance(given, (list, tuple)) and all(map(self._skips_filler_rows, given)))
            for given in (arguments["metrics"], arguments["weighted_metrics"]))

    def _skips_filler_rows(self, metric):
        """Whether a metric given to `compile` counts nothing of the filler rows' labels (whatever their weight):
        none here; a task whose filler labels its own metrics skip (the tagger's -1) says which."""
        return False

    def _raw_validation(self, validation_data, batch_size):
        if validation_data is None:
            return None
        if isinstance(validation_data, tuple) and 2 <= len(validation_data) <= 3 and self._is_raw(validation_data[0]):
            x, y, *weight = validation_data
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    dataset = self._raw_dataset(x, y, weight[0] if weight else None, batch_size=batch_size)
            except ValueError as error:  # the same checks as the training data's: say which data it is
                raise ValueError(f"`validation_data`: {error}") from None
            for warning in caught:  # (e.g. the count of examples cut to sequence_length)
                warnings.warn(f"`validation_data`: {warning.message}", warning.category, stacklevel=3)
            return dataset
        if is_dataset(validation_data) and self._is_raw(validation_data):  # a tf.data.Dataset of strings
            return self._raw_dataset(validation_data, batch_size=batch_size)
        if isinstance(validation_data, list) and validation_data and all(isinstance(t, str) for t in validation_data):
            raise ValueError("`validation_data` of raw strings is a tuple (texts, labels) or (texts, labels, "
                             "sample_weight); got the texts alone: add their labels.")
        if isinstance(validation_data, dict):  # (Keras's own error prints every string of it)
            raise ValueError(f"`validation_data` is a dict with keys {sorted(map(str, validation_data))}: raw text "
                             "is a tuple (texts, labels) as `fit` takes x and y (a table: (df[text_columns], "
                             "df[label_column])); preprocessed features are a tuple (features, labels).")
        return validation_data

    def _read_tables(self, x, y=None, sample_weight=None):
        """pandas DataFrames and Series, and Hugging Face dataset columns, given as `x`, `y` or `sample_weight` ->
        the lists the preprocessor reads: `x=df[["sentence1", "sentence2"]]` is the pair `(texts_a, texts_b)`."""
        x = table_as_texts(numpy_text_as_lists(x), self.raw_text_columns, type(self).__name__, y=y)
        return x, table_as_labels(y), table_as_labels(sample_weight)

    def _check_raw_labels(self, x, y, method):
        """Refuses raw text without its labels in one line (Keras would stop inside the traced step, in three)."""
        if y is None and self.raw_labels is not None and self._is_raw(x) and not is_dataset(x):
            noun, arguments = self.raw_labels
            raise ValueError(f"`y` is missing: {type(self).__name__}.{method} on raw text needs the {noun}, "
                             f"as in {method}({arguments}).")

    def _check_feature_inputs(self, x, method):
        """Refuses, in one line, model inputs Keras would stop on in several: a feature dict without the model's
        keys (e.g. Hugging Face's `input_ids`), or a numeric array where the features' dict goes."""
        expected = list(getattr(self, "_inputs_struct", None) or ())
        if not expected or x is None or self._is_raw(x) or is_dataset(x):
            return
        takes = (f"{type(self).__name__}.{method} takes raw text or a dict of the features "
                 f"{{{', '.join(expected)}}}")
        if isinstance(x, dict):
            missing = [key for key in expected if key not in x]
            text_columns = [key for key, value in x.items() if looks_like_text(numpy_text_as_lists(value))]
            if missing and text_columns:  # a batch of a Hugging Face dataset (`ds[:100]`), or a dict of columns
                raise ValueError(f"{type(self).__name__}.{method} got a dict of the columns {sorted(x)}, which hold "
                                 f"text: give its text columns, as in x={self._text_columns_of(x, text_columns)}.")
            if missing:
                renamed = [f"{key} is {ours}" for key, ours in HUGGING_FACE_FEATURE_NAMES.items() if key in x]
                hint = f" (Hugging Face's {', '.join(renamed)})" if renamed else ""
                raise ValueError(f"{takes}; the dict given has {sorted(x)}, without {missing}{hint}.")
        elif hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (list, tuple)):
            if "string" in str(x.dtype):
                raise ValueError(f"{takes}; got a string tensor of shape {tuple(x.shape)}: pass the texts as a list "
                                 "of strings (or a tf.data.Dataset of them).")
            raise ValueError(f"{takes}; got an array of shape {tuple(x.shape)}: put it in the dict as "
                             f"{expected[0]}, with its {', '.join(expected[1:])}.")

    def _text_columns_of(self, table, text_columns):
        """How to pass `table`'s text columns, for an error: `(d['question'], d['context'])` where the task's own
        column names are there, else its first text columns in each number the task reads (`d['sentence']`, or
        `d['sentence1'] or (d['sentence1'], d['sentence2'])`)."""
        own = next((names for names in self.raw_text_columns if all(name in table for name in names)), None)
        choices = [own] if own else [text_columns[: len(names)] for names in self.raw_text_columns
                                     if len(names) <= len(text_columns)] or [text_columns[:1]]
        shown = [f"d[{names[0]!r}]" if len(names) == 1 else f"({', '.join(f'd[{name!r}]' for name in names)})"
                 for names in choices]
        return " or x=".join(shown)

    def _refuse_raw_text_batches(self, x, method):
        """A Python generator or a `keras.utils.PyDataset` whose batches hold raw strings -> one line. Keras hands such
        batches to the model untokenized, and each backend stops in its own way ("Invalid dtype: str..." on PyTorch,
        "Error interpreting argument ... as an abstract array" on JAX, "arrays must be at least rank 1" on TensorFlow).
        Returns `x`; a generator's first batch, read to look at it, is put back in front."""
        if isinstance(x, types.GeneratorType):
            try:
                first = next(x)
            except StopIteration:
                return x  # empty: Keras says so
            x = chained(first, x)
        elif isinstance(x, keras.utils.PyDataset) and x.num_batches:
            first = x[0]
        else:
            return x
        inputs = first[0] if isinstance(first, tuple) and first else first
        if looks_like_text(inputs):
            kind = "generator" if isinstance(x, types.GeneratorType) else "PyDataset"
            name = type(self).__name__
            arguments = "texts" if method == "predict" else "texts, labels"
            raise ValueError(f"{name}.{method} got a {kind} whose batches hold raw text, which Keras passes to the "
                             f"model untokenized: give the texts themselves ({method}({arguments}), as lists, arrays "
                             "or tables), a tf.data.Dataset of strings, or batches of model.preprocessor(texts).")
        return x

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
        x, y, sample_weight = self._read_tables(x, y, sample_weight)
        x = self._refuse_raw_text_batches(x, "fit")
        if isinstance(validation_data, tuple):
            validation_data = self._read_tables(*validation_data)[:len(validation_data)]
        self._check_raw_labels(x, y, "fit")
        self._check_feature_inputs(x, "fit")
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
        if is_dataset(x):
            shuffle = False  # a dataset shuffles itself; Keras would only warn
        return _label_errors_as_one_line(lambda: run_recoverably(
            self, "train_function", lambda: super(Task, self).fit(
                x=x, y=y, batch_size=batch_size, epochs=epochs, validation_data=validation_data,
                sample_weight=sample_weight, shuffle=shuffle, validation_split=validation_split,
                class_weight=class_weight, **kwargs)))

    def _split_off_validation(self, x, y, sample_weight, validation_split):
        """Raw examples (and their labels and weights) -> `(x, y, sample_weight, validation_data)`."""
        self._check_preprocessor()
        from keras_bert_impl.text.preprocessing_layer import as_list  # (a preprocessor means TensorFlow is here)

        x, validation_x, at = self.preprocessor.split_examples(x, validation_split)
        validation_y = None
        if y is not None:
            y, validation_y = as_list(y)[:at], as_list(y)[at:]
        if sample_weight is None:
            return x, y, None, (validation_x, validation_y)
        sample_weight, validation_weight = as_list(sample_weight)[:at], as_list(sample_weight)[at:]
        return x, y, sample_weight, (validation_x, validation_y, validation_weight)

    def _class_weight_as_sample_weight(self, y, class_weight, sample_weight):
        """`class_weight` folded into per-example weights (Keras refuses both together, and raw strings already
        come with weights). Tasks with one class per example override it."""
        raise ValueError(
            f"`class_weight` weighs one class per example, which {type(self).__name__} does not have: give "
            "`sample_weight` (one weight per example) instead."
        )

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        """`keras.Model.evaluate`; `x` may also be raw strings (`y` the labels)."""
        check_method_arguments(self, "evaluate", kwargs, keras.Model.evaluate)
        kwargs["verbose"] = progress_verbosity(kwargs.get("verbose", "auto"))
        self._compile_if_needed()
        x, y, sample_weight = self._read_tables(x, y, sample_weight)
        x = self._refuse_raw_text_batches(x, "evaluate")
        self._check_raw_labels(x, y, "evaluate")
        self._check_feature_inputs(x, "evaluate")
        x, y, sample_weight = lists_as_arrays(x, y, sample_weight)
        if self._is_raw(x):
            x = self._raw_dataset(x, y, sample_weight, batch_size=batch_size)
            y = sample_weight = batch_size = None
        return _label_errors_as_one_line(lambda: run_recoverably(
            self, "test_function", lambda: super(Task, self).evaluate(
                x=x, y=y, batch_size=batch_size, sample_weight=sample_weight, **kwargs)))

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """`keras.Model.predict`; `x` may also be raw strings (one output row per example, in order)."""
        verbose = progress_verbosity(verbose)
        if x is None:  # (Keras's own error is "KeyError: 'pop from an empty set'")
            raise ValueError(f"{type(self).__name__}.predict: `x` is None; give the examples (raw strings in any form "
                             "`fit` takes, or the preprocessed features).")
        x = self._refuse_raw_text_batches(self._read_tables(x)[0], "predict")
        self._check_feature_inputs(x, "predict")
        x = lists_as_arrays(x)[0]
        if self._is_raw(x) and not is_dataset(x):
            self._check_preprocessor()
            count = self._count_examples(x)
            dataset = self._raw_dataset(x, batch_size=batch_size, predicting=True)
            outputs = run_recoverably(self, "predict_function", lambda: super(Task, self).predict(
                dataset, verbose=verbose, steps=steps, callbacks=callbacks))
            # Fixed-size batches end with filler rows: keep the real ones.
            return keras.tree.map_structure(lambda a: a[:count], outputs)
        if self._is_raw(x):
            x = self._raw_dataset(x, batch_size=batch_size)
            batch_size = None
        return run_recoverably(self, "predict_function", lambda: super(Task, self).predict(
            x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks))

    def _check_one_process(self):
        """Refuses `fit` on raw strings in a job of several PyTorch or JAX processes: each process would train
        alone on all the data (PyTorch: N different models) or feed every row N times (JAX)."""
        count, runtime = joined_processes()
        if count > 1:
            raise RuntimeError(
                f"{type(self).__name__}.fit on raw strings trains one process, but this is one of {count} {runtime} "
                "processes, each of which would train on all the data: use keras_bert_impl.training.finetuning."
                "finetune(model, model.preprocessor.make_dataset(texts, labels, batch_size=..., shuffle=True), "
                "strategy=get_strategy('multiworker'), ...), which gives each process its rows of every batch and "
                "averages the gradients, or recipes/finetune_classifier.py --strategy multiworker (docs/finetuning.md)"
            )

    def _count_examples(self, x):
        return self.preprocessor.count_examples(x)

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

    # === Saving ===

    def save(self, filepath, overwrite=True, include_optimizer=False, **kwargs):
        """Saves a `.keras` file: model, preprocessor and vocabulary; no optimizer state unless `include_optimizer`.

        A fine-tuned model is saved for inference by default (a third of the
        size: AdamW keeps two slots per weight); run checkpoints, which resume
        training, keep the optimizer state. `keras.saving.load_model(filepath)`
        reads it back in any process after `import keras_bert_impl` (which
        registers the classes with Keras). An `.h5` path is refused: HDF5 holds
        the weights alone (`save_weights`).
        """
        if str(filepath).endswith((".h5", ".hdf5")):  # (Keras writes it, and no load_model reads it back)
            raise ValueError(f"{type(self).__name__}.save({str(filepath)!r}): a task model is saved as a .keras file "
                             "(its preprocessor and vocabulary do not fit in HDF5); for the weights alone, "
                             "save_weights('....weights.h5').")
        if include_optimizer or getattr(self, "optimizer", None) is None:  # (an uncompiled model has none)
            return super().save(filepath, overwrite=overwrite, **kwargs)
        return keras.Model.save(self.inference_copy(), filepath, overwrite=overwrite, **kwargs)

    def export(self, filepath, format="tf_saved_model", verbose=None, input_signature=None, **kwargs):
        """`keras.Model.export`; a SavedModel of a task with a preprocessor takes raw strings.

        With `format="tf_saved_model"` (the default) and no `input_signature`, the SavedModel's `serve` endpoint
        (also `serving_default`) tokenizes and packs `[batch]` strings inside the graph and returns the task's named
        outputs (`serving_outputs`: a classifier's `logits`, `probabilities`, `label_id`, `label`; a tagger's words,
        tags and entities as `predict_entities` finds them; a span extractor's `serve(question, context)` gives the
        answer of `answer`, windows and all); `serve_features` takes packed token ids
        (`keras_bert_impl.text.saved_model_export` says more). Other formats, or an `input_signature`, export the
        token-id model as Keras does.

        Example:
        >>> classifier.export("sentiment_savedmodel")  # doctest: +SKIP
        Saved BertClassifier as a SavedModel at sentiment_savedmodel: serve(text), serving_default(text), serve_pairs(text_a, text_b), serve_features(token_ids, segment_ids, padding_mask).
        >>> served = tf.saved_model.load("sentiment_savedmodel")  # doctest: +SKIP
        >>> served.serve(tf.constant(["a great film"]))["label"]  # doctest: +SKIP
        <tf.Tensor: shape=(1,), dtype=string, numpy=array([b'positive'], dtype=object)>
        """
        takes_features = isinstance(self.input, dict) and sorted(self.input) == sorted(BACKBONE_INPUTS)
        if format != "tf_saved_model" or input_signature is not None or kwargs or not takes_features:
            if format == "tf_saved_model":
                from keras_bert_impl.text import saved_model_export  # (TensorFlow writes SavedModels)

                saved_model_export.check_backend_writes_saved_models()
                if keras.backend.backend() == "jax" and input_signature is None and "jax2tf_kwargs" not in kwargs:
                    kwargs["jax2tf_kwargs"] = saved_model_export.jax2tf_shapes(self)
            return super().export(filepath, format=format, verbose=verbose, input_signature=input_signature, **kwargs)
        from keras_bert_impl.text.saved_model_export import export_saved_model  # (TensorFlow writes SavedModels)

        export_saved_model(self.inference_copy(), filepath, verbose=verbose is not False)

    def inference_copy(self):
        """The same model, uncompiled (no optimizer state), its LoRA factors merged into the kernels: what is saved.

        A model that is already so (no optimizer, no LoRA) is returned itself. Creating the copy creates variables:
        in a job of several JAX processes every process must call it, together."""
        if getattr(self, "optimizer", None) is None and lora_rank(self.backbone) is None:
            return self
        inference_model = type(self).from_config(dict(self.get_config(), compile_defaults=False))
        copy_variables(self, inference_model)
        return inference_model

    def save_to_preset(self, preset_dir):
        """Writes a preset directory: the backbone (`config.json`, `model.weights.h5`, `vocab.txt`) plus the head.

        `task.json` holds this task's class and configuration (and the
        preprocessor's settings), `task.weights.h5` all its weights;
        `type(self).from_preset(preset_dir)` rebuilds the same model, and
        `BertBackbone.from_preset(preset_dir)` reads the backbone alone. The
        directory appears whole (one atomic save), and saving again over an
        earlier preset save replaces it.
        """
        tokenizer = getattr(self.preprocessor, "tokenizer", None)
        self.backbone.save_to_preset(
            preset_dir,
            vocabulary=None if tokenizer is None else tokenizer.get_vocabulary(),
            lowercase=None if tokenizer is None else tokenizer.lowercase,
            write_task_files=self.write_task_files,
        )

    def write_task_files(self, directory, preprocessor_config=None):
        """Writes `task.json` (class, head configuration, preprocessor settings) and `task.weights.h5` into
        `directory`: the task's part of a preset, which `save_to_preset` (and the pretraining export) write in
        the same atomic save as the backbone's. `preprocessor_config` records the settings of a model without a
        preprocessor (the pretraining run's `sequence_length`), which `from_preset` then builds its one with."""
        from keras_bert_impl.checkpoints.atomic_files import atomic_write_json, save_weights_atomically

        if self.preprocessor is not None:
            preprocessor_config = {
                k: v for k, v in self.preprocessor.get_config().items() if k not in ("tokenizer", "name", "trainable", "dtype")
            }
        # Without the optimizer state, which a preset does not need (it would triple the file).
        save_weights_atomically(self.inference_copy(), os.path.join(os.fspath(directory), TASK_WEIGHTS_FILE))
        atomic_write_json(
            os.path.join(os.fspath(directory), TASK_CONFIG_FILE),
            {"class_name": type(self).__name__, "config": self.head_config(), "preprocessor": preprocessor_config,
             **({"quantized_layers": quantized} if (quantized := self.quantized_head_layers()) else {})},
        )

    def save_huggingface(self, directory):
        """Writes this model as a `transformers` directory of its task, atomically: `BertForSequenceClassification`
        (classes named by `label_names`), `BertForTokenClassification`, `BertForQuestionAnswering` or
        `BertForPreTraining` / `BertForMaskedLM`, with the
        vocabulary, so that `AutoModelFor...from_pretrained(directory)` and `pipeline(...)` compute the same outputs
        (LoRA factors merged into the kernels). A task without a transformers head writes its backbone alone
        (`BertModel`)."""
        from keras_bert_impl.checkpoints.huggingface import save_huggingface

        self._check_float_weights("A transformers checkpoint")
        model = self.inference_copy()  # LoRA merged
        tokenizer = getattr(self.preprocessor, "tokenizer", None)
        save_huggingface(model.backbone, directory,
                         vocabulary=None if tokenizer is None else tokenizer.get_vocabulary(),
                         lowercase=None if tokenizer is None else tokenizer.lowercase, head=model.hugging_face_head())

    def hugging_face_head(self):
        """The task head as `checkpoints.huggingface.save_huggingface` writes it, or None (no transformers head)."""
        if self.hugging_face_head_prefix is None:
            return None
        return {"architecture": self.hugging_face_architectures[0], "prefix": self.hugging_face_head_prefix,
                "dense": self.hugging_face_head_dense(), "labels": getattr(self, "label_names", None),
                "regression": False}

    @classmethod
    def from_preset(cls, preset, load_weights=True, preprocessor="auto", dtype=None, **kwargs):
        """Builds the task on a preset's backbone (weights loaded) and preprocessor; the head is new.

        Args:
            preset: a preset name (`BertBackbone.presets`) or a checkpoint
                directory (Hugging Face, Google, keras-hub, own preset,
                pretraining export, or a `save_to_preset` directory of this
                task, whose head weights then load too). A transformers
                checkpoint fine-tuned for this task
                (`BertForSequenceClassification`, `BertForTokenClassification`,
                `BertForQuestionAnswering`) gives its trained head too, and
                its `id2label` names the classes unless `num_classes` /
                `label_names` say otherwise (other classes: a new head);
                `heads_loaded` lists the heads read from the checkpoint.
            load_weights: load the backbone (and saved head) weights.
            preprocessor: `"auto"` builds the task's preprocessor from the
                preset's vocabulary; `None` for none (feature dicts only); or
                a preprocessor layer.
            dtype: the backbone's dtype policy (e.g. `"mixed_bfloat16"`).
            **kwargs: the task's arguments (e.g. `num_classes`,
                `label_names`, `dropout`), plus the preprocessor's
                (`sequence_length`; `truncate`; span QA's `doc_stride`,
                `max_question_length`; masked LM's `masking_rate`,
                `max_predictions_per_seq`); an argument neither takes is
                one line naming it. `sequence_length`
                defaults to the preprocessor's (128; 384 for span QA), or
                to the backbone's `max_sequence_length` where that is
                smaller.
        """
        preprocessor_kwargs = {key: kwargs.pop(key) for key in PREPROCESSOR_ARGUMENTS if key in kwargs}
        saved = read_task_config(preset, cls)
        if saved is not None:
            head = dict(saved["config"])
            changed = {k for k, v in kwargs.items() if head.get(k, v) != v}
            head.update(kwargs)
            kwargs = head
            preprocessor_kwargs = {**(saved.get("preprocessor") or {}), **preprocessor_kwargs}
        else:
            changed = set()
        checkpoint_head = None
        if saved is None and load_weights and cls.hugging_face_architectures:
            from keras_bert_impl.checkpoints.loading import read_task_head_config

            checkpoint_head = read_task_head_config(preset, cls.hugging_face_architectures)
            if checkpoint_head is not None:
                kwargs = cls.head_arguments_from_checkpoint(checkpoint_head, kwargs)
        backbone_kwargs = {} if dtype is None else {"dtype": dtype}
        backbone = BertBackbone.from_preset(preset, load_weights=load_weights, **backbone_kwargs)
        if isinstance(preprocessor, str) and preprocessor == "auto":
            preprocessor = cls._preset_preprocessor(preset, backbone, preprocessor_kwargs)
        elif preprocessor_kwargs:
            raise ValueError(f"{sorted(preprocessor_kwargs)} set the preprocessor that from_preset builds; "
                             "with preprocessor=None or your own, set them on that one.")
        compile_defaults = kwargs.pop(
            "compile_defaults", inspect.signature(cls.__init__).parameters["compile_defaults"].default
        )
        try:
            model = cls(backbone=backbone, preprocessor=preprocessor, compile_defaults=False, **kwargs)
        except ValueError as error:  # e.g. no `num_classes`, where the directory holds another task's head
            other = saved_task_class(preset)
            if other is None or other == cls.__name__:
                raise
            raise ValueError(f"{error} ({preset} holds a {other}, saved by save_to_preset: load it with "
                             f"{other}.from_preset; {cls.__name__}.from_preset builds a new head on its backbone, "
                             "from this task's own arguments.)") from None
        model.heads_loaded = []
        if saved is not None and load_weights and not changed & set(cls.head_shape_arguments):
            quantization.quantize_layers(model, saved.get("quantized_layers"))
            # Before `compile`: the file holds no optimizer state, and Keras warns when a compiled model's has none.
            model.load_weights(os.path.join(os.fspath(preset), TASK_WEIGHTS_FILE))
        elif checkpoint_head is not None and model.takes_checkpoint_head(checkpoint_head):
            from keras_bert_impl.checkpoints.loading import load_task_head

            _, model.heads_loaded = load_task_head(preset, model.hugging_face_head_dense(), cls.hugging_face_head_prefix)
        model.compile_defaults = compile_defaults
        if compile_defaults:
            model.compile()
        return model

    @classmethod
    def _preset_preprocessor(cls, preset, backbone, preprocessor_kwargs):
        """The task's preprocessor on the preset's vocabulary (None for a task without one); `sequence_length`
        defaults to the preprocessor's (128; 384 for span QA), but never past a small checkpoint's position table."""
        preprocessor_cls = cls.preprocessor_class()
        if preprocessor_cls is None:
            return None
        default = inspect.signature(preprocessor_cls.from_preset).parameters["sequence_length"].default
        preprocessor_kwargs = {"sequence_length": min(default, backbone.max_sequence_length), **preprocessor_kwargs}
        return preprocessor_cls.from_preset(preset, **preprocessor_kwargs)

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


# The preprocessors' own arguments, which `from_preset` passes to the preprocessor it builds.
PREPROCESSOR_ARGUMENTS = ("sequence_length", "truncate", "doc_stride", "max_question_length", "masking_rate",
                          "max_predictions_per_seq")


def _task_config(preset):
    """The `task.json` of a `save_to_preset` directory, or None (not a directory holding one)."""
    if not isinstance(preset, (str, os.PathLike)):
        return None
    path = os.path.join(os.fspath(preset), TASK_CONFIG_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable task config ({e}).") from None


def read_task_config(preset, cls):
    """The `task.json` of a `save_to_preset` directory of `cls`, or None (no such file, or another task's)."""
    saved = _task_config(preset)
    return saved if saved is not None and saved.get("class_name") == cls.__name__ else None


def saved_task_class(preset):
    """The class name of the task a `save_to_preset` directory holds (`"BertTokenClassifier"`), or None."""
    saved = _task_config(preset)
    return saved.get("class_name") if isinstance(saved, dict) else None


def copy_variables(source, target):
    """Copies every variable of layer (or model) `source` into `target`, built alike: layer by layer through Keras's
    own stores, so a LoRA layer hands over its merged kernel."""
    for source_layer, target_layer in zip(source._flatten_layers(), target._flatten_layers()):
        store = {}
        source_layer.save_own_variables(store)
        target_layer.load_own_variables(store)


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
