"""Step 2, features: CoNLL sentences -> WordPiece model windows with one label per word, and back.

- `encode_examples(sentences, tokenizer, label_names, sequence_length)`:
  WordPiece-tokenises every word and builds model windows
  `[CLS] pieces... [SEP]` (with `keras_bert_impl.text.word_windows`, the
  builder `BertTokenClassifier.fit(words, tags)` uses too). A word's label goes on its first piece; the other
  pieces, the special tokens, padding and context carry label -1 (ignored by
  the loss and the metric: BERT paper section 4.3). A sentence whose pieces do
  not fit is split into several windows over whole words (every word is
  labelled in exactly one window; nothing is dropped). With
  `document_context=True` the room left in a window is filled with the
  neighbouring words of the same document (left and right, alternately),
  labels only on the centre sentence. A single word with more pieces than fit
  is cut to its first pieces (its label stays on the first piece; counted in
  `ConllFeatures.num_truncated_words`), or, with `long_word="error"`, raises.
- `word_label_ids(features, token_label_ids, sentences)`: the inverse: token
  labels (e.g. argmax of the model's logits) back to one label per word.
"""

import dataclasses
import itertools
import logging

import numpy as np

from keras_bert_impl.tasks.tagging.reading import IGNORE_LABEL, ConllSentence  # noqa: F401 (doctests)
from keras_bert_impl.text.word_windows import first_piece_windows, pad_windows, window_labels

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class ConllFeatures:
    """Model windows of a list of sentences (NumPy arrays), as built by `encode_examples`.

    Attributes:
        token_ids, segment_ids, padding_mask: int32 `(num_windows, sequence_length)`.
        labels: int32 `(num_windows, sequence_length)`, the label id on the
            first piece of each labelled word, -1 elsewhere.
        sentence_index: int32 `(num_windows,)`, the sentence each window labels.
        word_index: int32 `(num_windows, sequence_length)`, the index (in its
            sentence) of the word whose first piece is at this position, -1 elsewhere.
        lengths: int32 `(num_windows,)`, tokens before padding.
        num_truncated_words: words cut to fit a window (see `encode_examples`).
        num_split_sentences: sentences that needed more than one window.
    """

    token_ids: np.ndarray
    segment_ids: np.ndarray
    padding_mask: np.ndarray
    labels: np.ndarray
    sentence_index: np.ndarray
    word_index: np.ndarray
    lengths: np.ndarray
    num_truncated_words: int = 0
    num_split_sentences: int = 0

    def __len__(self):
        return len(self.sentence_index)


def tokenize_words(tokenizer, words):
    """WordPiece ids of each word: `tokenizer(words)` -> list of lists of ints.

    `tokenizer` is a `keras_bert_impl.text.tokenizer.BertTokenizer` (or any
    callable mapping a list of strings to a ragged `[words, pieces]` or
    `[words, sub-words, pieces]` tensor, or to a list of id lists).
    """
    if not words:
        return []
    output = tokenizer(list(words))
    if hasattr(output, "to_list"):
        import tensorflow as tf

        if isinstance(output, tf.RaggedTensor) and output.shape.rank == 3:
            output = output.merge_dims(1, 2)
        return [list(map(int, ids)) for ids in output.to_list()]
    return [list(map(int, ids)) for ids in output]


def _special_id(tokenizer, name, token):
    value = getattr(tokenizer, f"{name}_token_id", None)
    if value is None:
        raise ValueError(
            f"The tokenizer has no `{name}_token_id` (the id of {token}); pass a BertTokenizer."
        )
    return int(value)


