"""BERT text normalisation with TensorFlow string ops (in-graph).

`bert_normalize` reproduces Hugging Face `tokenizers`' `BertNormalizer`
(`clean_text`, `handle_chinese_chars`, `strip_accents`, `lowercase`) followed
by the splitting rule of its `BertPreTokenizer` (white space and punctuation),
which is the original google-research/bert `BasicTokenizer`. The result is a
string in which every word, punctuation mark and CJK ideograph is separated
from its neighbours by spaces, ready for a plain split on " ".

The character classes are spelled out as Unicode code point ranges
(`unicode_classes.py`) taken from the reference implementation's behaviour,
so that they do not depend on the Unicode version of the regular-expression
library inside TensorFlow.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_impl.tensorflow_devices import keep_tensorflow_off_the_gpus
from keras_bert_impl.text import unicode_classes

keep_tensorflow_off_the_gpus()  # (JAX, PyTorch: TensorFlow only tokenizes and batches, on the CPU)


def _class(ranges):
    """RE2 character class for a list of (first, last) code points."""
    parts = []
    for first, last in ranges:
        if first == last:
            parts.append(f"\\x{{{first:X}}}")
        else:
            parts.append(f"\\x{{{first:X}}}-\\x{{{last:X}}}")
    return "[" + "".join(parts) + "]"


DROPPED_CHARS_PATTERN = _class(unicode_classes.DROPPED)
# The space itself is left out of the pattern: replacing every " " by " " is slow.
WHITESPACE_PATTERN = _class([r for r in unicode_classes.WHITESPACE if r != (0x20, 0x20)])
CJK_PATTERN = "(" + _class(unicode_classes.CJK) + ")"
PUNCTUATION_PATTERN = "(" + _class(unicode_classes.PUNCTUATION) + ")"
NONSPACING_MARK_PATTERN = _class(unicode_classes.NONSPACING_MARKS)


def bert_normalize(strings, lowercase=True, strip_accents=None, split_on_cjk=True):
    """Normalises text as BERT does and spaces out every split point.

    Args:
        strings: string tensor of any shape (valid UTF-8).
        lowercase: lower-case, code point by code point.
        strip_accents: NFD-decompose and drop non-spacing marks (Mn); `None`
            follows `lowercase`.
        split_on_cjk: surround CJK ideographs with spaces.

    Returns:
        string tensor of the same shape; the only white space in it is " ".

    Example:
    >>> bert_normalize(tf.constant(["Ｈéllo,\\u200bWörld ﬁ"])).numpy()[0].decode()
    'ｈello , world ﬁ'
    """
    if strip_accents is None:
        strip_accents = lowercase
    text = tf.strings.regex_replace(strings, DROPPED_CHARS_PATTERN, "")
    text = tf.strings.regex_replace(text, WHITESPACE_PATTERN, " ")
    if split_on_cjk:
        text = tf.strings.regex_replace(text, CJK_PATTERN, r" \1 ")
    if strip_accents:
        text = tf_text.normalize_utf8(text, "NFD")
        text = tf.strings.regex_replace(text, NONSPACING_MARK_PATTERN, "")
    if lowercase:
        text = lower_per_code_point(text)
    return tf.strings.regex_replace(text, PUNCTUATION_PATTERN, r" \1 ")


def lower_per_code_point(strings):
    """Lower-cases each code point on its own (full Unicode lower-case mapping).

    ICU (behind `tf.strings.lower`) applies the context-dependent final-sigma
    rule; BERT maps every capital sigma to "σ". The capital sigma is replaced
    first, so the rest is context-free.
    """
    strings = tf.strings.regex_replace(strings, "\u03a3", "\u03c3")
    return tf.strings.lower(strings, encoding="utf-8")
