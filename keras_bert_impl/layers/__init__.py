"""Keras 3 layers of BERT. Backend-agnostic: keras.ops only, no TensorFlow import."""

from keras_bert_impl.layers.float32_layer_norm import Float32LayerNormalization
from keras_bert_impl.layers.masked_lm_head import MaskedLMHead
from keras_bert_impl.layers.next_sentence_head import NextSentenceHead
from keras_bert_impl.layers.one_hot_embedding import OneHotEmbedding
from keras_bert_impl.layers.per_example_logits import PerExampleLogits
from keras_bert_impl.layers.position_embedding import PositionEmbedding
from keras_bert_impl.layers.transformer_encoder import TransformerEncoder

__all__ = [
    "Float32LayerNormalization",
    "MaskedLMHead",
    "NextSentenceHead",
    "OneHotEmbedding",
    "PerExampleLogits",
    "PositionEmbedding",
    "TransformerEncoder",
]
