"""BERT pretraining batches in NumPy, from tokenised documents: for hosts without TensorFlow.

`pretraining_dataset` (tf.data + tensorflow-text) is the pipeline of the
recipes. A GPU machine that runs the JAX or torch backend may have no
TensorFlow at all; there, tokenise once on a machine that has it:

    python recipes/prepare_pretraining_data.py --input train.txt --vocab vocab.txt \\
        --output_prefix arrays/train --output_format npz

and read the `.npz` file (token ids, sentence and document lengths, and the
vocabulary) with `ArrayPretrainingBatches`, which needs NumPy only. It draws the
batches the way `pretraining_dataset` does:

```
documents (shuffled every epoch) -> groups of `documents_per_batch` documents
-> sentence pairs + NSP labels (`array_sentence_pairs`, the NumPy twin of `sentence_pairs`)
-> a buffer of `shuffle_buffer_size` examples, batches drawn from it at random
-> dynamic masking, 80/10/10 (`array_masking`, the twin of `masking`)
```

Every pass over the data draws new pairs and new masks; the same `seed` gives
the same batches. Held-out data passes `redraw_each_iteration=False`: every
iteration then gives the same batches. The pairing and masking steps are the TensorFlow pipeline's,
number for number (`tests/test_array_pretraining.py` feeds both the same random
numbers and compares the outputs); only the order of documents and examples
comes from NumPy's generator instead of tf.data's shuffle buffers. Whole-word
masking and sharding across input pipelines are not offered here: use
`pretraining_dataset` for those.

Example:

>>> import os, tempfile
>>> from keras_bert_impl.data.array_pretraining import ArrayPretrainingBatches, write_document_arrays
>>> path = os.path.join(tempfile.mkdtemp(), "docs.npz")
>>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(20)]
>>> documents = [[[5, 6, 7], [8, 9, 10, 11]], [[12, 13], [14, 15, 16]], [[17, 18, 19, 20]]]
>>> write_document_arrays(documents, vocabulary, path)
{'file': '...docs.npz', 'documents': 3, 'sentences': 5, 'tokens': 16}
>>> batches = ArrayPretrainingBatches(path, sequence_length=16, max_predictions_per_seq=3, batch_size=2, seed=0,
...                                   shuffle_buffer_size=4)
>>> batch = next(iter(batches))
>>> {name: value.shape for name, value in batch.items()}  # doctest: +NORMALIZE_WHITESPACE
{'token_ids': (2, 16), 'segment_ids': (2, 16), 'padding_mask': (2, 16), 'mask_positions': (2, 3),
 'mask_ids': (2, 3), 'mask_weights': (2, 3), 'next_sentence_labels': (2,)}
"""

import glob
import os
import zipfile

import numpy as np

from keras_bert_impl.checkpoints.atomic_files import atomic_save
from keras_bert_impl.data import array_masking, array_sentence_pairs
from keras_bert_impl.data.pipeline_arguments import check_pipeline_arguments
from keras_bert_impl.file_patterns import matching_files

ARRAY_SUFFIX = ".npz"
ARRAY_KEYS = ("token_ids", "sentence_lengths", "document_sentences", "vocabulary")
OUTPUT_KEYS = ("token_ids", "segment_ids", "padding_mask", "mask_positions", "mask_ids", "mask_weights",
               "next_sentence_labels")
SPECIAL_TOKENS = {"cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]", "pad": "[PAD]"}


def is_array_file(path):
    """True for the file names read as tokenised-document arrays."""
    return str(path).endswith(ARRAY_SUFFIX)


def write_document_arrays(documents, vocabulary, path):
    """Writes tokenised documents to one `.npz` file, atomically (a temporary name, then a rename).

    Args:
        documents: an iterable of documents, each a list of sentences, each a
            list of token ids.
        vocabulary: the token strings, in id order (stored in the file, so the
            reader needs no vocabulary file and cannot pair the ids with
            another vocabulary).
        path: the output file; it must end in `.npz`.

    Returns:
        A dict: `file`, `documents`, `sentences`, `tokens`.
    """
    path = os.fspath(path)
    if not is_array_file(path):
        raise ValueError(f"{path}: a document array file must end in {ARRAY_SUFFIX}")
    vocabulary = [str(token) for token in vocabulary]
    token_chunks, sentence_lengths, document_sentences = [], [], []
    for document in documents:
        document_sentences.append(len(document))
        for sentence in document:
            sentence_lengths.append(len(sentence))
            token_chunks.append(np.asarray(sentence, np.int64))
    token_ids = np.concatenate(token_chunks) if token_chunks else np.zeros([0], np.int64)
    if token_ids.size and (token_ids.min() < 0 or token_ids.max() >= len(vocabulary)):
        raise ValueError(f"{path}: token ids must be in [0, {len(vocabulary)}) (the vocabulary's size), "
                         f"got ids from {token_ids.min()} to {token_ids.max()}")
    dtype = np.uint16 if len(vocabulary) <= 1 << 16 else np.int32
    atomic_save(path, lambda temporary: np.savez_compressed(
        temporary, token_ids=token_ids.astype(dtype), sentence_lengths=np.asarray(sentence_lengths, np.int32),
        document_sentences=np.asarray(document_sentences, np.int32), vocabulary=np.asarray(vocabulary, dtype=str)))
    return {"file": path, "documents": len(document_sentences), "sentences": len(sentence_lengths),
            "tokens": int(token_ids.size)}


