"""Step 6, prediction with a `BertTokenClassifier`: per-word tags for CoNLL sentences, entity spans for raw text.

- `predict_word_tags(model, features, sentences, label_names)`: runs the model
  over the windows of `keras_bert_impl.tasks.tagging.features.encode_sentences` and
  returns one tag per word (the prediction at the word's first WordPiece).
- `predict_entities(model, tokenizer, texts, label_names)`: splits raw text
  into words (runs of letters/digits, hyphen- or apostrophe-joined, and single
  punctuation marks, as in the CoNLL-2003 tokenisation), tags them and returns
  the entities as character spans `{"type", "start", "end", "text"}` (`end`
  exclusive), chunked with conlleval's rules.
"""

import re

import numpy as np

from keras_bert_impl.metrics.conll import extract_entities
from keras_bert_impl.tasks.tagging.batches import make_dataset
from keras_bert_impl.tasks.tagging.features import encode_sentences, word_label_ids
from keras_bert_impl.tasks.tagging.reading import ConllSentence

_WORD = re.compile(r"\w+(?:[-'&]\w+)*|[^\w\s]")


def predict_token_label_ids(model, features, batch_size=64, boundaries=None):
    """Argmax label id at every position of every window: a list of int arrays, one per window.

    Args:
        model: a `BertTokenClassifier` (or any model mapping the input dict to
            logits `(batch, length, num_labels)`).
        features: `ConllFeatures`.
        batch_size: int.
        boundaries: None (windows padded to `sequence_length`) or length buckets
            (e.g. `[32, 64, 128]`): batches are padded only to the bucket of
            their longest window, which is faster for short sentences.
    """
    dataset = make_dataset(features, batch_size, boundaries=boundaries, with_labels=False)
    rows = []
    for batch in dataset:
        inputs = {k: v.numpy() for k, v in batch.items()}
        logits = model.predict_on_batch(inputs)
        real = min(len(logits), len(features.token_ids) - len(rows))  # drop filler rows of the last batch
        rows.extend(np.argmax(np.asarray(logits)[:real], axis=-1))
    return rows


def predict_word_tags(model, features, sentences, label_names, batch_size=64, boundaries=None):
    """Predicted tag of every word of `sentences` (lists of str), from the windows in `features`.

    Example:
    >>> tags = predict_word_tags(model, features, sentences, labels)  # doctest: +SKIP
    """
    token_ids = predict_token_label_ids(model, features, batch_size=batch_size, boundaries=boundaries)
    return [[label_names[i] for i in word_ids] for word_ids in word_label_ids(features, token_ids, sentences)]


def split_words(text):
    """Words of raw text with character offsets: list of `(word, start, end)`.

    Example:
    >>> split_words("Peter Blackburn visited the U.S.")
    [('Peter', 0, 5), ('Blackburn', 6, 15), ('visited', 16, 23), ('the', 24, 27), ('U', 28, 29), ('.', 29, 30), ('S', 30, 31), ('.', 31, 32)]
    """
    return [(m.group(), m.start(), m.end()) for m in _WORD.finditer(text)]


def predict_entities(model, tokenizer, texts, label_names, sequence_length=128, batch_size=64):
    """Entity spans in raw texts.

    Args:
        model: a trained `BertTokenClassifier`.
        tokenizer: the `BertTokenizer` it was trained with.
        texts: a str or a list of str.
        label_names: the tag of each label id (as in training).
        sequence_length: window size (long texts get several windows; nothing is dropped).
        batch_size: int.

    Returns:
        for each text, a list of `{"type", "start", "end", "text"}` dicts
        (character offsets, `end` exclusive). A single str gives a single list.

    Example:
    >>> predict_entities(model, tokenizer, "EU rejects German call", labels)  # doctest: +SKIP
    [{'type': 'ORG', 'start': 0, 'end': 2, 'text': 'EU'}, {'type': 'MISC', 'start': 11, 'end': 17, 'text': 'German'}]
    """
    single = isinstance(texts, str)
    texts = [texts] if single else list(texts)
    words = [split_words(text) for text in texts]
    non_empty = [i for i, w in enumerate(words) if w]
    sentences = [
        ConllSentence([w for w, _, _ in words[i]], ["O"] * len(words[i]), document_index=i, path=f"<text {i}>")
        for i in non_empty
    ]
    results = [[] for _ in texts]
    if sentences:
        features = encode_sentences(sentences, tokenizer, label_names, sequence_length)
        tags = predict_word_tags(model, features, sentences, label_names, batch_size=batch_size)
        for i, sentence_tags in zip(non_empty, tags):
            for entity_type, start, end in extract_entities(sentence_tags):
                char_start, char_end = words[i][start][1], words[i][end - 1][2]
                results[i].append(
                    {"type": entity_type, "start": char_start, "end": char_end, "text": texts[i][char_start:char_end]}
                )
    return results[0] if single else results
