"""A token classifier's raw-text `serve(text)` in TensorFlow ops: its words, tags and entities (`predict_entities`).

`saved_model_export.export_saved_model` calls `tagger_endpoint` for a task whose
`serving_text_graph` is "entities" (`BertTokenClassifier` with `label_names`);
the SavedModel's `serve` then does in the graph what
`BertTokenClassifier.predict_entities` does in Python:

- `split_words_in_graph(texts)`: `token_classifier_preprocessor.split_words`
  (CoNLL-2003's words) as code point offsets, its rules spelled out in RE2 and
  tensor ops (`_python_class` gives RE2 the character classes of Python's `re`);
- `tagger_endpoint(task, serve_features)`: the words' WordPieces packed into
  rows (`word_windows`), each word tagged by its first piece, and the tags
  chunked into entities by conlleval's rules (`metrics/conll.py`).
"""

import functools
import re

import tensorflow as tf

from keras_bert_impl.text.normalization import _class

# Character classes of Python's `re` (str patterns: Unicode), as RE2 classes of code point ranges, so that the
# graph splits words as `token_classifier_preprocessor.split_words` does, whatever RE2's Unicode tables.
_SURROGATES = (0xD800, 0xDFFF)


@functools.lru_cache(maxsize=None)
def _python_class(pattern):
    """RE2 character class of the code points that Python's `re` matches with `pattern` (one character)."""
    everything = "".join(chr(c) for c in range(0x110000) if not _SURROGATES[0] <= c <= _SURROGATES[1])
    ranges = []
    for run in re.finditer(f"(?:{pattern})+", everything):
        first, last = ord(run.group()[0]), ord(run.group()[-1])
        if first <= _SURROGATES[0] <= last:  # a run across the (left out) surrogates: two ranges
            ranges += [(first, _SURROGATES[0] - 1), (_SURROGATES[1] + 1, last)]
        else:
            ranges.append((first, last))
    return _class(ranges)


