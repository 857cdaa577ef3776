"""How a task model is saved and built from a preset: `.keras` files, SavedModels, preset directories.

`TaskSaving` is one base of `models/task.py`'s `Task`: `save` (a `.keras` file for inference, without the
optimizer state), `export` (a SavedModel that takes raw strings), `save_to_preset` (the backbone's preset plus
`task.json` and `task.weights.h5`, in one atomic save), `save_huggingface` (the task as `transformers` names it)
and `from_preset` (any preset or checkpoint directory: the backbone's weights, the head new, or read back from
this task's own preset or a fine-tuned `transformers` directory). `read_task_config` and `saved_task_class` read a
preset's `task.json`; `copy_variables` copies weights between two models built alike.

Example:
>>> import tempfile
>>> from keras_bert_impl import BertBackbone, BertClassifier
>>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
>>> directory = tempfile.mkdtemp()
>>> BertClassifier(backbone, num_classes=2).save_to_preset(directory)
>>> saved_task_class(directory), read_task_config(directory, BertClassifier)["config"]["num_classes"]
('BertClassifier', 2)
"""

import inspect
import json
import os

import keras

from keras_bert_impl.checkpoints.own_preset import TASK_CONFIG_FILE, TASK_WEIGHTS_FILE
from keras_bert_impl.models import quantization
from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.head_building import BACKBONE_INPUTS
from keras_bert_impl.models.lora import lora_rank


class TaskSaving:
    """The saving and preset loading of `Task` (see the module docstring)."""

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
        (`BertModel`); a sentence embedder adds sentence-transformers' files (`hugging_face_embedding`)."""
        from keras_bert_impl.checkpoints.huggingface import save_huggingface

        self._check_float_weights("A transformers checkpoint")
        model = self.inference_copy()  # LoRA merged
        tokenizer = getattr(self.preprocessor, "tokenizer", None)
        save_huggingface(model.backbone, directory,
                         vocabulary=None if tokenizer is None else tokenizer.get_vocabulary(),
                         lowercase=None if tokenizer is None else tokenizer.lowercase, head=model.hugging_face_head(),
                         embedding=model.hugging_face_embedding())

    def hugging_face_embedding(self):
        """A sentence embedder's settings as `save_huggingface` writes them (sentence-transformers' files), or None."""
        return None

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
            holder, other = (f"keras-hub's {other[1]}", _KERAS_HUB_TASKS[other[1]]) if isinstance(other, tuple) else (
                f"a {other}", other)
            if other is None or other == cls.__name__:
                raise
            raise ValueError(f"{error} ({preset} holds {holder}, saved by save_to_preset: load it with "
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
        takes = [name for name in inspect.signature(preprocessor_cls.__init__).parameters
                 if name in PREPROCESSOR_ARGUMENTS]
        other = sorted(set(preprocessor_kwargs) - set(takes))
        if other:  # another task's preprocessor's (Keras said "Unrecognized keyword arguments passed to ...")
            raise TypeError(f"{cls.__name__}.from_preset got {', '.join(other)}, which {preprocessor_cls.__name__} "
                            f"does not take (another task's preprocessor does): it takes {', '.join(takes)}.")
        preprocessor_kwargs = {"sequence_length": min(default, backbone.max_sequence_length), **preprocessor_kwargs}
        return preprocessor_cls.from_preset(preset, **preprocessor_kwargs)


# The preprocessors' own arguments, which `from_preset` passes to the preprocessor it builds.
PREPROCESSOR_ARGUMENTS = ("sequence_length", "truncate", "doc_stride", "max_question_length", "masking_rate",
                          "max_predictions_per_seq", "mask_token_rate", "random_token_rate", "mask_selection_rate",
                          "mask_selection_length")


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
    if saved is None or _is_keras_hubs(saved):  # (keras-nlp's task was a `BertClassifier` too)
        return None
    return saved if saved.get("class_name") == cls.__name__ else None


def _is_keras_hubs(saved):
    """Whether a `task.json` was written by keras-hub (or keras-nlp), not by ours."""
    return str(saved.get("registered_name")).startswith(("keras_hub>", "keras_nlp>"))


# keras-hub's tasks (keras-nlp's older names too) that one of ours reads: its classifier's head loads
# (`checkpoints/keras_hub.read_task_head_config`); its masked LM's backbone, with new heads.
_KERAS_HUB_TASKS = {"BertTextClassifier": "BertClassifier", "BertClassifier": "BertClassifier",
                    "BertMaskedLM": "BertMaskedLM"}


def saved_task_class(preset):
    """The class name of the task a `save_to_preset` directory holds (`"BertTokenClassifier"`), `("keras-hub",
    name)` for a keras-hub task that one of ours reads (`_KERAS_HUB_TASKS`), or None."""
    saved = _task_config(preset)
    if not isinstance(saved, dict):
        return None
    if _is_keras_hubs(saved):
        return ("keras-hub", saved.get("class_name")) if saved.get("class_name") in _KERAS_HUB_TASKS else None
    return saved.get("class_name")


def copy_variables(source, target):
    """Copies every variable of layer (or model) `source` into `target`, built alike: layer by layer through Keras's
    own stores, so a LoRA layer hands over its merged kernel."""
    for source_layer, target_layer in zip(source._flatten_layers(), target._flatten_layers()):
        store = {}
        source_layer.save_own_variables(store)
        target_layer.load_own_variables(store)