def read_document_arrays(path):
    """Reads and checks one file of `write_document_arrays`; errors name the file and what is wrong.

    Returns:
        A dict of arrays: `token_ids`, `sentence_lengths`, `document_sentences`
        and `vocabulary` (strings).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not a tokenised-document array file (.npz): not a zip archive")
    with np.load(path, allow_pickle=False) as data:
        missing = [key for key in ARRAY_KEYS if key not in data.files]
        if missing:
            raise ValueError(f"{path}: not a tokenised-document array file (written by "
                             f"recipes/prepare_pretraining_data.py --output_format npz): no {', '.join(missing)}")
        arrays = {key: data[key] for key in ARRAY_KEYS}
    tokens, sentences = int(arrays["sentence_lengths"].sum()), int(arrays["document_sentences"].sum())
    if tokens != arrays["token_ids"].size or sentences != arrays["sentence_lengths"].size:
        raise ValueError(f"{path}: inconsistent arrays: the sentence lengths add up to {tokens} tokens (the file "
                         f"holds {arrays['token_ids'].size}) and the documents to {sentences} sentences (the file "
                         f"holds {arrays['sentence_lengths'].size}); write it again")
    if arrays["token_ids"].size and int(arrays["token_ids"].max()) >= len(arrays["vocabulary"]):
        raise ValueError(f"{path}: token id {int(arrays['token_ids'].max())} is outside its vocabulary of "
                         f"{len(arrays['vocabulary'])} tokens; write it again")
    return arrays


def _expand(files):
    patterns = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    if not patterns:
        raise ValueError("files is empty: pass at least one .npz file of tokenised documents")
    paths = []
    for pattern in patterns:
        pattern = os.fspath(pattern)
        matches = matching_files(pattern) or ([] if glob.has_magic(pattern) else [pattern])  # (a missing file:
        # "no such file" when it is read)
        if not matches:
            raise ValueError(f"no file matches {pattern!r}")
        paths += matches
    return paths


class ArrayPretrainingBatches:
    """Masked BERT pretraining batches (NumPy dicts) from `.npz` files of tokenised documents.

    Args:
        files: `.npz` files (or glob patterns) written by `write_document_arrays`
            (`recipes/prepare_pretraining_data.py --output_format npz`), all with
            the same vocabulary.
        sequence_length: the static sequence length of every example.
        max_predictions_per_seq: the static number of masked-LM slots.
        batch_size: examples per batch.
        masking_rate: the expected fraction of non-special tokens masked.
        short_seq_prob: the probability of a shorter target length for a document.
        seed: an int for reproducible batches, or None.
        shuffle: shuffle documents (every epoch) and examples.
        repeat: repeat forever; with False one pass over the documents (the
            examples left over that do not fill a batch are dropped).
        nsp: sentence pairs with `next_sentence_labels` (True) or single
            segments for MLM only (False).
        documents_per_batch: documents paired together; NotNext segments come
            from other documents of the same group.
        shuffle_buffer_size: examples drawn from at random.
        redraw_each_iteration: True (training): each new iteration continues
            the same random streams, so it draws new pairs and masks. False
            (held-out data): each iteration starts the streams from `seed`
            again, so every iteration gives the same batches (as
            `pretraining_dataset(redraw_each_iteration=False)`).

    Iterating yields dicts of int32 arrays with the keys and shapes of
    `pretraining_dataset`'s batches.
    """

    def __init__(self, files, *, sequence_length=128, max_predictions_per_seq=20, batch_size=32, masking_rate=0.15,
                 short_seq_prob=0.1, seed=None, shuffle=True, repeat=True, nsp=True, documents_per_batch=16,
                 shuffle_buffer_size=2048, redraw_each_iteration=True):
        check_pipeline_arguments(
            sequence_length=sequence_length, max_predictions_per_seq=max_predictions_per_seq, batch_size=batch_size,
            masking_rate=masking_rate, short_seq_prob=short_seq_prob, nsp=nsp,
            documents_per_batch=documents_per_batch, shuffle_buffer_size=shuffle_buffer_size)
        self.files = _expand(files)
        parts = [read_document_arrays(path) for path in self.files]
        self.vocabulary = [str(token) for token in parts[0]["vocabulary"]]
        for path, part in zip(self.files[1:], parts[1:]):
            if len(part["vocabulary"]) != len(self.vocabulary) or any(
                    a != b for a, b in zip(part["vocabulary"], self.vocabulary)):
                raise ValueError(f"{path}: written with another vocabulary than {self.files[0]}; "
                                 "tokenise every file with the vocabulary of the model")
        index = {token: i for i, token in enumerate(self.vocabulary)}
        missing = [token for token in SPECIAL_TOKENS.values() if token not in index]
        if missing:
            raise ValueError(f"{self.files[0]}: the vocabulary has no {', '.join(missing)} token")
        self.special_ids = {name: index[token] for name, token in SPECIAL_TOKENS.items()}
        self.token_ids = np.concatenate([p["token_ids"] for p in parts]).astype(np.int32)
        self.sentence_lengths = np.concatenate([p["sentence_lengths"] for p in parts]).astype(np.int64)
        document_sentences = np.concatenate([p["document_sentences"] for p in parts]).astype(np.int64)
        if not document_sentences.size or not self.token_ids.size:
            raise ValueError(f"{', '.join(self.files)}: no tokens to pretrain on")
        self.num_documents = len(document_sentences)
        self._first_sentence = np.concatenate([[0], np.cumsum(document_sentences)])
        self._first_token = np.concatenate([[0], np.cumsum(self.sentence_lengths)])
        self.sequence_length, self.max_predictions_per_seq, self.batch_size = (
            sequence_length, max_predictions_per_seq, batch_size)
        self.masking_rate, self.short_seq_prob, self.nsp = masking_rate, short_seq_prob, nsp
        self.shuffle, self.repeat = shuffle, repeat
        self.documents_per_batch, self.shuffle_buffer_size = documents_per_batch, shuffle_buffer_size
        self.redraw_each_iteration = redraw_each_iteration
        self._entropy = np.random.SeedSequence(seed).entropy  # seed None: drawn once, kept for every iteration
        self._generators = self._new_generators()

    def _new_generators(self):
        """The order, pair, pick and mask generators, started from the seed."""
        streams = np.random.SeedSequence(self._entropy).spawn(4)
        return tuple(np.random.default_rng(stream) for stream in streams)

    def vocabulary_size(self):
        return len(self.vocabulary)

    def _document_stream(self, order_rng):
        while True:
            order = order_rng.permutation(self.num_documents) if self.shuffle else np.arange(self.num_documents)
            yield from order
            if not self.repeat:
                return

    def _group_examples(self, group, pair_rng):
        group = np.asarray(group, np.int64)
        sentence_ranges = [np.arange(self._first_sentence[d], self._first_sentence[d + 1]) for d in group]
        sentences = np.concatenate(sentence_ranges)
        token_ranges = [np.arange(self._first_token[s[0]], self._first_token[s[-1] + 1]) if len(s) else
                        np.zeros([0], np.int64) for s in sentence_ranges]
        return array_sentence_pairs.documents_to_examples(
            self.token_ids[np.concatenate(token_ranges)], self.sentence_lengths[sentences],
            np.repeat(np.arange(len(group)), [len(s) for s in sentence_ranges]), group,
            array_sentence_pairs.GeneratorDraws(pair_rng), sequence_length=self.sequence_length,
            short_seq_prob=self.short_seq_prob, nsp=self.nsp, cls_token_id=self.special_ids["cls"],
            sep_token_id=self.special_ids["sep"], pad_token_id=self.special_ids["pad"])

    def _mask(self, examples, mask_rng):
        outputs = array_masking.mask_batch(
            examples["token_ids"], examples["lengths"], array_sentence_pairs.GeneratorDraws(mask_rng),
            max_predictions_per_seq=self.max_predictions_per_seq, masking_rate=self.masking_rate,
            vocab_size=self.vocabulary_size(), mask_token_id=self.special_ids["mask"],
            special_token_ids=[self.special_ids[k] for k in ("cls", "sep", "pad")],
            pad_token_id=self.special_ids["pad"])
        outputs["segment_ids"] = examples["segment_ids"]
        if self.nsp:
            outputs["next_sentence_labels"] = examples["next_sentence_labels"]
        return {key: outputs[key] for key in OUTPUT_KEYS if key in outputs}

    def __iter__(self):
        generators = self._generators if self.redraw_each_iteration else self._new_generators()
        return self._batches(*generators)

    def _batches(self, order_rng, pair_rng, pick_rng, mask_rng):
        documents = self._document_stream(order_rng)
        pool, exhausted = None, False
        while True:
            size = 0 if pool is None else len(pool["lengths"])
            while not exhausted and size < self.shuffle_buffer_size + self.batch_size:
                group = [d for _, d in zip(range(self.documents_per_batch), documents)]
                if not group:
                    exhausted = True
                    break
                examples = self._group_examples(group, pair_rng)
                pool = examples if pool is None else {k: np.concatenate([pool[k], v]) for k, v in examples.items()}
                size = len(pool["lengths"])
            if size < self.batch_size:
                return
            if self.shuffle:
                taken = pick_rng.choice(size, self.batch_size, replace=False)
            else:
                taken = np.arange(self.batch_size)
            keep = np.ones(size, bool)
            keep[taken] = False
            batch = {k: v[taken] for k, v in pool.items()}
            pool = {k: v[keep] for k, v in pool.items()}
            yield self._mask(batch, mask_rng)
