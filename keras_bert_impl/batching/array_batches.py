"""Length-bucketed batches from NumPy arrays, without TensorFlow: `LengthBucketedBatches`.

The tf.data pipelines (`keras_bert_impl.tasks.classification.batches.make_dataset`,
`keras_bert_impl.batching.tf_batches.bucket_by_length`) need TensorFlow. On a
JAX- or PyTorch-only host (a GPU box with `KERAS_BACKEND=jax`, say) the same
dynamic padding comes from this `keras.utils.PyDataset`: it takes examples
that are already tokenized (variable-length 1-D int arrays per example) and
yields `(features, labels, sample_weights)` batches that `model.fit`,
`model.predict` and `keras_bert_impl.training.finetuning.finetune` take on
every backend.

Training (`shuffle=True`): every epoch the examples are permuted (a seeded
generator, a new order each epoch), walked in that order and dropped into
the bucket of the first boundary >= their length; a bucket that holds
`batch_size` examples becomes a batch padded to its boundary, and the
partial buckets left at the end of the epoch become the last batches. This
is what `bucket_by_length` does with tf.data's `group_by_window`.

Evaluation (`shuffle=False`): batches keep the input order and are padded to
the smallest boundary that holds their longest example (`pad_to_boundaries`).

With `fixed_batch_size=True` every batch has exactly `batch_size` rows (so a
compiled step sees one shape per boundary): the missing rows copy the
batch's first example and get label 0 and sample weight 0, as
`glue.make_dataset(fixed_batch_size=True)` does; the classifier's loss and
weighted metrics then ignore them. For prediction keep the first `len(...)`
outputs (`num_examples`).

Labels come in three forms:

- one label per example, a 1-D array (GLUE classification/regression);
- a dict of such arrays, one per model output (SQuAD's
  `{"start_logits": ..., "end_logits": ...}`);
- one label per token, a sequence of 1-D arrays as long as the examples
  (CoNLL's word labels, -1 off the first pieces); padded positions get
  `label_fill_value`.

With `label_fill_value` set (required for the last two forms) the filler
rows are labelled `label_fill_value` (e.g. -1, which `SpanLoss` and the
token classifier's loss ignore) and batches are `(features, labels)`
without sample weights, as `fill_batches(..., label_fill_value=-1)` gives
for SQuAD and CoNLL.

Backends: made for JAX and PyTorch, whose Keras trainers take each NumPy
batch as it comes. On the TensorFlow backend Keras turns a `PyDataset` into
a `tf.data` generator whose batch shape is fixed from the first two batches,
so batches of other widths fail there; with TensorFlow use the tf.data
equivalent, `keras_bert_impl.batching.tf_batches.bucket_by_length` (or a
task's `make_dataset`), which this class mirrors.

Example:
>>> import numpy as np
>>> token_ids = [np.arange(1, n + 1) for n in (3, 20, 5, 40, 7)]
>>> batches = LengthBucketedBatches({"token_ids": token_ids}, labels=np.array([0, 1, 0, 1, 1]),
...                                 batch_size=2, boundaries=[16, 32, 64], shuffle=False)
>>> [(x["token_ids"].shape, y.tolist(), w.tolist()) for x, y, w in (batches[i] for i in range(len(batches)))]
[((2, 32), [0, 1], [1.0, 1.0]), ((2, 64), [0, 1], [1.0, 1.0]), ((2, 16), [1, 0], [1.0, 0.0])]
"""

import keras
import numpy as np

from keras_bert_impl.batching.boundaries import bucket_indices, check_boundaries


