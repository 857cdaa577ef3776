"""A task as a TensorFlow SavedModel that takes raw text: the tokenizer and packer inside the graph.

`Task.export(path)` calls `export_saved_model`. The SavedModel serves with
TF Serving, `tf.saved_model.load` or anything else that reads SavedModels,
with no Python tokenizer on the client. Its endpoints:

- `serve` (also `serving_default`): raw text in, each `[batch]` strings
  (`text`; a classifier also has `serve_pairs`, `text_a` and `text_b`); the
  task's named outputs out (`Task.serving_outputs`: a classifier's
  `logits`, `probabilities`, `label_id` and, with `label_names`, `label`).
  A tagger's `serve(text)` runs `predict_entities` in the graph (word split,
  rows, first-piece tags, conlleval's chunking: `_tagger_endpoint`) and gives
  its words, tags and entities with character offsets; a span extractor's
  `serve(question, context)` runs `answer` in the graph, sliding windows
  included (`_span_endpoint`), and gives each question's best answer.
- `serve_features`: the packed `token_ids`, `segment_ids` and `padding_mask`
  (int32 `[batch, length]`) in, the model's outputs out: what
  `keras.Model.export` gives, for a client that tokenizes itself (a task
  without a preprocessor, or a tagger without `label_names`, exports this
  endpoint only).

Inside `serve`, the preprocessor's own TensorFlow ops tokenize and pack each
batch, padded to its longest row, so the SavedModel gives the same numbers as
`task.predict` on the same strings. On the JAX backend the model part is
converted with `jax2tf` (batch size and length symbolic, lowered for CPU,
CUDA and TPU, no gradients); on PyTorch, Keras exports SavedModels only
through torch_xla, so `export` says to export from the TensorFlow or JAX
backend (a `.keras` file loads on every backend). The directory is written
whole or not at all (`atomic_directory`).

Example:
>>> import tempfile, os, numpy as np, tensorflow as tf
>>> from keras_bert_impl import BertBackbone, BertClassifier, BertClassifierPreprocessor, BertTokenizer
>>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "great", "dull", "film"]
>>> preprocessor = BertClassifierPreprocessor(BertTokenizer(vocabulary), sequence_length=8)
>>> backbone = BertBackbone(vocabulary_size=9, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
...                         max_sequence_length=8)
>>> classifier = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor, label_names=["neg", "pos"])
>>> path = os.path.join(tempfile.mkdtemp(), "classifier")
>>> classifier.export(path, verbose=False)
>>> served = tf.saved_model.load(path)
>>> outputs = served.serve(tf.constant(["a great film", "dull"]))
>>> sorted(outputs)
['label', 'label_id', 'logits', 'probabilities']
>>> bool(np.allclose(outputs["logits"], classifier.predict(["a great film", "dull"], verbose=0), atol=1e-5))
True
"""

import functools
import inspect
import os
import re

import keras
import tensorflow as tf

from keras_bert_impl.checkpoints.atomic_files import atomic_directory
from keras_bert_impl.text.normalization import _class

FEATURE_NAMES = ("token_ids", "segment_ids", "padding_mask")
# What `SavedModel` writing puts in its directory: a save over an earlier export replaces these, and nothing else.
SAVED_MODEL_FILES = ("saved_model.pb", "variables", "assets", "fingerprint.pb")
# The platforms a JAX export is lowered for: the SavedModel then serves on any of them, whatever the exporting host.
JAX_PLATFORMS = ("cpu", "cuda", "tpu")
NEGATIVE_INFINITY = float("-inf")


def export_saved_model(task, filepath, verbose=True):
    """Writes `task` as a SavedModel at `filepath` whose `serve` endpoint takes raw strings (see the module).

    Args:
        task: a `Task` with a preprocessor (without one, or a task whose text runs through Python windows, only
            `serve_features` is written, and it is also `serving_default`).
        filepath: the SavedModel directory (new, empty, or an earlier export, which it replaces).
        verbose: print one line naming the directory and its endpoints.

    Returns:
        The endpoints written: name -> its input names.
    """
    check_backend_writes_saved_models()
    archive = keras.export.ExportArchive()
    archive.track(task)
    serve_features = _add_features_endpoint(archive, task)
    endpoints = {}
    text_inputs = task.serving_text_inputs if task.preprocessor is not None else {}
    for name, input_names in text_inputs.items():
        function = _text_endpoint(task, serve_features, input_names)
        archive.add_endpoint(name, function)
        endpoints[name] = input_names
        if "serving_default" not in endpoints:
            archive.add_endpoint("serving_default", function)
            endpoints["serving_default"] = input_names
    endpoints["serve_features"] = FEATURE_NAMES
    with atomic_directory(filepath, SAVED_MODEL_FILES) as directory:
        archive.write_out(directory, verbose=False)
    if verbose:
        listed = ", ".join(f"{name}({', '.join(inputs)})" for name, inputs in endpoints.items())
        print(f"Saved {type(task).__name__} as a SavedModel at {os.fspath(filepath)}: {listed}.")
    return endpoints


