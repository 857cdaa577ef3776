"""Training plumbing: optimizers and LR schedules, distribution strategies, callbacks, checkpointing.

`create_optimizer`, `WarmupLinearDecay` and `get_strategy` import only Keras
(TensorFlow is imported when the TensorFlow backend asks for a strategy).
"""

from keras_bert_impl.training.optimizer import create_optimizer
from keras_bert_impl.training.precision import mixed_precision_policy, resolve_mixed_precision
from keras_bert_impl.training.schedule import WarmupLinearDecay
from keras_bert_impl.training.strategy import check_global_batch_size, get_strategy

__all__ = [
    "WarmupLinearDecay",
    "check_global_batch_size",
    "create_optimizer",
    "get_strategy",
    "mixed_precision_policy",
    "resolve_mixed_precision",
]
