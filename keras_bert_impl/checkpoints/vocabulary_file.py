"""The WordPiece `vocab.txt` file that travels with a checkpoint: writing it and reading its casing."""

import os

from keras_bert_impl.checkpoints.atomic_files import atomic_write_text


def write_vocabulary_file(vocabulary, path):
    """Writes a vocabulary (a path to a vocab.txt or a list of tokens) to `path`, one token a line.

    Args:
        vocabulary: path to an existing vocab.txt, or a list/tuple of token strings.
        path: destination file.

    Example:
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> write_vocabulary_file(["[PAD]", "[UNK]", "hello"], p)
    >>> open(p).read().split()
    ['[PAD]', '[UNK]', 'hello']
    """
    if isinstance(vocabulary, (str, os.PathLike)):
        if not os.path.isfile(vocabulary):
            raise FileNotFoundError(f"vocabulary={os.fspath(vocabulary)!r} is not a file (expected a vocab.txt).")
        with open(vocabulary, encoding="utf-8") as f:
            text = f.read()
    elif isinstance(vocabulary, (list, tuple)):
        bad = [t for t in vocabulary if not isinstance(t, str) or "\n" in t or not t]
        if bad:
            raise ValueError(f"vocabulary tokens must be non-empty strings without newlines; got {bad[:3]!r}.")
        text = "\n".join(vocabulary) + "\n"
    else:
        raise TypeError(
            f"vocabulary must be a path to vocab.txt or a list of tokens, got {type(vocabulary).__name__}."
        )
    atomic_write_text(path, text)


def vocabulary_is_lowercase(vocab_path):
    """True for an uncased vocabulary: (almost) no word piece holds an A-Z capital.

    Bracketed special tokens such as `[CLS]` are ignored; a cased BERT
    vocabulary has thousands of capitalised pieces, an uncased one none.

    Example:
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> write_vocabulary_file(["[CLS]", "the", "##s"], p)
    >>> vocabulary_is_lowercase(p)
    True
    """
    total = capitalised = 0
    with open(vocab_path, encoding="utf-8") as f:
        for line in f:
            token = line.rstrip("\n")
            if token.startswith("[") and token.endswith("]"):
                continue
            total += 1
            capitalised += any("A" <= c <= "Z" for c in token)
    return capitalised <= 0.01 * max(total, 1)