def split_words_in_graph(texts):
    """`split_words` of each of `texts` (`[batch]` valid UTF-8) in TensorFlow ops: `(starts, ends)`, int64 ragged
    `[batch, words]` code point offsets (`end` exclusive), the words of CoNLL-2003's tokenisation in order.

    The same rules as the Python function, step for step: chunks between white space; while the chunk is not
    whole (an abbreviation or a lone clitic), a leading symbol comes off; then trailing symbols; then a clitic at
    its end. The lookahead of `_LEADING_SYMBOL` (RE2 has none) is spelled out on the code points.

    Example: the words of `split_words`, at the same code point offsets, for a batch of two texts:

    >>> from keras_bert_impl.text.token_classifier_preprocessor import split_words
    >>> texts = ["Zoë met 东京's mayor 🙂.", "The U.S. didn't pay Germany's 1,000 euros to Acme Inc. yet."]
    >>> starts, ends = split_words_in_graph(tf.constant(texts))
    >>> [list(zip(s, e)) for s, e in zip(starts.to_list(), ends.to_list())] == [
    ...     [(start, end) for _, start, end in split_words(text)] for text in texts]
    True
    >>> [texts[0][start:end] for start, end in zip(starts[0].numpy(), ends[0].numpy())]
    ['Zoë', 'met', '东京', "'s", 'mayor', '🙂', '.']
    """
    from keras_bert_impl.text import token_classifier_preprocessor as words_module

    code_points = tf.strings.unicode_decode(texts, "UTF-8")
    flat = code_points.flat_values
    chars = tf.strings.unicode_encode(tf.expand_dims(flat, -1), "UTF-8")
    row_starts = code_points.row_starts()
    rows = code_points.value_rowids()
    count = tf.shape(flat, out_type=tf.int64)[0]
    index = tf.range(count, dtype=tf.int64)
    is_space = tf.strings.regex_full_match(chars, _python_class(r"\s"))
    is_word = tf.strings.regex_full_match(chars, _python_class(r"\w"))
    is_digit = tf.strings.regex_full_match(chars, _python_class(r"\d"))
    is_dot, is_dash = tf.equal(flat, ord(".")), tf.equal(flat, ord("-"))
    signs = tf.logical_or(tf.logical_or(tf.equal(flat, ord("+")), is_dot), is_dash)  # [+.-] before a digit stays
    kept_at_end = tf.logical_or(tf.equal(flat, ord("+")), tf.equal(flat, ord("$")))
    # Dashes from each code point on, and up to each one (runs of `--+`), within its text.
    non_dash = tf.boolean_mask(index, tf.logical_not(is_dash))
    next_non_dash = tf.gather(tf.concat([non_dash, [count]], 0), tf.searchsorted(non_dash, index, side="left"))
    previous_non_dash = tf.gather(tf.concat([[-1], non_dash], 0), tf.searchsorted(non_dash, index, side="right"))
    dashes_from, dashes_to = next_non_dash - index, index - previous_non_dash

    # Chunks: runs of non-space code points (`\S+`), as global indices into `flat`.
    first_of_row = tf.equal(index, tf.gather(row_starts, rows))
    last_of_row = tf.equal(index + 1, tf.gather(code_points.row_limits(), rows))
    previous_space = tf.concat([[True], is_space[:-1]], 0)
    next_space = tf.concat([is_space[1:], [True]], 0)
    text_char = tf.logical_not(is_space)
    chunk_starts = tf.boolean_mask(index, text_char & (first_of_row | previous_space))
    chunk_ends = tf.boolean_mask(index, text_char & (last_of_row | next_space)) + 1
    chunk_rows = tf.gather(rows, chunk_starts)
    chunk_texts = tf.gather(texts, chunk_rows)
    chunk_base = tf.gather(row_starts, chunk_rows)

    def at(values, positions, valid):
        return tf.logical_and(valid, tf.gather(values, tf.clip_by_value(positions, 0, tf.maximum(count - 1, 0))))

    def number(values, positions):
        return tf.gather(values, tf.clip_by_value(positions, 0, tf.maximum(count - 1, 0)))

    clitic = words_module._CLITIC.pattern.removeprefix("(?i)")
    whole_pattern = f"(?:{words_module._ABBREVIATION.pattern})|(?i:{clitic})"

    def substring(starts, ends):
        return tf.strings.substr(chunk_texts, starts - chunk_base, ends - starts, unit="UTF8_CHAR")

    def step(starts, ends, phase, found_starts, found_ends):
        nonempty = starts < ends
        whole = tf.logical_and(nonempty, tf.strings.regex_full_match(substring(starts, ends), whole_pattern))
        # Leading symbols (phase 0): `...`, `--+`, or a non-word character that is not a sign before a digit.
        dots = at(is_dot, starts, starts + 3 <= ends) & at(is_dot, starts + 1, starts + 3 <= ends) & at(
            is_dot, starts + 2, starts + 3 <= ends)
        run = tf.minimum(number(dashes_from, starts), ends - starts)
        single = (at(tf.logical_not(is_word), starts, nonempty)
                  & tf.logical_not(at(signs, starts, nonempty) & at(is_digit, starts + 1, starts + 1 < ends)))
        lead = tf.where(dots, tf.constant(3, tf.int64), tf.where(
            at(is_dash, starts, nonempty) & (run >= 2), run, tf.where(single, tf.constant(1, tf.int64), 0)))
        leading = tf.equal(phase, 0) & nonempty & tf.logical_not(whole) & (lead > 0)
        # Trailing symbols (phase 1): the leftmost of `--+`, `...` and `[^\w+$]` that ends the chunk.
        back_run = tf.minimum(number(dashes_to, ends - 1), ends - starts)
        back_dots = (at(is_dot, ends - 3, ends - 3 >= starts) & at(is_dot, ends - 2, ends - 3 >= starts)
                     & at(is_dot, ends - 1, ends - 3 >= starts))
        back_single = at(tf.logical_not(is_word | kept_at_end), ends - 1, nonempty)
        cut = tf.where(at(is_dash, ends - 1, nonempty) & (back_run >= 2), ends - back_run, tf.where(
            back_dots, ends - 3, tf.where(back_single, ends - 1, ends)))
        trailing = tf.equal(phase, 1) & nonempty & tf.logical_not(whole) & (cut < ends)
        found_starts = tf.concat([found_starts, tf.boolean_mask(starts, leading), tf.boolean_mask(cut, trailing)], 0)
        found_ends = tf.concat([found_ends, tf.boolean_mask(starts + lead, leading), tf.boolean_mask(ends, trailing)],
                               0)
        stopped = tf.logical_not(leading | trailing)
        phase = tf.where(stopped & (phase < 2), phase + 1, phase)
        return (tf.where(leading, starts + lead, starts), tf.where(trailing, cut, ends), phase, found_starts,
                found_ends)

    empty = tf.zeros([0], tf.int64)
    starts, ends, _, found_starts, found_ends = tf.while_loop(
        lambda starts, ends, phase, *_: tf.reduce_any(phase < 2), step,
        (chunk_starts, chunk_ends, tf.zeros_like(chunk_starts), empty, empty),
        shape_invariants=(tf.TensorShape([None]),) * 3 + (tf.TensorShape([None]),) * 2)
    # The core: a clitic at its end comes off (the leftmost clitic, if it ends the core and does not begin it).
    core = substring(starts, ends)
    clitic_pattern = f"(?i:{clitic})"
    has_clitic = tf.strings.regex_full_match(core, f"(?s).*?{clitic_pattern}.*")
    before = tf.strings.regex_replace(core, f"(?s)^(.*?){clitic_pattern}.*$", r"\1", replace_global=False)
    after = tf.strings.regex_replace(core, f"(?s)^.*?{clitic_pattern}", "", replace_global=False)
    before_length = tf.cast(tf.strings.length(before, unit="UTF8_CHAR"), tf.int64)
    split = has_clitic & tf.equal(after, "") & (before_length > 0) & (starts < ends)
    middle = tf.where(split, starts + before_length, ends)
    nonempty = starts < ends
    found_starts = tf.concat([found_starts, tf.boolean_mask(starts, nonempty), tf.boolean_mask(middle, split)], 0)
    found_ends = tf.concat([found_ends, tf.boolean_mask(middle, nonempty), tf.boolean_mask(ends, split)], 0)
    order = tf.argsort(found_starts)
    found_starts, found_ends = tf.gather(found_starts, order), tf.gather(found_ends, order)
    word_rows = tf.gather(rows, found_starts)
    base = tf.gather(row_starts, word_rows)
    batch = tf.shape(texts, out_type=tf.int64)[0]
    starts = tf.RaggedTensor.from_value_rowids(found_starts - base, word_rows, nrows=batch)
    return starts, starts.with_flat_values(found_ends - base)


