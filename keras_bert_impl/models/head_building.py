"""What the task models' constructors share to build a head on a `BertBackbone`.

`BertClassifier`, `BertTokenClassifier`, `BertSpanExtractor` and
`BertTextEmbedder` build their functional graph on `backbone_inputs()` (the
backbone's three features, `BACKBONE_INPUTS`, which `Task` and
`BertPretrainer` also read) and freeze the pooler when their head never reads
it (`freeze_unused_pooler`; a head that reads it trains it again: `use_pooler`);
the classifier and the tagger check their `num_classes`/`label_names`
(`class_count`) and `dropout` (`check_dropout`).
Packed rows hold several examples: `BertClassifier` and `BertSpanExtractor`'s
`packed_training_model()` and `tasks/span_qa/` ask `check_packable` (or
`is_packable`) whether the backbone's attention keeps them apart.

Example: a head of three tags per token on a 1-layer backbone, built as `BertTokenClassifier` builds its own:

>>> from keras_bert_impl.models.backbone import BertBackbone
>>> class_count(None, ["O", "B-PER", "I-PER"], "")  # the count from the names
(3, ['O', 'B-PER', 'I-PER'])
>>> backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
>>> inputs = backbone_inputs()
>>> model = keras.Model(inputs, keras.layers.Dense(3)(backbone(inputs)["sequence_output"]))
>>> sorted(model.input), model.output.shape
(['padding_mask', 'segment_ids', 'token_ids'], (None, None, 3))
>>> freeze_unused_pooler(backbone)
>>> len(backbone.weights) - len(backbone.trainable_weights)  # the pooler's kernel and bias
2
>>> check_dropout(1.0)
Traceback (most recent call last):
...
ValueError: `dropout` must be a number in [0, 1), got 1.0.
"""

import collections.abc
import logging
import numbers

import keras
import numpy as np

BACKBONE_INPUTS = ("token_ids", "segment_ids", "padding_mask")


def class_count(num_classes, label_names, what):
    """`(num_classes, label_names)` checked: the count a positive int (NumPy's too; from `label_names` when None),
    the names strings without repeats. `what` ends "`num_classes` must be a positive int ..."."""
    if label_names is not None:
        if isinstance(label_names, (str, bytes)):
            raise ValueError(f"`label_names` must be a list of names, got the string {label_names!r}.")
        if isinstance(label_names, collections.abc.Mapping):
            label_names = names_in_id_order(label_names)
        label_names = [str(name) for name in label_names]
        repeated = sorted({name for name in label_names if label_names.count(name) > 1})
        if repeated:
            raise ValueError(f"`label_names` names each class once; {repeated} appear more than once in {label_names}.")
        if num_classes is None:
            num_classes = len(label_names)
    if isinstance(num_classes, numbers.Integral) and not isinstance(num_classes, (bool, np.bool_)):
        num_classes = int(num_classes)
    if not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"`num_classes` must be a positive int{what}, got {num_classes!r}.")
    return num_classes, label_names