def check_backend_writes_saved_models():
    """Refuses, in one line, a SavedModel export from the PyTorch backend (Keras writes one there only through
    torch_xla, and stops otherwise inside its tracing: "'dict' object has no attribute 'shape'")."""
    if keras.backend.backend() == "torch":
        raise ValueError(
            "Keras exports a SavedModel from the PyTorch backend only through torch_xla: export from the TensorFlow "
            "or JAX backend instead (save the model with model.save('model.keras'), load it there with "
            "keras.saving.load_model after `import keras_bert_impl`, then export), or use "
            "model.export(path, format='onnx') for the token-id model."
        )


def jax2tf_shapes(model):
    """`jax2tf_kwargs` for Keras's own SavedModel export of `model` (a task whose inputs are more than the packed
    features, e.g. the pretrainer's `mask_positions`) on JAX: the packed features share one symbolic batch size
    and length, bounded by the position table (Keras names every unknown length apart, and the position embedding
    then stops on "Symbolic dimension comparison 'd' <= '512' is inconclusive"); other inputs keep a length of
    their own."""
    names = iter(f"length_{index}" for index in range(len(model.input)))
    shapes = {name: "(batch, length)" if name in FEATURE_NAMES else f"(batch, {next(names)})" for name in model.input}
    return {
        "polymorphic_shapes": [shapes],
        "polymorphic_constraints": [f"length <= {model.backbone.max_sequence_length}"],
        "native_serialization_platforms": JAX_PLATFORMS,
        "with_gradient": False,
    }


def _add_features_endpoint(archive, task):
    """`serve_features(token_ids, segment_ids, padding_mask)` -> the task's named outputs, as a `tf.function` the
    text endpoints call."""

    def serve_features(token_ids, segment_ids, padding_mask):
        features = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        return task.serving_outputs(task(features, training=False))

    options = {}
    if keras.backend.backend() == "jax":
        # One symbolic batch size and length for the three inputs; the position table bounds the length.
        options["jax2tf_kwargs"] = {
            "polymorphic_shapes": ["(batch, length)"] * len(FEATURE_NAMES),
            "polymorphic_constraints": [f"length <= {task.backbone.max_sequence_length}"],
            "native_serialization_platforms": JAX_PLATFORMS,
            "with_gradient": False,
        }
    signature = [tf.TensorSpec([None, None], tf.int32, name=name) for name in FEATURE_NAMES]
    return archive.add_endpoint("serve_features", serve_features, input_signature=signature, **options)


def _text_endpoint(task, serve_features, input_names):
    """A `tf.function` of `[batch]` string inputs: tokenize and pack (padded to the batch's longest row), then
    `serve_features`; a classifier with `label_names` also gives each predicted `label`. A tagger's and a span
    extractor's text runs through the graph of `_tagger_endpoint` / `_span_endpoint` (`Task.serving_text_graph`)."""
    preprocessor = task.preprocessor
    label_names = getattr(task, "label_names", None)
    graphs = {"entities": _tagger_endpoint, "answer": _span_endpoint}

    def serve(*texts):
        packed = preprocessor.unpadded(texts[0] if len(texts) == 1 else tuple(texts))
        features = {name: tf.cast(packed[name].to_tensor(), tf.int32) for name in FEATURE_NAMES}
        outputs = dict(serve_features(**features))
        if label_names and "label_id" in outputs:
            outputs["label"] = tf.gather(tf.constant(label_names), outputs["label_id"])
        return outputs

    graph = getattr(task, "serving_text_graph", None)
    if graph is not None:
        serve = graphs[graph](task, serve_features)
    # Callable by the inputs' names, as the signature is (`served.serve(text=...)`).
    serve.__signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in input_names])
    function = tf.function(serve, input_signature=[tf.TensorSpec([None], tf.string, name=name) for name in input_names],
                           autograph=False)
    function.get_concrete_function()  # traced once: the archive takes it as it is
    return function


# === The tagger's `serve(text)`: words, their tags and the entities, as `predict_entities` finds them ===

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


def _split_words(texts):
    """`split_words` of each of `texts` (`[batch]` valid UTF-8) in TensorFlow ops: `(starts, ends)`, int64 ragged
    `[batch, words]` code point offsets (`end` exclusive), the words of CoNLL-2003's tokenisation in order.

    The same rules as the Python function, step for step: chunks between white space; while the chunk is not
    whole (an abbreviation or a lone clitic), a leading symbol comes off; then trailing symbols; then a clitic at
    its end. The lookahead of `_LEADING_SYMBOL` (RE2 has none) is spelled out on the code points.
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


def _tagger_endpoint(task, serve_features):
    """`serve(text)` of a `BertTokenClassifier`: what `predict_entities` does, in the graph.

    Each text is split into words (`_split_words`), each word into WordPieces (at most `sequence_length - 2`);
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
        word_starts, word_ends = _split_words(texts)
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


# === The span extractor's `serve(question, context)`: the best answer, as `answer` finds it ===


def _span_endpoint(task, serve_features):
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
