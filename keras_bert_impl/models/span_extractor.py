"""BertSpanExtractor: BERT with a span head for extractive question answering (SQuAD)."""

import keras

from keras_bert_impl.layers.span_head import SpanHead
from keras_bert_impl.models.backbone import BertBackbone
from keras_bert_impl.models.functional_model import FunctionalModel


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class SpanLoss(keras.losses.Loss):
    """Half the sparse softmax cross-entropy of one span boundary, from logits.

    Used for both the start and the end output, so the total loss is the mean
    of the start and end cross-entropies, as in google-research/bert. Rows
    whose label is negative (e.g. the filler rows of a fixed-size last batch)
    are ignored: the loss is the mean over the rows with a label >= 0.

    Example:
    >>> import numpy as np
    >>> loss = SpanLoss()
    >>> round(float(loss(np.array([0]), np.array([[0.0, 0.0]]))), 4)  # 0.5 * ln 2
    0.3466
    """

    def __init__(self, name="span_loss", reduction="sum_over_batch_size", **kwargs):
        super().__init__(name=name, reduction=reduction, **kwargs)

    def call(self, y_true, y_pred):
        y_true = keras.ops.cast(keras.ops.reshape(y_true, (-1,)), "int32")
        valid = keras.ops.cast(y_true >= 0, y_pred.dtype)
        per_row = keras.losses.sparse_categorical_crossentropy(
            keras.ops.maximum(y_true, 0), y_pred, from_logits=True
        )
        # "sum_over_batch_size" divides by all rows; rescale so it is the mean over the labelled ones.
        scale = keras.ops.cast(keras.ops.shape(valid)[0], y_pred.dtype) / keras.ops.maximum(keras.ops.sum(valid), 1.0)
        return 0.5 * per_row * valid * scale


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertSpanExtractor(FunctionalModel):
    """BERT span extractor: start and end logits of the answer, for SQuAD v1.1 and v2.0.

    A `SpanHead` (dense layer to two logits per token) on the backbone's
    `sequence_output`. Inputs are the backbone's dict `{"token_ids",
    "segment_ids", "padding_mask"}` packed as `[CLS] question [SEP] context
    [SEP]` (segment 0 for the question part, 1 for the context part); outputs
    are `{"start_logits", "end_logits"}`, float32 `(batch, length)`. Positions
    that cannot hold an answer (the question, [SEP], padding) are masked to a
    very negative logit, so they take no part in the loss or the prediction.
    [CLS] is the answer of windows that do not contain the answer and, for
    SQuAD v2.0, of unanswerable questions (the "null" score is
    `start_logits[:, 0] + end_logits[:, 0]`).

    The model is compiled with the BERT loss (mean of the start and end
    cross-entropies, labels `{"start_logits": start_position,
    "end_logits": end_position}`); `keras_bert_impl.training.finetuning.finetune`
    replaces only the optimizer. It round-trips through `.keras` files.

    Args:
        backbone: a `BertBackbone`.
        **kwargs: `keras.Model` arguments (e.g. `name`).

    Example:
    >>> import numpy as np
    >>> from keras_bert_impl import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
    ...                         hidden_dim=16, intermediate_dim=32, max_sequence_length=16)
    >>> model = BertSpanExtractor(backbone)
    >>> x = {"token_ids": np.array([[2, 5, 3, 7, 8, 3, 0]]),
    ...      "segment_ids": np.array([[0, 0, 0, 1, 1, 1, 0]]),
    ...      "padding_mask": np.array([[1, 1, 1, 1, 1, 1, 0]])}
    >>> out = model.predict(x, verbose=0)
    >>> sorted(out), out["start_logits"].shape
    (['end_logits', 'start_logits'], (1, 7))
    """

    def __init__(self, backbone, **kwargs):
        if not isinstance(backbone, BertBackbone):
            raise TypeError(f"`backbone` must be a BertBackbone, got {type(backbone).__name__}.")
        # === Layers ===
        self.backbone = backbone
        self.span_head = SpanHead(dtype=backbone.dtype_policy, name="span_head")

        # === Functional Model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in ("token_ids", "segment_ids", "padding_mask")
        }
        sequence_output = backbone(inputs)["sequence_output"]
        start_logits, end_logits = self.span_head(
            sequence_output, segment_ids=inputs["segment_ids"], padding_mask=inputs["padding_mask"]
        )
        outputs = {
            "start_logits": keras.layers.Identity(name="start_logits", dtype="float32")(start_logits),
            "end_logits": keras.layers.Identity(name="end_logits", dtype="float32")(end_logits),
        }
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.compile(loss={"start_logits": SpanLoss(), "end_logits": SpanLoss()})

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.layers.serialize(self.backbone),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("backbone"), dict):
            config["backbone"] = keras.layers.deserialize(config["backbone"])
        return cls(**config)