def tagger_endpoint(task, serve_features):
    """`serve(text)` of a `BertTokenClassifier`: what `predict_entities` does, in the graph.

    Each text is split into words (`split_words_in_graph`), each word into WordPieces (at most `sequence_length - 2`);
    the words fill rows of `[CLS] pieces [SEP]` in order, a row closed when the next word does not fit
    (`word_windows`); each word takes the tag of its first piece (softmax in float64, the most probable tag) and a
    word without pieces is "O" with score 1. The tags are chunked by conlleval's rules (`extract_entities`:
    IOB1, IOB2 or IOBES; a table of tag pairs, as the rules read only a tag and the one before it).

    Outputs, padded per batch (`word_mask` / `entity_mask` say which are real): per word `words`, `word_start`,
    `word_end` (code point offsets, `end` exclusive), `tag`, `tag_id` (-1 for a word without pieces where the tags
    have no "O"), `score`; per entity `entity_text`, `entity_type`, `entity_start`, `entity_end`, `entity_score`
    (the mean of its words' scores).
    """
    from keras_bert_impl.metrics.conll import _ends_chunk, _starts_chunk, split_tag

    preprocessor = task.preprocessor
    tokenizer = preprocessor.tokenizer
    budget = preprocessor.sequence_length - 2
    label_names = list(task.label_names)
    outside = len(label_names)  # a word without pieces, and the sentence's edges: "O"
    split = [split_tag(name) for name in label_names] + [("O", "")]
    ends_table = [[_ends_chunk(p[0], c[0], p[1], c[1]) for c in split] for p in split]
    starts_table = [[_starts_chunk(p[0], c[0], p[1], c[1]) for c in split] for p in split]
    o_id = label_names.index("O") if "O" in label_names else -1

    def serve(text):
        texts = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
        word_starts, word_ends = split_words_in_graph(texts)
        batch = tf.shape(texts, out_type=tf.int64)[0]
        word_texts = tf.strings.substr(tf.gather(texts, word_starts.value_rowids()), word_starts.flat_values,
                                       word_ends.flat_values - word_starts.flat_values, unit="UTF8_CHAR")
        pieces = tokenizer.tokenize(word_texts)[:, :budget]  # [words, pieces]
        counts = tf.cast(pieces.row_lengths(), tf.int64)
        count_matrix = word_starts.with_flat_values(counts).to_tensor()  # [batch, max words]

        def place(state, count):  # a row closes when the next word does not fit in it (`word_windows`)
            used, row, _ = state
            new_row = (count > 0) & (used + count > budget)
            row = tf.where(new_row, row + 1, row)
            used = tf.where(new_row, tf.zeros_like(used), used)
            position = tf.where(count > 0, used + 1, -1)
            return used + count, row, position

        zero = tf.zeros([batch], tf.int64)
        # (A column more, of no pieces: a batch without words scans one step, as `tf.scan` stacks no empty list.)
        count_matrix = tf.concat([count_matrix, tf.zeros([batch, 1], tf.int64)], 1)
        _, word_rows, positions = tf.scan(place, tf.transpose(count_matrix), initializer=(zero, zero, zero))
        word_rows = tf.RaggedTensor.from_tensor(tf.transpose(word_rows)[:, :-1], lengths=word_starts.row_lengths())
        positions = tf.transpose(positions)[:, :-1]
        positions = tf.RaggedTensor.from_tensor(positions, lengths=word_starts.row_lengths()).flat_values
        rows_per_text = tf.reduce_max(tf.concat([word_rows, tf.zeros([batch, 1], tf.int64)], 1), axis=1) + 1
        first_row = tf.cumsum(rows_per_text, exclusive=True)
        global_rows = word_rows.flat_values + tf.gather(first_row, word_rows.value_rowids())
        total_rows = tf.reduce_sum(rows_per_text)
        row_lengths = tf.math.unsorted_segment_sum(counts, global_rows, total_rows) + 2
        length = tf.reduce_max(tf.concat([row_lengths, [2]], 0))  # (2 for an empty batch)
        piece_word = pieces.value_rowids()
        piece_index = tf.range(tf.shape(piece_word, out_type=tf.int64)[0]) - tf.gather(pieces.row_starts(), piece_word)
        every_row = tf.range(total_rows, dtype=tf.int64)
        indices = tf.concat([
            tf.stack([tf.gather(global_rows, piece_word), tf.gather(positions, piece_word) + piece_index], 1),
            tf.stack([every_row, tf.zeros_like(every_row)], 1),
            tf.stack([every_row, row_lengths - 1], 1)], 0)
        values = tf.concat([tf.cast(pieces.flat_values, tf.int32),
                            tf.fill([total_rows], tf.constant(tokenizer.cls_token_id, tf.int32)),
                            tf.fill([total_rows], tf.constant(tokenizer.sep_token_id, tf.int32))], 0)
        token_ids = tf.tensor_scatter_nd_update(
            tf.fill(tf.stack([total_rows, length]), tf.constant(tokenizer.pad_token_id, tf.int32)), indices, values)
        padding_mask = tf.cast(tf.range(length)[None, :] < row_lengths[:, None], tf.int32)
        logits = serve_features(token_ids=token_ids, segment_ids=tf.zeros_like(token_ids),
                                padding_mask=padding_mask)["logits"]
        probabilities = tf.nn.softmax(tf.cast(logits, tf.float64), axis=-1)
        has_pieces = counts > 0
        word_probabilities = tf.gather_nd(probabilities, tf.stack(
            [global_rows, tf.maximum(positions, 0)], 1))
        labels = tf.where(has_pieces, tf.argmax(word_probabilities, axis=-1), outside)
        scores = tf.where(has_pieces, tf.reduce_max(word_probabilities, axis=-1), tf.constant(1.0, tf.float64))

        # Entities: conlleval's chunk edges, from each tag and the one before it ("O" before the first word and
        # after the last).
        label_matrix = word_starts.with_flat_values(labels).to_tensor(default_value=outside)
        label_matrix = tf.concat([label_matrix, tf.fill([batch, 1], tf.constant(outside, tf.int64))], 1)
        previous = tf.concat([tf.fill([batch, 1], tf.constant(outside, tf.int64)), label_matrix[:, :-1]], 1)
        pairs = tf.stack([previous, label_matrix], -1)
        ends = tf.gather_nd(tf.constant(ends_table), pairs)
        starts = tf.gather_nd(tf.constant(starts_table), pairs)
        width = tf.shape(label_matrix, out_type=tf.int64)[1]
        place_index = tf.range(width, dtype=tf.int64)
        earlier = place_index[None, :, None] > place_index[None, None, :]  # [1, i, j]: j before i
        last_start = tf.reduce_max(tf.where(earlier & starts[:, None, :], place_index[None, None, :], -1), -1)
        last_end = tf.reduce_max(tf.where(earlier & ends[:, None, :], place_index[None, None, :], -1), -1)
        closes = ends & (last_start >= 0) & (last_end <= last_start)
        entity_text_row = tf.where(closes)[:, 0]
        entity_first = tf.boolean_mask(last_start, closes)
        entity_stop = tf.boolean_mask(tf.broadcast_to(place_index[None, :], tf.shape(closes, out_type=tf.int64)),
                                      closes)
        word_base = tf.gather(word_starts.row_starts(), entity_text_row)
        entity_types = tf.gather(tf.constant([t for _, t in split]),
                                 tf.gather_nd(label_matrix, tf.stack([entity_text_row, entity_stop - 1], 1)))
        entity_starts = tf.gather(word_starts.flat_values, word_base + entity_first)
        entity_ends = tf.gather(word_ends.flat_values, word_base + entity_stop - 1)
        summed = tf.concat([[0], tf.cumsum(scores)], 0)
        entity_scores = ((tf.gather(summed, word_base + entity_stop) - tf.gather(summed, word_base + entity_first))
                         / tf.cast(entity_stop - entity_first, tf.float64))
        entity_texts = tf.strings.substr(tf.gather(texts, entity_text_row), entity_starts, entity_ends - entity_starts,
                                         unit="UTF8_CHAR")

        def per_word(values, default):
            return word_starts.with_flat_values(values).to_tensor(default_value=default)

        def per_entity(values, default):
            return tf.RaggedTensor.from_value_rowids(values, entity_text_row, nrows=batch).to_tensor(
                default_value=default)

        tag_ids = tf.where(has_pieces, labels, o_id)
        return {
            "words": per_word(word_texts, ""),
            "word_start": per_word(word_starts.flat_values, 0),
            "word_end": per_word(word_ends.flat_values, 0),
            "tag": per_word(tf.gather(tf.constant(label_names + ["O"]), labels), ""),
            "tag_id": per_word(tag_ids, -1),
            "score": per_word(tf.cast(scores, tf.float32), 0.0),
            "word_mask": per_word(tf.ones_like(has_pieces), False),
            "entity_text": per_entity(entity_texts, ""),
            "entity_type": per_entity(entity_types, ""),
            "entity_start": per_entity(entity_starts, 0),
            "entity_end": per_entity(entity_ends, 0),
            "entity_score": per_entity(tf.cast(entity_scores, tf.float32), 0.0),
            "entity_mask": per_entity(tf.ones_like(entity_first, tf.bool), False),
        }

    return serve