class LengthBucketedBatches(keras.utils.PyDataset):
    """Dynamic padding by length buckets for tokenized NumPy examples (no tf.data).

    Args:
        features: dict name -> sequence of 1-D int arrays, one per example, all
            names of one example the same length (e.g. `token_ids`,
            `segment_ids`, `padding_mask`), or a `(ids, offsets)` pair per
            name, see `from_flat`.
        labels: None (prediction); an array with one label per example; a
            dict of such arrays (one per model output); or a sequence of
            1-D arrays, one label per token of each example.
        batch_size: examples per batch.
        boundaries: strictly increasing bucket upper bounds; the last is the
            longest allowed example (e.g. `glue.default_boundaries(128)`).
        shuffle: training order (a new permutation per epoch) if True;
            input order padded per batch if False.
        group_by_length: with `shuffle`, batch examples of one length bucket
            together (least padding, `bucket_by_length`); False gives random
            batches, each padded to the bucket of its longest example (the
            CoNLL default, see `conll.make_dataset`).
        seed: seed of the permutations.
        fixed_batch_size: fill every batch to `batch_size` rows (see the
            module docstring).
        length_key: the feature whose length decides the bucket.
        padding_value: value of padded feature positions.
        label_fill_value: None (filler rows get label 0 and sample weight 0;
            batches are `(features, labels, weights)`), or the label of
            filler rows and padded token positions (batches are
            `(features, labels)`); required for dict and per-token labels.
    """

    def __init__(
        self,
        features,
        labels=None,
        batch_size=32,
        boundaries=(32, 64, 128),
        shuffle=False,
        seed=0,
        fixed_batch_size=True,
        length_key="token_ids",
        padding_value=0,
        group_by_length=True,
        label_fill_value=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}.")
        boundaries = check_boundaries(boundaries)  # the tf.data helpers' validation (pure Python)
        if length_key not in features:
            raise ValueError(f"`length_key` {length_key!r} is not a feature; features are {sorted(features)}.")
        self.features = {name: list(values) for name, values in features.items()}
        self.num_examples = len(self.features[length_key])
        self.lengths = np.array([len(x) for x in self.features[length_key]], dtype=np.int64)
        for name, values in self.features.items():
            if len(values) != self.num_examples:
                raise ValueError(f"feature {name!r} has {len(values)} examples, {length_key!r} has {self.num_examples}.")
            mismatched = [i for i, x in enumerate(values) if len(x) != self.lengths[i]]
            if mismatched:
                raise ValueError(
                    f"example {mismatched[0]}: feature {name!r} has length {len(values[mismatched[0]])}, "
                    f"{length_key!r} has {self.lengths[mismatched[0]]}; features of one example must be equally long."
                )
        too_long = np.flatnonzero(self.lengths > boundaries[-1])
        if too_long.size:
            raise ValueError(
                f"example {int(too_long[0])} has {int(self.lengths[too_long[0]])} tokens, more than the last "
                f"boundary {boundaries[-1]}: truncate it (sequence_length) first."
            )
        self.label_fill_value = label_fill_value
        self.labels, self._label_kind = self._check_labels(labels)
        self.batch_size = batch_size
        self.boundaries = boundaries
        self.shuffle = shuffle
        self.fixed_batch_size = fixed_batch_size
        self.padding_value = padding_value
        self.group_by_length = group_by_length
        self._bucket_of = bucket_indices(self.lengths, boundaries)
        self._rng = np.random.default_rng(seed)
        self._batches = self._plan()

    def _check_labels(self, labels):
        """`(labels, kind)`: kind is None, "example", "dict" or "token"; errors name what is wrong."""
        if labels is None:
            return None, None
        if isinstance(labels, dict):
            if self.label_fill_value is None:
                raise ValueError("dict labels need `label_fill_value` (e.g. -1) for the filler rows.")
            checked = {}
            for name, values in labels.items():
                values = np.asarray(values)
                if values.ndim != 1 or len(values) != self.num_examples:
                    raise ValueError(
                        f"labels[{name!r}] must be 1-D with one label per example ({self.num_examples}), "
                        f"got shape {values.shape}."
                    )
                checked[name] = values
            return checked, "dict"
        if isinstance(labels, np.ndarray) and labels.dtype != object:
            if labels.ndim != 1:
                raise ValueError(
                    f"array labels must be 1-D (one per example), got shape {labels.shape}; per-token labels "
                    "are a list of 1-D arrays, one per example."
                )
            if len(labels) != self.num_examples:
                raise ValueError(f"{len(labels)} labels for {self.num_examples} examples.")
            return labels, "example"
        labels = list(labels)
        if len(labels) != self.num_examples:
            raise ValueError(f"{len(labels)} labels for {self.num_examples} examples.")
        if labels and np.ndim(labels[0]) == 0:
            return np.asarray(labels), "example"
        if self.label_fill_value is None:
            raise ValueError("per-token labels need `label_fill_value` (e.g. -1) for padding and filler rows.")
        labels = [np.asarray(x) for x in labels]
        mismatched = [i for i, x in enumerate(labels) if x.ndim != 1 or len(x) != self.lengths[i]]
        if mismatched:
            i = mismatched[0]
            raise ValueError(
                f"example {i}: per-token labels have shape {labels[i].shape}, the example has "
                f"{self.lengths[i]} tokens; give one label per token."
            )
        return labels, "token"

    @classmethod
    def from_flat(cls, flat_features, offsets, token_labels=None, **kwargs):
        """Builds from concatenated tokens: `flat_features[name][offsets[i]:offsets[i + 1]]` is example i.

        The compact form to store tokenized splits in one `.npz` file.
        `token_labels` (flat, same offsets) gives per-token labels.
        """
        offsets = np.asarray(offsets)

        def split(values):
            return [values[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]

        features = {name: split(values) for name, values in flat_features.items()}
        if token_labels is not None:
            if "labels" in kwargs:
                raise ValueError("give `labels` or `token_labels`, not both.")
            kwargs["labels"] = split(np.asarray(token_labels))
        return cls(features, **kwargs)

    def _plan(self):
        """The epoch's batches: lists of example indices and the length each is padded to."""
        if not self.shuffle or not self.group_by_length:
            order = self._rng.permutation(self.num_examples) if self.shuffle else np.arange(self.num_examples)
            batches = []
            for start in range(0, self.num_examples, self.batch_size):
                index = order[start : start + self.batch_size]
                longest = int(self.lengths[index].max())
                batches.append((index, self.boundaries[int(bucket_indices([longest], self.boundaries)[0])]))
            return batches
        open_buckets = [[] for _ in self.boundaries]
        batches = []
        for i in self._rng.permutation(self.num_examples):
            bucket = self._bucket_of[i]
            open_buckets[bucket].append(i)
            if len(open_buckets[bucket]) == self.batch_size:
                batches.append((np.array(open_buckets[bucket]), self.boundaries[bucket]))
                open_buckets[bucket] = []
        for bucket, members in enumerate(open_buckets):
            if members:
                batches.append((np.array(members), self.boundaries[bucket]))
        return batches

    def __len__(self):
        return len(self._batches)

    def on_epoch_end(self):
        if self.shuffle:
            self._batches = self._plan()

    def __getitem__(self, index):
        members, width = self._batches[index]
        rows = len(members)
        total = self.batch_size if self.fixed_batch_size else rows
        fill = np.concatenate([members, np.full(total - rows, members[0])]).astype(np.int64)
        features = {}
        for name, values in self.features.items():
            array = np.full((total, width), self.padding_value, dtype=np.int32)
            for row, i in enumerate(fill):
                array[row, : self.lengths[i]] = values[i]
            features[name] = array
        if self.labels is None:
            return (features,)
        if self._label_kind == "token":
            labels = np.full((total, width), self.label_fill_value, dtype=np.int32)
            for row, i in enumerate(members):
                labels[row, : self.lengths[i]] = self.labels[i]
            return features, labels
        if self._label_kind == "dict":
            labels = {}
            for name, values in self.labels.items():
                labels[name] = values[fill].copy()
                labels[name][rows:] = self.label_fill_value
            return features, labels
        labels = self.labels[fill].copy()
        if self.label_fill_value is not None:
            labels[rows:] = self.label_fill_value
            return features, labels
        labels[rows:] = 0
        weights = np.concatenate([np.ones(rows, np.float32), np.zeros(total - rows, np.float32)])
        return features, labels, weights
