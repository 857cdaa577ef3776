"""The sliding windows of span question answering, and how an answer's characters become token labels.

One implementation for both readers of (question, context) pairs: the
preprocessor that `BertSpanExtractor.fit`, `evaluate` and `answer` call on raw
strings (`text/span_extractor_preprocessor.py`), and the SQuAD features of
`tasks/span_qa/features.py`. NumPy only.

- `window_spans(num_tokens, room, stride)`: google-research/bert's windows over
  a context of `num_tokens` tokens: at most `room` tokens each, the next one
  starting `stride` tokens later.
- `max_context_windows(spans, num_tokens)`: for each token, the window where it
  has the most context on both sides (post-processing reads its logits there).
- `byte_to_char_offsets(text, byte_starts, byte_ends)`: the tokenizer's UTF-8
  byte offsets as character offsets into `text`.
- `token_span_of_chars(char_starts, char_ends, start_char, end_char)`: the
  first and last token that overlap an answer's characters.
- `window_labels(spans, token_span, prefix)`: each window's start and end label,
  [CLS] (0) where the window does not hold the whole answer.

Example:
>>> spans = window_spans(num_tokens=10, room=4, stride=3)
>>> spans
[(0, 4), (3, 4), (6, 4)]
>>> max_context_windows(spans, 10).tolist()   # token 3: a tie between windows 0 and 1, the earlier wins
[0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
>>> window_labels(spans, token_span=(4, 5), prefix=3)   # [CLS] q [SEP] = 3 positions before the context
([0, 4, 0], [0, 5, 0])
"""

import numpy as np


def window_spans(num_tokens, room, stride):
    """`(start, length)` of each window over `num_tokens` context tokens (at least one window).

    Windows hold at most `room` tokens; each starts `stride` tokens after the
    previous one (or right after it, when `stride > room`), and the last one
    reaches the context's end.
    """
    spans, start = [], 0
    while True:
        length = min(room, num_tokens - start)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, stride)


def max_context_windows(spans, num_tokens):
    """For each token, the window where it has the most context: min(left, right) + 0.01 x the window's length.

    Ties go to the earlier window (google-research/bert's `_check_is_max_context`).
    """
    best = np.zeros(num_tokens, "int64")
    best_score = np.full(num_tokens, -1.0)
    for window, (start, length) in enumerate(spans):
        positions = np.arange(start, start + length)
        score = np.minimum(positions - start, start + length - 1 - positions) + 0.01 * length
        better = score > best_score[positions]
        best[positions[better]] = window
        best_score[positions[better]] = score[better]
    return best


def byte_to_char_offsets(text, byte_starts, byte_ends):
    """UTF-8 byte offsets of tokens in `text` -> character offsets `(starts, ends)` (`ends` exclusive).

    Example:
    >>> byte_to_char_offsets("café au", np.array([0, 6]), np.array([5, 8]))   # "é" is two bytes
    (array([0, 5]), array([4, 7]))
    """
    byte_starts = np.asarray(byte_starts, np.int64)
    byte_ends = np.asarray(byte_ends, np.int64)
    if text.isascii():  # bytes are characters
        return byte_starts, byte_ends
    # Each character's UTF-8 length from its code point (1 below U+0080, 2 below U+0800, 3 below U+10000, else 4).
    code_points = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    encoded_lengths = 1 + (code_points >= 0x80) + (code_points >= 0x800) + (code_points >= 0x10000).astype(np.int64)
    char_of_byte = np.append(np.repeat(np.arange(len(text), dtype=np.int64), encoded_lengths), len(text))
    starts = char_of_byte[byte_starts]
    ends = char_of_byte[np.maximum(byte_ends - 1, 0)] + 1
    return starts, np.maximum(ends, starts)


def token_span_of_chars(char_starts, char_ends, start_char, end_char):
    """First and last token overlapping the characters `[start_char, end_char)`; None if none does (white space).

    Example:
    >>> token_span_of_chars(np.array([0, 4, 8]), np.array([3, 7, 11]), 4, 11)
    (1, 2)
    """
    first = int(np.searchsorted(char_ends, start_char, side="right"))
    last = int(np.searchsorted(char_starts, end_char, side="left")) - 1
    if first >= len(char_starts) or last < first:
        return None
    return first, last


def window_labels(spans, token_span, prefix):
    """Start and end labels of each window: positions in the window's row, or 0 ([CLS]) without the whole answer.

    Args:
        spans: `window_spans(...)`.
        token_span: `(first, last)` context token of the answer, or None (no answer: [CLS] everywhere).
        prefix: positions before the first context token (`[CLS] question [SEP]`).
    """
    starts, ends = [], []
    for start, length in spans:
        if token_span is not None and start <= token_span[0] and token_span[1] < start + length:
            starts.append(token_span[0] - start + prefix)
            ends.append(token_span[1] - start + prefix)
        else:
            starts.append(0)
            ends.append(0)
    return starts, ends