def encode_examples(
    sentences,
    tokenizer,
    label_names,
    sequence_length=128,
    document_context=False,
    long_word="truncate",
    word_pieces=None,
):
    """Builds model windows for `sentences`, labels on each word's first WordPiece.

    Args:
        sentences: list of `ConllSentence` (e.g. from `read_conll`).
        tokenizer: a `BertTokenizer` (`cls_token_id`, `sep_token_id`,
            `pad_token_id`, `unk_token_id` and `tokenizer(list_of_words)`).
        label_names: list of tag strings; label id = index. A tag not in it is
            an error naming file and line.
        sequence_length: int >= 3, tokens per window including [CLS] and [SEP].
        document_context: fill each window with neighbouring words of the same
            document (labels only on the centre sentence).
        long_word: `"truncate"` (a single word with more than
            `sequence_length - 2` pieces keeps its first pieces; logged) or
            `"error"`.
        word_pieces: optional precomputed `tokenize_words` output for all
            words of `sentences` in order (saves tokenising twice).

    Returns:
        `ConllFeatures`.

    Example:
    >>> from keras_bert_impl.text.tokenizer import BertTokenizer  # doctest: +SKIP
    >>> tok = BertTokenizer.from_preset("all_minilm_l6_v2_en")  # doctest: +SKIP
    >>> f = encode_examples([ConllSentence(["EU", "rejects"], ["B-ORG", "O"])],
    ...                      tok, ["O", "B-ORG", "I-ORG"], 16)  # doctest: +SKIP
    >>> f.labels[0, :5].tolist()  # doctest: +SKIP
    [-1, 1, 0, -1, -1]
    """
    if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or sequence_length < 3:
        raise ValueError(f"`sequence_length` must be an int >= 3 ([CLS] word [SEP]), got {sequence_length!r}.")
    if long_word not in ("truncate", "error"):
        raise ValueError(f"`long_word` must be 'truncate' or 'error', got {long_word!r}.")
    label_ids = {name: i for i, name in enumerate(label_names)}
    cls_id = _special_id(tokenizer, "cls", "[CLS]")
    sep_id = _special_id(tokenizer, "sep", "[SEP]")
    pad_id = _special_id(tokenizer, "pad", "[PAD]")
    unk_id = getattr(tokenizer, "unk_token_id", None)
    budget = sequence_length - 2

    all_words = [w for s in sentences for w in s.words]
    if word_pieces is None:
        word_pieces = tokenize_words(tokenizer, all_words)
    if len(word_pieces) != len(all_words):
        raise ValueError(f"`word_pieces` has {len(word_pieces)} entries for {len(all_words)} words.")

    # Pieces of every word, sentence by sentence.
    sentence_pieces, offset, num_truncated = [], 0, 0
    for s in sentences:
        pieces = []
        for i, ids in enumerate(word_pieces[offset : offset + len(s.words)]):
            if not ids:
                if unk_id is None:
                    raise ValueError(f"{s.location(i)}: word {s.words[i]!r} has no WordPiece; tokenizer lacks unk_token_id.")
                ids = [int(unk_id)]
            if len(ids) > budget:
                if long_word == "error":
                    raise ValueError(
                        f"{s.location(i)}: the word {s.words[i][:50]!r} has {len(ids)} WordPieces, more than fit "
                        f"a window of sequence_length={sequence_length} ({budget} after [CLS] and [SEP]). "
                        f"Raise sequence_length or use long_word='truncate'."
                    )
                logger.warning(
                    "%s: word %r has %d WordPieces; keeping the first %d (sequence_length=%d); its label stays on the first.",
                    s.location(i), s.words[i][:50], len(ids), budget, sequence_length,
                )
                ids = ids[:budget]
                num_truncated += 1
            pieces.append(ids)
        offset += len(s.words)
        sentence_pieces.append(pieces)
        for i, tag in enumerate(s.tags):
            if tag not in label_ids:
                raise ValueError(f"{s.location(i)}: tag {tag!r} is not in the label set {list(label_names)}.")

    # The context stream of each sentence: its document (document_context) or itself.
    streams = []  # per sentence: (list of piece lists of the stream, index of the sentence's first word in it)
    if document_context:
        for _, group in itertools.groupby(range(len(sentences)), key=lambda i: (sentences[i].path, sentences[i].document_index)):
            group = list(group)
            stream = [p for i in group for p in sentence_pieces[i]]
            start = 0
            for i in group:
                streams.append((stream, start))
                start += len(sentence_pieces[i])
    else:
        streams = [(pieces, 0) for pieces in sentence_pieces]

    windows = first_piece_windows(sentence_pieces, sequence_length, cls_id, sep_id, contexts=streams)
    token_ids, padding_mask, word_index = pad_windows(windows, sequence_length, pad_id)
    sentence_index = np.array([w.sentence for w in windows], np.int32)
    num_split = int(np.sum(np.bincount(sentence_index, minlength=len(sentences)) > 1)) if windows else 0
    features = ConllFeatures(
        token_ids=token_ids,
        segment_ids=np.zeros_like(token_ids),
        padding_mask=padding_mask,
        labels=window_labels(windows, [[label_ids[tag] for tag in s.tags] for s in sentences], width=sequence_length),
        sentence_index=sentence_index,
        word_index=word_index,
        lengths=np.array([len(w.token_ids) for w in windows], np.int32),
        num_truncated_words=num_truncated,
        num_split_sentences=num_split,
    )
    if num_split:
        logger.info("%d sentences longer than sequence_length=%d were split into several windows.", num_split, sequence_length)
    return features


encode_sentences = encode_examples  # the step's earlier name, still taken (tasks/old_keywords.py)


def word_label_ids(features, token_label_ids, sentences):
    """Token-level label ids back to one label id per word (the label at the word's first piece).

    Args:
        features: the `ConllFeatures` the predictions were made on.
        token_label_ids: int array `(num_windows, width)` (e.g. argmax of the
            logits; `width` may be smaller than `sequence_length` when batches
            were padded only to their length bucket, but not smaller than a
            window's length), or a list of per-window arrays.
        sentences: the sentences `features` were encoded from.

    Returns:
        list (per sentence) of lists of int label ids.

    Raises:
        ValueError: a word received no label or two labels (windows and
            sentences do not match).

    Example:
    >>> f = ConllFeatures(token_ids=None, segment_ids=None, padding_mask=None, labels=None,
    ...                   sentence_index=np.array([0]), word_index=np.array([[-1, 0, -1, 1, -1]]),
    ...                   lengths=np.array([5]))
    >>> word_label_ids(f, np.array([[9, 2, 9, 0, 9]]), [ConllSentence(["EU", "rejects"], ["B-ORG", "O"])])
    [[2, 0]]
    """
    result = [[None] * len(s.words) for s in sentences]
    for row, sentence in enumerate(features.sentence_index):
        predicted = np.asarray(token_label_ids[row])
        positions = np.nonzero(features.word_index[row] >= 0)[0]
        if len(positions) and positions[-1] >= len(predicted):
            raise ValueError(f"Window {row} has labelled position {positions[-1]} but only {len(predicted)} predictions.")
        for position in positions:
            word = int(features.word_index[row, position])
            if result[sentence][word] is not None:
                raise ValueError(f"{sentences[sentence].location(word)}: word labelled by two windows.")
            result[sentence][word] = int(predicted[position])
    for index, labels in enumerate(result):
        if None in labels:
            word = labels.index(None)
            raise ValueError(f"{sentences[index].location(word)}: word {sentences[index].words[word]!r} got no label.")
    return result
