"""One line for a keyword argument that a model does not take.

Keras's functional `Model` drops keywords it does not know without a word, so
`BertBackbone(..., hidden_size=768)` (Hugging Face's name) built a model of the
`hidden_dim` given, and `BertClassifier.from_preset(p, max_length=64)` packed
to 128. `BertBackbone` and every task check their keywords here instead; the
message names the argument, the one probably meant (Hugging Face's names are
mapped to ours), and what the class takes.

Example:
>>> class Model:
...     def __init__(self, hidden_dim, dropout=0.1, **kwargs):
...         check_arguments(type(self), kwargs)
>>> Model(hidden_dim=8, name="encoder") and None
>>> Model(hidden_dim=8, hidden_size=8)
Traceback (most recent call last):
...
TypeError: Model got an unknown argument `hidden_size` (did you mean `hidden_dim`?): it takes hidden_dim, dropout.
"""

import difflib
import inspect

# What the models hand on to `keras.Model`: the functional graph, and the keys their `get_config` writes.
KERAS_MODEL_ARGUMENTS = frozenset({"inputs", "outputs", "name", "trainable", "dtype"})

# Hugging Face's (`BertConfig`, `from_pretrained`, `Trainer`) names for our arguments.
HUGGING_FACE_NAMES = {
    "vocab_size": "vocabulary_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "hidden_size": "hidden_dim",
    "intermediate_size": "intermediate_dim",
    "hidden_dropout_prob": "dropout",
    "attention_probs_dropout_prob": "attention_dropout",
    "max_position_embeddings": "max_sequence_length",
    "type_vocab_size": "num_segments",
    "hidden_act": "activation",
    "layer_norm_eps": "layer_norm_epsilon",
    "max_length": "sequence_length",
    "max_seq_length": "sequence_length",
    "num_labels": "num_classes",
    "id2label": "label_names",
    "label2id": "label_names",
    "labels": "label_names",
}

# Hugging Face's arguments that no one argument of ours replaces: what to do instead.
HUGGING_FACE_HINTS = {
    "problem_type": "transformers' problem_type: pass multi_label=True for multi_label_classification, "
                    "num_classes=1 for regression",
    "ignore_mismatched_sizes": "transformers' ignore_mismatched_sizes: not needed, as other num_classes than the "
                               "checkpoint's build a new head on its encoder",
}


def check_arguments(cls, kwargs, also_known=(), note=""):
    """Raises `TypeError` in one line if `kwargs` holds a keyword that neither `cls.__init__` nor `keras.Model` takes.

    Args:
        cls: the class whose `__init__` signature lists what it takes.
        kwargs: the keywords left over for `keras.Model`, or all of them (a config read from a file).
        also_known: other names worth suggesting (those another step takes, e.g. the preprocessor's).
        note: a sentence appended to the message (where those other names go).
    """
    parameters = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]
    unknown = sorted(set(kwargs) - KERAS_MODEL_ARGUMENTS - set(parameters))
    if not unknown:
        return
    name = unknown[0]
    candidates = [*parameters, *also_known, *KERAS_MODEL_ARGUMENTS]
    meant = HUGGING_FACE_NAMES.get(name) or next(iter(difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)),
                                                 None)
    hint = f" ({HUGGING_FACE_HINTS[name]})" if name in HUGGING_FACE_HINTS else f" (did you mean `{meant}`?)" if meant \
        else ""
    raise TypeError(f"{cls.__name__} got an unknown argument `{name}`{hint}: it takes {', '.join(parameters)}"
                    f"{'; ' + note if note else '.'}")


# Hugging Face `Trainer` / `TrainingArguments` names for the arguments of `fit` and `evaluate`.
HUGGING_FACE_TRAINING_NAMES = {
    "num_train_epochs": "epochs",
    "per_device_train_batch_size": "batch_size",
    "per_device_eval_batch_size": "batch_size",
    "train_batch_size": "batch_size",
    "eval_dataset": "validation_data",
    "labels": "y",
}
# `TrainingArguments`' optimizer settings, which Keras's `fit` does not take.
_OPTIMIZER_SETTING = ("a setting of the optimizer: give it to compile(optimizer=keras.optimizers.AdamW("
                      "learning_rate=2e-5, weight_decay=0.01)) before fit, or keras_bert_impl.training.finetuning."
                      "finetune(model, dataset, epochs=..., learning_rate=..., warmup_proportion=..., weight_decay=...)")
HUGGING_FACE_TRAINING_HINTS = {name: _OPTIMIZER_SETTING for name in (
    "learning_rate", "lr", "weight_decay", "warmup_ratio", "warmup_steps", "warmup_proportion", "lr_scheduler_type",
    "adam_epsilon", "max_grad_norm")}


def check_method_arguments(model, method, kwargs, takes):
    """Raises `TypeError` in one line, the same on every backend, for a keyword the Keras method `takes` does not
    take (Keras's own message names the backend's trainer, as `JAXTrainer.fit() got an unexpected keyword argument`,
    or says "Arguments not recognized" in `evaluate`). Names starting with `_` (Keras's own, as `fit` passes to
    `evaluate`) pass.

    Example:
    >>> import keras
    >>> check_method_arguments(keras.Model(), "fit", {"batchsize": 8}, keras.Model.fit)
    Traceback (most recent call last):
    ...
    TypeError: Model.fit got an unknown argument `batchsize` (did you mean `batch_size`?).
    """
    parameters = []  # the model's own method's, then Keras's
    for function in (getattr(type(model), method), takes):
        parameters += [p for p in inspect.signature(function).parameters
                       if p not in ("self", "args", "kwargs") and p not in parameters]
    unknown = sorted(name for name in set(kwargs) - set(parameters) if not name.startswith("_"))
    if not unknown:
        return
    name = unknown[0]
    meant = HUGGING_FACE_TRAINING_NAMES.get(name) or next(
        iter(difflib.get_close_matches(name, parameters, n=1, cutoff=0.6)), None)
    hint = f": {HUGGING_FACE_TRAINING_HINTS[name]}" if name in HUGGING_FACE_TRAINING_HINTS else (
        f" (did you mean `{meant}`?)" if meant else f": it takes {', '.join(parameters)}")
    raise TypeError(f"{type(model).__name__}.{method} got an unknown argument `{name}`{hint}.")
