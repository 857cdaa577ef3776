"""A span extractor's raw-text `serve(question, context)` in TensorFlow ops: the best answer, as `answer` finds it.

`saved_model_export.export_saved_model` calls `span_endpoint` for a task whose
`serving_text_graph` is "answer" (`BertSpanExtractor`); the SavedModel's `serve`
then does in the graph what `BertSpanExtractor.answer` does in Python: the
question and context tokenized, the context cut into google-research/bert's
sliding windows (the rules of `span_windows.py`, here as tensor ops), each
token read in its max-context window (`_max_context`), and the best span's
token offsets turned into character offsets (`_char_offsets`).
"""

import tensorflow as tf

NEGATIVE_INFINITY = float("-inf")


def span_endpoint(task, serve_features):
    """`serve(question, context)` of a `BertSpanExtractor`: what `answer(questions, contexts)` does, in the graph.

    The question is cut to `max_question_length` pieces (and `sequence_length - 4`); the context's tokens go into
    google-research/bert's windows (`span_windows.window_spans`: the room left by the question, `doc_stride` apart,
    as many as the context needs); each token is read in its max-context window (`max_context_windows`); the answer
    is the span of the highest `start_logit + end_logit` (float64) over all windows, `end >= start`, at most
    `max_answer_length` tokens, ties to the earlier window, then the earlier start and end. `score` is
    `p(start) * p(end)` under the softmax of its window.

    Outputs, one per question: `answer` (the context's characters), `start`, `end` (code point offsets, `end`
    exclusive), `score`, and `windows` (how many windows the context took). A context without tokens answers ""
    (0, 0, score 0), as `answer` does.
    """
    preprocessor = task.preprocessor
    tokenizer = preprocessor.tokenizer
    sequence_length = preprocessor.sequence_length
    question_room = min(preprocessor.max_question_length, sequence_length - 4)
    stride = preprocessor.doc_stride
    max_answer_length = task.max_answer_length
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id

    def serve(question, context):
        tf.debugging.assert_equal(tf.shape(question), tf.shape(context),
                                  message="serve(question, context) takes as many questions as contexts")
        question = tf.strings.unicode_transcode(question, "UTF-8", "UTF-8", errors="replace",
                                                replacement_char=0xFFFD)
        context = tf.strings.unicode_transcode(context, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
        batch = tf.shape(context, out_type=tf.int64)[0]
        question_ids = tf.cast(tokenizer.tokenize(question)[:, :question_room], tf.int32)
        ids, byte_starts, byte_ends = tokenizer.tokenize_with_offsets(context)
        ids = tf.cast(ids, tf.int32)
        char_starts, char_ends = _char_offsets(context, byte_starts, byte_ends)

        # Windows: (example, first context token, length), `window_spans` for each context.
        tokens = tf.cast(ids.row_lengths(), tf.int64)
        room = sequence_length - tf.cast(question_ids.row_lengths(), tf.int64) - 3
        step = tf.minimum(room, stride)
        windows = 1 + tf.maximum(tokens - room + step - 1, 0) // step  # ceil((tokens - room) / step) windows more
        window_example = tf.repeat(tf.range(batch), windows)
        window_number = tf.range(tf.reduce_sum(windows)) - tf.gather(tf.cumsum(windows, exclusive=True),
                                                                      window_example)
        window_start = window_number * tf.gather(step, window_example)
        window_length = tf.minimum(tf.gather(room, window_example), tf.gather(tokens, window_example) - window_start)
        window_length = tf.maximum(window_length, 0)

        # Rows: [CLS] question [SEP] window [SEP].
        window_count = tf.shape(window_example, out_type=tf.int64)[0]
        question_rows = tf.gather(question_ids, window_example)
        context_rows = tf.RaggedTensor.from_row_lengths(
            tf.gather(ids.flat_values, tf.ragged.range(
                tf.gather(ids.row_starts(), window_example) + window_start,
                tf.gather(ids.row_starts(), window_example) + window_start + window_length).flat_values),
            window_length)
        cls = tf.fill([window_count, 1], cls_id)
        sep = tf.fill([window_count, 1], sep_id)
        rows = tf.concat([cls, question_rows, sep, context_rows, sep], axis=1)
        prefix = tf.cast(question_rows.row_lengths(), tf.int64) + 2
        row_lengths = prefix + window_length + 1
        token_ids = rows.to_tensor(default_value=tokenizer.pad_token_id)
        length = tf.shape(token_ids, out_type=tf.int64)[1]
        place = tf.range(length)[None, :]
        segment_ids = tf.cast((place >= prefix[:, None]) & (place < row_lengths[:, None]), tf.int32)
        padding_mask = tf.cast(place < row_lengths[:, None], tf.int32)
        outputs = serve_features(token_ids=token_ids, segment_ids=segment_ids, padding_mask=padding_mask)
        start_logits = tf.cast(outputs["start_logits"], tf.float64)
        end_logits = tf.cast(outputs["end_logits"], tf.float64)
        log_z_start = tf.reduce_logsumexp(start_logits, axis=-1)
        log_z_end = tf.reduce_logsumexp(end_logits, axis=-1)

        # The context's logits of each window, [windows, room]; a token's max-context window (`max_context_windows`).
        width = tf.maximum(tf.reduce_max(window_length), 1)
        offset = tf.range(width)[None, :]
        real = offset < window_length[:, None]
        gathered = tf.minimum(prefix[:, None] + offset, length - 1)
        starts = tf.where(real, tf.gather(start_logits, gathered, batch_dims=1), NEGATIVE_INFINITY)
        ends = tf.where(real, tf.gather(end_logits, gathered, batch_dims=1), NEGATIVE_INFINITY)
        token = window_start[:, None] + offset  # the context token at each place
        context_score = (tf.cast(tf.minimum(offset, window_length[:, None] - 1 - offset), tf.float64)
                         + 0.01 * tf.cast(window_length[:, None], tf.float64))
        max_context = _max_context(window_example, token, real, context_score, batch)

        scores = starts[:, :, None] + ends[:, None, :]
        span = offset[:, None, :] - offset[:, :, None]  # end - start
        allowed = (span >= 0) & (span < max_answer_length) & max_context[:, :, None] & real[:, None, :]
        flat = tf.reshape(tf.where(allowed, scores, NEGATIVE_INFINITY), [window_count, -1])
        best = tf.reduce_max(flat, axis=1)
        flat_index = tf.range(tf.shape(flat, out_type=tf.int64)[1])[None, :]
        first = tf.reduce_min(tf.where(tf.equal(flat, best[:, None]), flat_index, tf.int64.max), axis=1)
        example_best = tf.math.unsorted_segment_max(best, window_example, batch)
        chosen = tf.math.unsorted_segment_min(
            tf.where(tf.equal(best, tf.gather(example_best, window_example)) & (best > NEGATIVE_INFINITY),
                     tf.range(window_count), window_count), window_example, batch)
        found = chosen < window_count
        chosen = tf.minimum(chosen, window_count - 1)
        index = tf.gather(first, chosen)
        start_place, end_place = index // width, index % width
        probability = tf.exp(
            tf.gather_nd(starts, tf.stack([chosen, start_place], 1)) - tf.gather(log_z_start, chosen)
            + tf.gather_nd(ends, tf.stack([chosen, end_place], 1)) - tf.gather(log_z_end, chosen))
        base = ids.row_starts()
        first_token = tf.gather(window_start, chosen) + start_place
        last_token = tf.gather(window_start, chosen) + end_place
        # (One offset more, read where no span was found: a batch of contexts without tokens has none.)
        last = tf.size(char_starts.flat_values, tf.int64)
        start = tf.where(found, tf.gather(tf.concat([char_starts.flat_values, [0]], 0),
                                          tf.where(found, base + first_token, last)), 0)
        end = tf.where(found, tf.gather(tf.concat([char_ends.flat_values, [0]], 0),
                                        tf.where(found, base + last_token, last)), 0)
        return {
            "answer": tf.strings.substr(context, start, end - start, unit="UTF8_CHAR"),
            "start": start,
            "end": end,
            "score": tf.cast(tf.where(found, probability, 0.0), tf.float32),
            "windows": windows,
        }

    return serve


def _char_offsets(texts, byte_starts, byte_ends):
    """The tokenizer's byte offsets (ragged `[batch, tokens]`) as code point offsets (`byte_to_char_offsets`)."""
    _, char_bytes = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")
    text_bytes = tf.cumsum(tf.cast(tf.strings.length(texts), tf.int64), exclusive=True)
    # Global byte positions (over the batch) of each code point's first byte, in order.
    char_positions = char_bytes.flat_values + tf.gather(text_bytes, char_bytes.value_rowids())
    rows = byte_starts.value_rowids()
    first_char = tf.gather(char_bytes.row_starts(), rows)
    global_start = byte_starts.flat_values + tf.gather(text_bytes, rows)
    global_last = tf.maximum(byte_ends.flat_values - 1, 0) + tf.gather(text_bytes, rows)
    starts = tf.searchsorted(char_positions, global_start, side="right", out_type=tf.int64) - 1 - first_char
    ends = tf.searchsorted(char_positions, global_last, side="right", out_type=tf.int64) - first_char
    return byte_starts.with_flat_values(starts), byte_starts.with_flat_values(tf.maximum(ends, starts))


def _max_context(window_example, token, real, score, batch):
    """`[windows, room]`: whether each place's token has its most context in this window (`max_context_windows`:
    `score` is min(left, right) + 0.01 x the window's length; ties go to the earlier window)."""
    tokens = tf.math.unsorted_segment_max(tf.reduce_max(tf.where(real, token, 0), 1) + 1, window_example, batch)
    global_token = tf.where(real, token + tf.gather(tf.cumsum(tokens, exclusive=True), window_example)[:, None], 0)
    size = tf.reduce_max(tf.concat([tf.reshape(global_token, [-1]), [0]], 0)) + 1  # (1 for an empty batch)
    best = tf.math.unsorted_segment_max(tf.boolean_mask(score, real), tf.boolean_mask(global_token, real), size)
    is_best = real & tf.equal(score, tf.gather(best, global_token))
    window = tf.broadcast_to(tf.range(tf.shape(token, out_type=tf.int64)[0])[:, None], tf.shape(token, out_type=tf.int64))
    earliest = tf.math.unsorted_segment_min(tf.boolean_mask(window, is_best), tf.boolean_mask(global_token, is_best),
                                            size)
    return is_best & tf.equal(window, tf.gather(earliest, global_token))
