"""BertPretrainerPreprocessor: raw text -> masked-LM batches for continued pretraining (`BertPretrainer.fit(texts)`)."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_impl.batching.boundaries import (
    CLASSIFICATION_BUCKETS,
    default_boundaries,
    merge_sparse_buckets,
)
from keras_bert_impl.batching.tf_batches import batches_by_length
from keras_bert_impl.text.masking import mask_batch
from keras_bert_impl.raw_text import not_text_error
from keras_bert_impl.text.preprocessing_layer import PreprocessingLayer, as_list, as_string_tensor
from keras_bert_impl.text.tokenizer import MASK_TOKEN, BertTokenizer

# Tokenize this many strings per TensorFlow call.
_TOKENIZE_CHUNK = 4096


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class BertPretrainerPreprocessor(PreprocessingLayer):
    """Raw text -> `[CLS] piece... [SEP]` rows, masked on the fly: what `BertPretrainer(nsp=False).fit(texts)` reads.

    Continued (domain-adaptive) pretraining on your own text, keras-hub's
    `BertMaskedLM` habit: every text is WordPiece-tokenized once and cut into
    rows of at most `sequence_length - 2` pieces (a long document gives
    several rows, none of its text is dropped), and every batch is masked
    anew each time it is drawn (dynamic masking, RoBERTa): `masking_rate` of
    the pieces of each row (not [CLS], [SEP] or padding), at most
    `max_predictions_per_seq`, of which 80% become [MASK] (`mask_token_rate`), 10% a random
    piece (`random_token_rate`) and 10% stay, with the seeded tensorflow-text masking that
    `recipes/pretrain.py` uses (`text/masking.py`). Batches are grouped by
    length (16/32/48/64/96/128 tokens), so short texts do not pay for
    padding to `sequence_length`.

    Args:
        tokenizer: a `BertTokenizer`.
        sequence_length: int >= 3, the longest row, [CLS] and [SEP] included.
        masking_rate: float in (0, 1), the expected fraction of pieces masked.
        max_predictions_per_seq: int >= 1, the masked slots of a row (BERT: 20 for 128 tokens);
            default `round(sequence_length * masking_rate)` rounded up to a multiple of 4 (20 for 128).
        mask_token_rate, random_token_rate: the fractions of the masked pieces that become [MASK] (0.8) and a
            random piece (0.1); the rest stay as they are.
        mask_selection_rate, mask_selection_length: keras-hub's names for `masking_rate` and
            `max_predictions_per_seq`, taken for code written for keras-hub's `BertMaskedLMPreprocessor`.

    Example:
    >>> preprocessor = BertPretrainerPreprocessor.from_preset("all_minilm_l6_v2_en", sequence_length=16)
    >>> text = "The quick brown fox jumps over the lazy dog. " * 3   # 30 pieces: rows of 14 + [CLS], [SEP]
    >>> preprocessor.rows([text]).row_lengths().numpy().tolist()
    [16, 16, 4]
    >>> x, y, weights = next(iter(preprocessor.make_dataset(["The quick brown fox jumps over the lazy dog."],
    ...                                                      batch_size=1, seed=0)))
    >>> sorted(x), sorted(y), x["mask_positions"].shape.as_list()
    (['mask_positions', 'padding_mask', 'segment_ids', 'token_ids'], ['mlm'], [1, 4])
    """

    def __init__(self, tokenizer, sequence_length=128, masking_rate=0.15, max_predictions_per_seq=None,
                 mask_token_rate=0.8, random_token_rate=0.1, mask_selection_rate=None, mask_selection_length=None,
                 **kwargs):
        super().__init__(**kwargs)
        masking_rate = _keras_hub_name("mask_selection_rate", mask_selection_rate, "masking_rate", masking_rate, 0.15)
        max_predictions_per_seq = _keras_hub_name("mask_selection_length", mask_selection_length,
                                                  "max_predictions_per_seq", max_predictions_per_seq, None)
        for name, rate in (("mask_token_rate", mask_token_rate), ("random_token_rate", random_token_rate)):
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
                raise ValueError(f"`{name}` must be a float in [0, 1], got {rate!r}.")
        if mask_token_rate + random_token_rate > 1:
            raise ValueError(f"`mask_token_rate` + `random_token_rate` must be at most 1 (the rest stay as they are), "
                             f"got {mask_token_rate} + {random_token_rate}.")
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if not isinstance(tokenizer, BertTokenizer):
            raise ValueError(f"`tokenizer` must be a BertTokenizer, got {type(tokenizer).__name__}.")
        if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or sequence_length < 3:
            raise ValueError(f"`sequence_length` must be an int >= 3 ([CLS] text [SEP]), got {sequence_length!r}.")
        if isinstance(masking_rate, bool) or not isinstance(masking_rate, (int, float)) or not 0 < masking_rate < 1:
            raise ValueError(f"`masking_rate` must be a float in (0, 1), got {masking_rate!r}.")
        if max_predictions_per_seq is None:
            max_predictions_per_seq = min(sequence_length - 2, max(4, -(-round(sequence_length * masking_rate) // 4) * 4))
        if (isinstance(max_predictions_per_seq, bool) or not isinstance(max_predictions_per_seq, int)
                or not 1 <= max_predictions_per_seq <= sequence_length - 2):
            raise ValueError(
                f"`max_predictions_per_seq` must be an int in [1, sequence_length - 2 = {sequence_length - 2}], "
                f"got {max_predictions_per_seq!r}."
            )
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.masking_rate = float(masking_rate)
        self.max_predictions_per_seq = max_predictions_per_seq
        self.mask_token_rate = float(mask_token_rate)
        self.random_token_rate = float(random_token_rate)

    @classmethod
    def from_preset(cls, preset, sequence_length=128, **kwargs):
        """Preprocessor with the tokenizer of a preset name or checkpoint directory."""
        return cls(BertTokenizer.from_preset(preset), sequence_length=sequence_length, **kwargs)

    # === Raw text ===

    @staticmethod
    def is_raw_text(x):
        """A string, or a list / array of strings."""
        if isinstance(x, (str, bytes)):
            return True
        if isinstance(x, np.ndarray):
            return x.dtype.kind in ("U", "S", "O") and x.size > 0 and isinstance(x.flat[0], (str, bytes))
        return isinstance(x, (list, tuple)) and len(x) > 0 and isinstance(x[0], (str, bytes))

    def count_examples(self, x):
        """The number of rows `x` gives (a long text gives several)."""
        return int(self.rows(x).nrows())

    def rows(self, texts):
        """The rows of `texts`: ragged int32 `[rows, None]` of `[CLS] pieces [SEP]`, each text cut every
        `sequence_length - 2` pieces; a text without pieces (only white space) gives none."""
        texts = self._texts(texts)
        room = self.sequence_length - 2
        pieces = []
        for start in range(0, len(texts), _TOKENIZE_CHUNK):
            chunk = as_string_tensor(texts[start : start + _TOKENIZE_CHUNK], first_index=start)
            ids = self.tokenizer(chunk)
            pieces.append(ids.merge_dims(-2, -1) if ids.ragged_rank > 1 else ids)
        pieces = tf.concat(pieces, axis=0)
        lengths = pieces.row_lengths().numpy()
        # Each text's rows: full rows of `room` pieces, then the rest.
        rows_per_text = -(-lengths // room)
        row_lengths = np.minimum(room, np.repeat(lengths, rows_per_text) - _row_offsets(rows_per_text) * room)
        if not len(row_lengths):
            raise ValueError("No examples: every text is empty (no WordPiece pieces).")
        chunks = tf.RaggedTensor.from_row_lengths(pieces.flat_values, row_lengths.astype("int64"))
        count = chunks.nrows()
        cls = tf.fill([count, 1], tf.constant(self.tokenizer.cls_token_id, chunks.dtype))
        sep = tf.fill([count, 1], tf.constant(self.tokenizer.sep_token_id, chunks.dtype))
        return tf.cast(tf.concat([cls, chunks, sep], axis=1), tf.int32)

    def _texts(self, texts):
        """`texts` as a list of strings (or of scalar string tensors); refuses, in one line, what would be read
        wrongly: a symbolic tensor (inside `tf.data.Dataset.map`), or sentence pairs."""
        if isinstance(texts, tf.Tensor) and not tf.executing_eagerly():
            error = ValueError(
                f"{type(self).__name__} cuts each text into rows of sequence_length - 2 = {self.sequence_length - 2} "
                "pieces (a long text gives several rows), so it is not a tf.data map function: pass the texts to "
                "preprocessor.make_dataset(texts, batch_size=...), which masks every batch anew, or to "
                "BertPretrainer.fit(texts)."
            )
            error.ag_pass_through = True  # AutoGraph (tf.data's map) raises it as it is, not in an "in user code" report
            raise error
        if isinstance(texts, (str, bytes)):
            return [texts]
        if isinstance(texts, (tf.Tensor, np.ndarray)) and len(texts.shape) == 0:
            return [texts]
        if isinstance(texts, (tf.Tensor, np.ndarray)) and len(texts.shape) > 1:
            self._pairs(texts)
        texts = list(texts)
        if not texts:
            raise ValueError("No examples: the list of texts is empty.")
        if not isinstance(texts[0], (str, bytes)) and len(getattr(texts[0], "shape", None) or ()) + isinstance(
                texts[0], (list, tuple)) > 0:
            self._pairs(texts)
        return texts

    def _pairs(self, texts):
        raise ValueError(
            f"{type(self).__name__} takes a string or a list of strings, each cut into rows; got {len(texts)} "
            "lists or tensors of texts (keras-hub's sentence pairs `(first, second)`): masked-LM rows here are one "
            "text each, so join each pair into one string (f'{a} {b}'), or pretrain with next-sentence pairs cut "
            "from documents: recipes/pretrain.py --train_files ..."
        )

    def encode_masked_texts(self, texts):
        """Texts with `[MASK]` written where a piece is missing -> one `[CLS] pieces [SEP]` id list per text.

        What `BertPretrainer.fill_mask` reads. The marker is matched as
        written, in capitals and before normalisation, as Hugging Face's
        tokenizers match special tokens; each `[MASK]` becomes one mask piece
        and the text around it is tokenized as usual. Neither truncated nor
        cut into rows.

        Example:
        >>> preprocessor = BertPretrainerPreprocessor.from_preset("all_minilm_l6_v2_en")
        >>> preprocessor.encode_masked_texts(["Paris is the [MASK] of France."])
        [[101, 3000, 2003, 1996, 103, 1997, 2605, 1012, 102]]
        """
        texts = as_list(texts)
        if not texts:
            raise ValueError("No examples: the list of texts is empty.")
        parts = []
        for index, text in enumerate(texts):
            if isinstance(text, bytes):
                text = text.decode("utf-8", errors="replace")
            if not isinstance(text, str):
                raise not_text_error(index, text)
            if MASK_TOKEN not in text:
                shown = repr(text) if len(repr(text)) <= 60 else repr(text)[:57] + "..."
                raise ValueError(
                    f"Text {index} has no {MASK_TOKEN}: {shown}; write {MASK_TOKEN} (in capitals) where the "
                    "missing piece goes."
                )
            parts.append(text.split(MASK_TOKEN))
        flat = [part for text_parts in parts for part in text_parts]
        pieces = []
        for start in range(0, len(flat), _TOKENIZE_CHUNK):
            pieces.extend(self.tokenizer(as_string_tensor(flat[start : start + _TOKENIZE_CHUNK])).to_list())
        rows, next_part = [], iter(pieces)
        for text_parts in parts:
            row = [self.tokenizer.cls_token_id, *next(next_part)]
            for _ in text_parts[1:]:
                row += [self.tokenizer.mask_token_id, *next(next_part)]
            rows.append(row + [self.tokenizer.sep_token_id])
        return rows

    def default_boundaries(self):
        """Length buckets for this `sequence_length`: 16, 32, 48, 64, 96, 128, ..."""
        return default_boundaries(self.sequence_length, **CLASSIFICATION_BUCKETS)

    def mask(self, token_ids, seed):
        """Masks a padded batch `[batch, width]` (0 = padding) with the stateless `[2]` `seed`: `(x, y, sample_weight)`.

        `x` holds `token_ids` (masked), `segment_ids` (zeros), `padding_mask` and `mask_positions`; `y`
        `{"mlm": mask_ids}`; `sample_weight` `{"mlm": ...}`, each real prediction weighted so that the loss is the
        mean over the batch's real masked pieces (as `recipes/pretrain.py` weights them).
        """
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(token_ids, self.tokenizer.pad_token_id), tf.int32), axis=1)
        masked = mask_batch(
            token_ids, lengths, seed, max_predictions_per_seq=self.max_predictions_per_seq,
            masking_rate=self.masking_rate, vocab_size=self.tokenizer.vocabulary_size(),
            mask_token_id=self.tokenizer.mask_token_id, mask_token_rate=self.mask_token_rate,
            random_token_rate=self.random_token_rate,
            special_token_ids=[self.tokenizer.cls_token_id, self.tokenizer.sep_token_id, self.tokenizer.pad_token_id],
            pad_token_id=self.tokenizer.pad_token_id,
        )
        x = {"token_ids": masked["token_ids"], "segment_ids": tf.zeros_like(masked["token_ids"]),
             "padding_mask": masked["padding_mask"], "mask_positions": masked["mask_positions"]}
        return x, {"mlm": masked["mask_ids"]}, {"mlm": tf.cast(masked["mask_weights"], tf.float32)}

    def call(self, x, seed=(0, 0)):
        """Raw text -> one masked batch `(x, y, sample_weight)` of all its rows, padded to `sequence_length`."""
        rows = self.rows(x)
        return self.mask(rows.to_tensor(self.tokenizer.pad_token_id, shape=[None, self.sequence_length]),
                         tf.constant(seed, tf.int64))

    # === Batches ===

    def make_dataset(self, x, y=None, sample_weight=None, batch_size=32, shuffle=False, seed=None, boundaries=None,
                     fixed_batch_size=True):
        """Raw text -> a `tf.data.Dataset` of masked, length-bucketed batches `(x, y, sample_weight)` of known length.

        With `shuffle` (training) the rows are shuffled each epoch, grouped by
        length bucket, and every batch gets new masks each time it is drawn
        (dynamic masking); `seed` makes both repeatable. Without it (evaluation)
        the order is kept and the masks are the same on every pass, so two
        evaluations score the same predictions. Every batch has `batch_size`
        rows: the missing ones are copies of the first with weight 0.

        Args:
            x: a string or a list of strings (sentences, paragraphs or whole documents).
            y, sample_weight: must be None: the masks are the labels.
            batch_size: int, rows per batch.
            shuffle: shuffle, bucket by length and re-draw the masks each epoch (training).
            seed: an int for repeatable order and masks, or None.
            boundaries: bucket boundaries, kept as given; default `default_boundaries()`, sparse buckets merged
                (`merge_sparse_buckets`: fewer step shapes for a small dataset).
            fixed_batch_size: fill each last, partial batch to `batch_size` rows (weight 0) for one step
                shape per bucket; False: a short last batch (what losses and metrics that count every
                row need: `Task` asks for it when compiled with other than the default loss and metrics).
        """
        if isinstance(x, tf.data.Dataset):
            raise ValueError(
                "BertPretrainer reads raw text as a string or a list of strings; for a tf.data pipeline of "
                "documents use keras_bert_impl.data.pretraining_dataset (recipes/pretrain.py)."
            )
        if y is not None or sample_weight is not None:
            raise ValueError("Masked-LM pretraining makes its own labels (the masked pieces): pass the texts alone.")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}.")
        given = boundaries is not None
        boundaries = list(boundaries) if given else self.default_boundaries()
        if boundaries[-1] < self.sequence_length:
            boundaries.append(self.sequence_length)
        rows = self.rows(x)
        lengths = rows.row_lengths().numpy()
        if not given:  # (a small dataset: fewer step shapes)
            boundaries = merge_sparse_buckets(boundaries, lengths, batch_size)
        dataset = tf.data.Dataset.from_tensor_slices({"token_ids": rows})
        if shuffle:
            dataset = dataset.shuffle(len(lengths), seed=seed, reshuffle_each_iteration=True)

        def mask_each_batch(batches):
            # One stateless seed per batch: new every epoch in training, the same every pass in evaluation.
            seeds = tf.data.Dataset.random(seed=0 if seed is None and not shuffle else seed,
                                           rerandomize_each_iteration=bool(shuffle)).batch(2)
            return tf.data.Dataset.zip((batches, seeds)).map(
                lambda batch, pair: self.mask(batch["token_ids"], pair), num_parallel_calls=tf.data.AUTOTUNE)

        dataset = batches_by_length(dataset, lengths, batch_size, boundaries, grouped=bool(shuffle), label_fill_value=0,
                                    feature_padding_value=self.tokenizer.pad_token_id, transform_batches=mask_each_batch,
                                    fill=fixed_batch_size)
        # After the filling: the filler rows' predictions (weight 0) count in Keras's mean, so rescale over real ones.
        return dataset.map(_mean_over_real_predictions)

    def get_config(self):
        return {
            **super().get_config(),
            "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
            "sequence_length": self.sequence_length,
            "masking_rate": self.masking_rate,
            "max_predictions_per_seq": self.max_predictions_per_seq,
            "mask_token_rate": self.mask_token_rate,
            "random_token_rate": self.random_token_rate,
        }


def _keras_hub_name(keras_hub, given, ours, value, default):
    """`value`, or the value given under keras-hub's name; both given, and different: one line."""
    if given is None:
        return value
    if value != default and value != given:
        raise ValueError(f"`{keras_hub}` is keras-hub's name of `{ours}`: give one of them, not {keras_hub}={given!r} "
                         f"and {ours}={value!r}.")
    return given


def _row_offsets(rows_per_text):
    """For each row, its index within its text: [0, 1, 2, 0, 1, ...]."""
    total = int(rows_per_text.sum())
    starts = np.repeat(np.cumsum(rows_per_text) - rows_per_text, rows_per_text)
    return np.arange(total) - starts


def _mean_over_real_predictions(x, y, sample_weight):
    # Keras divides the weighted sum by the number of slots: rescale so the loss is the mean over the real ones.
    weights = sample_weight["mlm"]
    slots = tf.cast(tf.size(weights), tf.float32)
    return x, y, {"mlm": weights * (slots / tf.maximum(tf.reduce_sum(weights), 1.0))}
