"""Length-bucketed batches from NumPy arrays, without TensorFlow: `LengthBucketedBatches`.

The tf.data pipelines (`keras_bert_impl.data.glue.make_dataset`,
`keras_bert_impl.training.finetuning.bucket_by_length`) need TensorFlow. On a
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

Backends: made for JAX and PyTorch, whose Keras trainers take each NumPy
batch as it comes. On the TensorFlow backend Keras turns a `PyDataset` into
a `tf.data` generator whose batch shape is fixed from the first two batches,
so batches of other widths fail there; with TensorFlow use the tf.data
equivalent, `keras_bert_impl.training.finetuning.bucket_by_length` (or a
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

from keras_bert_impl.training.finetuning import _check_boundaries


class LengthBucketedBatches(keras.utils.PyDataset):
    """Dynamic padding by length buckets for tokenized NumPy examples (no tf.data).

    Args:
        features: dict name -> sequence of 1-D int arrays, one per example, all
            names of one example the same length (e.g. `token_ids`,
            `segment_ids`, `padding_mask`), or a `(ids, offsets)` pair per
            name, see `from_flat`.
        labels: None (prediction) or an array with one label per example.
        batch_size: examples per batch.
        boundaries: strictly increasing bucket upper bounds; the last is the
            longest allowed example (e.g. `glue.default_boundaries(128)`).
        shuffle: training order (a new permutation per epoch, bucketed) if
            True; input order padded per batch if False.
        seed: seed of the permutations.
        fixed_batch_size: fill every batch to `batch_size` rows (see the
            module docstring).
        length_key: the feature whose length decides the bucket.
        padding_value: value of padded feature positions.
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
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive int, got {batch_size!r}.")
        boundaries = _check_boundaries(boundaries)  # the tf.data helpers' validation (pure Python)
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
                f"boundary {boundaries[-1]}: truncate it (max_seq_length) first."
            )
        self.labels = None if labels is None else np.asarray(labels)
        if self.labels is not None and len(self.labels) != self.num_examples:
            raise ValueError(f"{len(self.labels)} labels for {self.num_examples} examples.")
        self.batch_size = batch_size
        self.boundaries = boundaries
        self.shuffle = shuffle
        self.fixed_batch_size = fixed_batch_size
        self.padding_value = padding_value
        self._bucket_of = np.searchsorted(np.array(boundaries), self.lengths, side="left")
        self._rng = np.random.default_rng(seed)
        self._batches = self._plan()

    @classmethod
    def from_flat(cls, flat_features, offsets, **kwargs):
        """Builds from concatenated tokens: `flat_features[name][offsets[i]:offsets[i + 1]]` is example i.

        The compact form to store tokenized splits in one `.npz` file.
        """
        offsets = np.asarray(offsets)
        features = {
            name: [values[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
            for name, values in flat_features.items()
        }
        return cls(features, **kwargs)

    def _plan(self):
        """The epoch's batches: lists of example indices and the length each is padded to."""
        if not self.shuffle:
            batches = []
            for start in range(0, self.num_examples, self.batch_size):
                index = np.arange(start, min(start + self.batch_size, self.num_examples))
                longest = int(self.lengths[index].max())
                batches.append((index, self.boundaries[int(np.searchsorted(self.boundaries, longest))]))
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
        weights = np.concatenate([np.ones(rows, np.float32), np.zeros(total - rows, np.float32)])
        if self.labels is None:
            return (features,)
        labels = self.labels[fill].copy()
        labels[rows:] = 0
        return features, labels, weights
