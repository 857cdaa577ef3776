"""Words -> model windows `[CLS] pieces [SEP]`, each word's tag on its first WordPiece: tagging's one window builder.

A sentence whose WordPieces do not fit one window is split over several at word boundaries (greedy: a window
closes when the next word does not fit), so that every word sits in exactly one window, and is labelled there.
Each window records, at the position of each of its words' first piece, the word's index in its sentence
(`word_index`; -1 elsewhere): labels go there for training (`window_labels`), and predictions come back from
there, one per word.

Two callers build on it, so that a word is placed the same way wherever it is tagged:
- `BertTokenClassifierPreprocessor` (`fit(words, tags)`, `predict_entities`): windows of the sentence's own words.
- `keras_bert_impl.tasks.tagging.features.encode_examples` (the CoNLL recipe's step 2), which also fills the
  room left in a window with the neighbouring words of the same document (`contexts`), unlabelled.

Pure Python and NumPy: the callers turn text into WordPiece ids first.

Example:
>>> windows = first_piece_windows([[[7], [8, 9], [4]]], sequence_length=4, cls_id=1, sep_id=2)
>>> [(w.sentence, w.token_ids, w.word_index) for w in windows]
[(0, [1, 7, 2], [-1, 0, -1]), (0, [1, 8, 9, 2], [-1, 1, -1, -1]), (0, [1, 4, 2], [-1, 2, -1])]
>>> window_labels(windows, [[3, 0, 5]]).tolist()  # padded to the longest window
[[-1, 3, -1, -1], [-1, 0, -1, -1], [-1, 5, -1, -1]]
"""

import dataclasses

import numpy as np

IGNORE_LABEL = -1  # the label of a position the loss and the metrics skip (BERT paper, section 4.3)


@dataclasses.dataclass(frozen=True)
class Window:
    """One model row: `token_ids` (`[CLS] pieces [SEP]`, unpadded) of sentence `sentence`, and per position the
    index in that sentence of the word whose first piece is there (`word_index`, -1 elsewhere)."""

    sentence: int
    token_ids: list
    word_index: list


def split_into_windows(pieces_per_word, budget):
    """A sentence's words -> contiguous `(start, end)` word ranges whose pieces fit `budget` tokens each (greedy).

    A word with more pieces than `budget` gets a range of its own (the caller cuts it). A word with no pieces
    (a control character) takes no room.

    Example:
    >>> split_into_windows([[5], [6, 7], [8]], budget=2)
    [(0, 1), (1, 2), (2, 3)]
    """
    ranges, start, used = [], 0, 0
    for index, pieces in enumerate(pieces_per_word):
        if used + len(pieces) > budget and index > start:
            ranges.append((start, index))
            start, used = index, 0
        used += len(pieces)
    ranges.append((start, len(pieces_per_word)))
    return ranges


def fill_context(stream, start, end, budget):
    """Widens the word range `[start, end)` of `stream` (pieces per word) with whole neighbouring words, right and
    left alternately, while they fit `budget`: returns the new `(left, right)`.

    Example:
    >>> fill_context([[1], [2], [3], [4, 5]], 1, 2, budget=3)
    (0, 3)
    """
    used = sum(len(stream[i]) for i in range(start, end))
    left, right = start, end
    grew = True
    while grew:
        grew = False
        if right < len(stream) and used + len(stream[right]) <= budget:
            used += len(stream[right])
            right += 1
            grew = True
        if left > 0 and used + len(stream[left - 1]) <= budget:
            left -= 1
            used += len(stream[left])
            grew = True
    return left, right


def first_piece_windows(sentence_pieces, sequence_length, cls_id, sep_id, contexts=None):
    """Every word of every sentence in a window, in order: a list of `Window`.

    Args:
        sentence_pieces: per sentence, per word, its WordPiece ids, none longer than `sequence_length - 2`
            (the callers cut a longer word, or refuse it).
        sequence_length: int >= 3, tokens per window with [CLS] and [SEP].
        cls_id, sep_id: the ids of [CLS] and [SEP].
        contexts: None (a window holds only the words it labels), or per sentence `(stream, first)`: a stream of
            pieces per word that holds the sentence's words from index `first` on (its document, or the sentence
            itself); the room left in each window is filled with the stream's neighbouring words, unlabelled.
    """
    budget = sequence_length - 2
    windows = []
    for index, pieces in enumerate(sentence_pieces):
        stream, first = (pieces, 0) if contexts is None else contexts[index]
        for start, end in split_into_windows(pieces, budget):
            left, right = (start, end) if contexts is None else fill_context(stream, first + start, first + end,
                                                                             budget)
            token_ids, word_index = [cls_id], [-1]
            for position in range(left, right):
                word = position - first
                token_ids.extend(stream[position])
                if stream[position]:
                    word_index.append(word if start <= word < end else -1)
                    word_index.extend([-1] * (len(stream[position]) - 1))
            token_ids.append(sep_id)
            word_index.append(-1)
            windows.append(Window(index, token_ids, word_index))
    return windows


def pad_windows(windows, sequence_length, pad_id):
    """The windows as int32 arrays `(len(windows), sequence_length)`: `token_ids` (padded with `pad_id`),
    `padding_mask` (1 on the tokens) and `word_index` (-1 on the padding)."""
    token_ids = np.full((len(windows), sequence_length), pad_id, np.int32)
    padding_mask = np.zeros((len(windows), sequence_length), np.int32)
    word_index = np.full((len(windows), sequence_length), -1, np.int32)
    for row, window in enumerate(windows):
        length = len(window.token_ids)
        token_ids[row, :length] = window.token_ids
        padding_mask[row, :length] = 1
        word_index[row, :length] = window.word_index
    return token_ids, padding_mask, word_index


def window_labels(windows, label_ids, width=None):
    """Per window and position, the label id of the word whose first piece is there (from `label_ids`, per
    sentence, per word), `IGNORE_LABEL` elsewhere: int32 `(len(windows), width)`, `width` the longest window's
    length by default."""
    width = max((len(w.token_ids) for w in windows), default=0) if width is None else width
    labels = np.full((len(windows), width), IGNORE_LABEL, np.int32)
    for row, window in enumerate(windows):
        sentence_labels = label_ids[window.sentence]
        for position, word in enumerate(window.word_index):
            if word >= 0:
                labels[row, position] = sentence_labels[word]
    return labels
