"""Optimizers (Keras only, any backend): AdamW with PyTorch's epsilon, and global-norm clipping of the whole
batch's gradient on every device and process."""

from keras_bert_impl.optimizers.adamw import AdamW
from keras_bert_impl.optimizers.global_clipping import ClipAfterAllReduce, GlobalClipAdamW, GlobalClipLamb

__all__ = ["AdamW", "ClipAfterAllReduce", "GlobalClipAdamW", "GlobalClipLamb"]
