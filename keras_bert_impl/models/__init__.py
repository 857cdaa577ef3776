"""Functional Keras models built from `keras_bert_impl.layers`. No TensorFlow import."""

from keras_bert_impl.models.backbone import BertBackbone

__all__ = ["BertBackbone"]