def _class_id(value):
    """`value` as a class id (an int, or a string of digits as JSON keys are), or None."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def names_in_id_order(mapping):
    """The class names of a dict, in the order of their ids: Hugging Face's `id2label` (`{0: "neg", 1: "pos"}`,
    its keys strings in a config.json) or `label2id` (`{"neg": 0, "pos": 1}`). The ids must be 0 .. n - 1.

    Example:
    >>> names_in_id_order({"1": "pos", "0": "neg"}), names_in_id_order({"pos": 1, "neg": 0})
    (['neg', 'pos'], ['neg', 'pos'])
    >>> names_in_id_order({0: "neg", 2: "pos"})
    Traceback (most recent call last):
    ...
    ValueError: `label_names` is a dict of class ids and names, but its ids are [0, 2], not 0 .. 1: give every class id from 0 once.
    """
    keys = [_class_id(key) for key in mapping]
    values = [_class_id(value) for value in mapping.values()]
    if all(key is not None for key in keys):  # id2label
        by_id = dict(zip(keys, mapping.values()))
    elif all(value is not None for value in values):  # label2id
        by_id = dict(zip(values, mapping.keys()))
    else:
        raise ValueError(f"`label_names` is a dict, but neither its keys nor its values are class ids: give a list of "
                         f"names, id2label ({{0: 'negative', 1: 'positive'}}) or label2id; got {dict(mapping)!r:.120}.")
    ids = sorted(by_id)
    if ids != list(range(len(mapping))):
        raise ValueError(f"`label_names` is a dict of class ids and names, but its ids are {ids}, not "
                         f"0 .. {len(mapping) - 1}: give every class id from 0 once.")
    return [by_id[i] for i in ids]


def check_dropout(dropout):
    """`dropout` as a float in [0, 1), or one line."""
    if isinstance(dropout, (bool, np.bool_)) or not isinstance(dropout, numbers.Real) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"`dropout` must be a number in [0, 1), got {dropout!r}.")
    return float(dropout)


def backbone_inputs():
    """The three symbolic int32 inputs of a `BertBackbone`: token_ids, segment_ids, padding_mask."""
    return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in BACKBONE_INPUTS}


def freeze_unused_pooler(backbone):
    """Marks the pooler (dense + tanh on [CLS]) non-trainable, for heads that use only `sequence_output`.

    The token and span heads, the embedder and the masked-LM-only pretrainer never read `pooled_output`, so its
    weights get no gradient; left trainable, every step would warn that they have none. Freezing them changes no
    computation; a head that reads the pooler, built later on the same backbone, trains it again (`use_pooler`), as
    does `backbone.pooled_dense.trainable = True`.
    """
    if backbone.pooled_dense.trainable:
        backbone.pooled_dense.trainable = False
        backbone.pooled_dense.frozen_as_unused = True


def use_pooler(backbone):
    """Trains the pooler again for a head that reads `pooled_output` (the classifier's [CLS] head, next-sentence
    prediction) when `freeze_unused_pooler` froze it for another head on the same backbone, e.g.
    `BertClassifier(mlm_pretrainer.backbone, ...)`: before, that classifier trained with its pooler silently frozen.
    A pooler frozen by the user (or a frozen backbone) stays frozen.

    Example:
    >>> from keras_bert_impl.models.backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)
    >>> freeze_unused_pooler(backbone); backbone.pooled_dense.trainable
    False
    >>> use_pooler(backbone); backbone.pooled_dense.trainable
    True
    >>> backbone.trainable = False  # the user's: a frozen backbone (a linear probe) stays frozen
    >>> use_pooler(backbone); backbone.pooled_dense.trainable
    False
    """
    pooler = backbone.pooled_dense
    if getattr(pooler, "frozen_as_unused", False) and backbone.trainable:
        pooler.trainable = True
        pooler.frozen_as_unused = False
    _warn_of_a_new_pooler(backbone)


def _warn_of_a_new_pooler(backbone):
    """Warns, once per backbone, that a head reading the pooler starts from a new one: the backbone's checkpoint had
    none (`backbone.load_report.left_new`: a transformers `BertForMaskedLM`, `BertForTokenClassification` or
    `BertForQuestionAnswering`). The checkpoint's loader warned on every load before, a tagger's and a span
    extractor's too, which never read the pooler."""
    left_new = getattr(getattr(backbone, "load_report", None), "left_new", None) or {}
    if backbone.pooled_dense.kernel.path in left_new and not getattr(backbone, "new_pooler_warned", False):
        backbone.new_pooler_warned = True
        logging.getLogger(__name__).warning(
            "The backbone's checkpoint has no pooler (pooler.dense.*): the pooled [CLS] output that this head reads "
            "starts from a new pooler, which training trains (as transformers does).")


def is_packable(backbone):
    """Whether `backbone`'s attention keeps the examples of packed rows apart (`attention_padding="mask"`)."""
    return getattr(backbone, "attention_padding", "mask") == "mask"


def check_packable(backbone, what):
    """Refuses, in one line naming `what`, a backbone whose attention cannot keep packed examples apart.

    Packed rows need the block-diagonal mask (`attention_padding="mask"`);
    `"lengths"` gives one length per row, for rows of one example.

    Example:
    >>> from keras_bert_impl.models.backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
    ...                         attention_padding="lengths")
    >>> is_packable(backbone)
    False
    >>> check_packable(backbone, "packed_training_model()")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: packed_training_model() needs a backbone with attention_padding='mask': ...='lengths' ...
    """
    if not is_packable(backbone):
        raise ValueError(
            f"{what} needs a backbone with attention_padding='mask': packed rows keep their examples apart with "
            f"the block-diagonal mask, and this backbone has attention_padding={backbone.attention_padding!r} "
            "(one length per row, for unpacked rows)."
        )
