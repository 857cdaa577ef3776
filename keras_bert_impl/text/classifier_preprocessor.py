"""ClassifierPreprocessor: raw strings (one or two segments) -> BertClassifier inputs, in TensorFlow."""

import keras
import tensorflow as tf

from keras_bert_impl.text.packer import SegmentPacker
from keras_bert_impl.text.tokenizer import BertTokenizer


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class ClassifierPreprocessor:
    """WordPiece-tokenizes one or two batches of strings and packs them as `[CLS] A [SEP] (B [SEP])`.

    Works eagerly and inside `tf.data.Dataset.map`. `__call__` pads to
    `sequence_length` (static shapes); `unpadded` returns ragged rows
    truncated to `sequence_length`, for length-bucketed batching
    (`keras_bert_impl.data.glue.make_dataset`).

    Args:
        tokenizer: a `keras_bert_impl.text.tokenizer.BertTokenizer`.
        sequence_length: int >= 3, the maximum packed length (special tokens included).
        truncate: how a pair is cut to fit: `"longest_first"` (original BERT
            `run_classifier.py` and Hugging Face's default), `"round_robin"`
            or `"waterfall"` (see `keras_bert_impl.text.packer`).

    Example:
    >>> tokenizer = BertTokenizer.from_preset("all_minilm_l6_v2_en")
    >>> preprocessor = ClassifierPreprocessor(tokenizer, sequence_length=8)
    >>> out = preprocessor((["The cat sat."], ["A cat sat down."]))
    >>> out["token_ids"].numpy().tolist(), out["segment_ids"].numpy().tolist()
    ([[101, 1996, 4937, 2938, 102, 1037, 4937, 102]], [[0, 0, 0, 0, 0, 1, 1, 1]])
    >>> preprocessor.unpadded(["short"])["token_ids"].to_list()
    [[101, 2460, 102]]
    """

    def __init__(self, tokenizer, sequence_length=128, truncate="longest_first"):
        if isinstance(tokenizer, dict):
            tokenizer = BertTokenizer.from_config(tokenizer)
        if not isinstance(tokenizer, BertTokenizer):
            raise ValueError(f"`tokenizer` must be a BertTokenizer, got {type(tokenizer).__name__}.")
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.truncate = truncate
        self.packer = SegmentPacker.from_tokenizer(tokenizer, sequence_length, truncate=truncate, pad=True)
        self.unpadded_packer = SegmentPacker.from_tokenizer(tokenizer, sequence_length, truncate=truncate, pad=False)

    @classmethod
    def from_preset(cls, preset, sequence_length=128, truncate="longest_first"):
        """Preprocessor with the tokenizer of a preset name or checkpoint directory."""
        return cls(BertTokenizer.from_preset(preset), sequence_length=sequence_length, truncate=truncate)

    def _segments(self, texts):
        if isinstance(texts, (tuple, list)) and texts and not isinstance(texts[0], (str, bytes)):
            segments = list(texts)
        else:
            segments = [texts]
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"A classifier takes one or two text segments, got {len(segments)}.")
        return [self.tokenizer(tf.convert_to_tensor(s, dtype=tf.string)) for s in segments]

    def __call__(self, texts):
        """`texts`: a batch of strings, or a tuple `(texts_a, texts_b)`. Returns int32 `[batch, sequence_length]` tensors."""
        return self.packer(self._segments(texts))

    def unpadded(self, texts):
        """As `__call__`, but each row only as long as its packed tokens (ragged `[batch, None]`)."""
        return self.unpadded_packer(self._segments(texts))

    def get_config(self):
        tokenizer_config = self.tokenizer.get_config()
        # Store the tokens themselves, so a saved model does not depend on a vocab file path.
        tokenizer_config["vocabulary"] = list(self.tokenizer.get_vocabulary())
        return {"tokenizer": tokenizer_config, "sequence_length": self.sequence_length, "truncate": self.truncate}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
