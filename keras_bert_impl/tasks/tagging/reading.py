"""Step 1, reading: CoNLL-2003 column files (and any CoNLL-format tagging files), tag schemes.

- `read_conll(path, tag_scheme="iob1")` reads the shared-task column format
  (`word POS chunk NER`, one token a line, blank line between sentences,
  `-DOCSTART-` between documents) into `ConllSentence`s whose tags are IOB2.
  The original files use IOB1; with `tag_scheme="iob1"` an `I-X` that starts an
  entity becomes `B-X` (this is also the documented *repair* of ill-formed
  IOB2). With `tag_scheme="iob2"` such a tag is an error naming file and line.
- `iob1_to_iob2`, `iob2_to_iob1`: the tag conversions.
- `find_split_files(data_dir)`: `eng.train/eng.testa/eng.testb` or
  `train.txt/dev.txt/test.txt` (also `valid.txt`).
- `label_vocabulary(sentences)`: the label set from the data (`"O"` first).

Pure Python. The next steps: `features`, `batches`, `evaluation`, `outputs`, `prediction`, `run`.

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "tiny.conll")
>>> _ = open(path, "w").write("-DOCSTART- -X- O O\\n\\nEU NNP I-NP I-ORG\\nrejects VBZ I-VP O\\n"
...                           "German JJ I-NP I-MISC\\n\\n")
>>> [(s.words, s.tags) for s in read_conll(path)]
[(['EU', 'rejects', 'German'], ['B-ORG', 'O', 'B-MISC'])]
"""

import dataclasses
import itertools
import logging
import os

from keras_bert_impl.metrics.conll import split_tag

logger = logging.getLogger(__name__)

DOCSTART = "-DOCSTART-"
IGNORE_LABEL = -1
SPLIT_FILE_NAMES = {
    "train": ("eng.train", "train.txt"),
    "dev": ("eng.testa", "dev.txt", "valid.txt"),
    "test": ("eng.testb", "test.txt"),
}


@dataclasses.dataclass
class ConllSentence:
    """One sentence of a CoNLL file.

    Attributes:
        words: list of str.
        tags: list of str, IOB2 (converted on reading).
        document_index: int, 0-based index of the `-DOCSTART-` document in the file.
        path: str, the file it was read from.
        line_numbers: list of int, the 1-based line of each word.
    """

    words: list
    tags: list
    document_index: int = 0
    path: str = "<memory>"
    line_numbers: list = dataclasses.field(default_factory=list)

    def location(self, word_index=0):
        """`'file:line'` of a word, for error messages."""
        line = self.line_numbers[word_index] if self.line_numbers else "?"
        return f"{self.path}:{line}"


# === Tag schemes ===


def iob1_to_iob2(tags):
    """IOB1 (entity starts with I-, B- only between adjacent same-type entities) to IOB2 (every entity starts with B-).

    Any `I-X` that does not continue an entity of type X (after `O`, after
    another type, or first in the sentence) becomes `B-X`. Applied to
    ill-formed IOB2 this is also its repair (conlleval reads it the same way).

    Example:
    >>> iob1_to_iob2(["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"])
    ['B-PER', 'I-PER', 'B-PER', 'O', 'B-LOC', 'B-ORG']
    """
    result, prev_type = [], ""
    for tag in tags:
        prefix, entity_type = split_tag(tag)
        if prefix == "I" and entity_type != prev_type:
            tag = f"B-{entity_type}"
        result.append(tag)
        prev_type = entity_type
    return result


def iob2_to_iob1(tags):
    """IOB2 to IOB1: `B-X` stays only where it directly follows an entity of type X, else it becomes `I-X`.

    Example:
    >>> iob2_to_iob1(["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG"])
    ['I-PER', 'I-PER', 'B-PER', 'O', 'I-LOC', 'I-ORG']
    """
    result, prev_type = [], ""
    for tag in tags:
        prefix, entity_type = split_tag(tag)
        if prefix == "B" and entity_type != prev_type:
            tag = f"I-{entity_type}"
        result.append(tag)
        prev_type = entity_type
    return result


def _check_iob2(tags, path, line_numbers):
    prev_type = ""
    for tag, line in zip(tags, line_numbers):
        prefix, entity_type = split_tag(tag)
        if prefix == "I" and entity_type != prev_type:
            before = f"an entity of type {prev_type}" if prev_type else "'O' (or the sentence start)"
            raise ValueError(
                f"{path}:{line}: tag {tag!r} follows {before}; in IOB2 every entity starts with "
                f"'B-{entity_type}'. If the file is IOB1 (the original CoNLL-2003 files are), read it with "
                f"tag_scheme='iob1', which converts (I- starting an entity becomes B-)."
            )
        prev_type = entity_type


# === Reading ===


def read_conll(path, tag_scheme="iob1", num_columns=None):
    """Reads a CoNLL-2003 column file into sentences with IOB2 tags.

    The first column is the word, the last the NER tag (columns in between,
    POS and chunk tags, are checked for count but not kept). `-DOCSTART-`
    lines separate documents and are not sentences. Every line of a file must
    have the same number of space-separated columns (4 in the original files).

    Args:
        path: file path.
        tag_scheme: `"iob1"` (the original files; converted to IOB2) or
            `"iob2"` (tags are checked: an `I-X` not continuing an X entity is
            an error).
        num_columns: None (take it from the file's first line) or the required
            column count (>= 2).

    Returns:
        list of `ConllSentence`.

    Raises:
        ValueError: naming file and line: a line with the wrong number of
            columns, a tag that is not `O`/`B-X`/`I-X`, an I- tag after O in
            IOB2 mode, a file without any sentence.

    Example: see the module docstring.
    """
    if tag_scheme not in ("iob1", "iob2"):
        raise ValueError(f"`tag_scheme` must be 'iob1' or 'iob2', got {tag_scheme!r}.")
    path = os.fspath(path)
    expected_columns, columns_line = num_columns, None
    sentences, words, tags, lines = [], [], [], []
    document_index, seen_docstart = 0, False

    def end_sentence():
        if not words:
            return
        if tag_scheme == "iob2":
            _check_iob2(tags, path, lines)
        converted = iob1_to_iob2(tags)
        sentences.append(
            ConllSentence(list(words), converted, document_index, path, list(lines))
        )
        words.clear(), tags.clear(), lines.clear()

    with open(path, encoding="utf-8") as f:
        for line_number, raw_line in enumerate(f, start=1):
            line = raw_line.rstrip("\r\n")
            if not line.strip():
                end_sentence()
                continue
            columns = line.split()
            if expected_columns is None:
                if len(columns) < 2:
                    raise ValueError(
                        f"{path}:{line_number}: expected at least 2 space-separated columns "
                        f"(word ... NER-tag; CoNLL-2003 has 4: word POS chunk NER), got {len(columns)}: {line!r}"
                    )
                expected_columns, columns_line = len(columns), line_number
            elif len(columns) != expected_columns:
                origin = f"as on line {columns_line}" if columns_line else "as requested"
                raise ValueError(
                    f"{path}:{line_number}: expected {expected_columns} space-separated columns "
                    f"(word POS chunk NER) {origin}, got {len(columns)}: {line!r}"
                )
            if columns[0] == DOCSTART:
                end_sentence()
                if seen_docstart or sentences:
                    document_index += 1
                seen_docstart = True
                continue
            tag = columns[-1]
            try:
                prefix, _ = split_tag(tag)
            except ValueError as error:
                raise ValueError(f"{path}:{line_number}: {error}") from None
            if prefix not in ("B", "I", "O"):
                raise ValueError(
                    f"{path}:{line_number}: unknown tag prefix in {tag!r}: CoNLL-2003 files use IOB1/IOB2 "
                    f"tags ('O', 'B-<TYPE>', 'I-<TYPE>')."
                )
            words.append(columns[0])
            tags.append(tag)
            lines.append(line_number)
    end_sentence()
    if not sentences:
        raise ValueError(
            f"{path}: no sentences found: expected CoNLL column lines 'word POS chunk NER' "
            f"with a blank line after each sentence (is the file empty?)."
        )
    return sentences


def num_documents(sentences):
    """Number of distinct documents among `sentences` (per file)."""
    return len({(s.path, s.document_index) for s in sentences})


def find_split_files(data_dir):
    """Paths of the train/dev/test files in `data_dir`: the original names or the common renaming.

    Returns:
        dict `{"train": path, "dev": path, "test": path}` for the splits found.

    Raises:
        FileNotFoundError: no training or dev file, listing the names looked for.

    Example:
    >>> find_split_files("../shared/data/conll2003")["dev"]  # doctest: +SKIP
    '../shared/data/conll2003/eng.testa'
    """
    found = {}
    for split, names in SPLIT_FILE_NAMES.items():
        for name in names:
            candidate = os.path.join(data_dir, name)
            if os.path.isfile(candidate):
                found[split] = candidate
                break
    missing = [split for split in ("train", "dev") if split not in found]
    if missing:
        wanted = "; ".join(f"{s}: {' or '.join(SPLIT_FILE_NAMES[s])}" for s in missing)
        raise FileNotFoundError(f"{data_dir}: no CoNLL file for {', '.join(missing)} (looked for {wanted}).")
    return found


def label_vocabulary(sentences):
    """The label set of the data: `"O"` first, then `B-X`, `I-X` for every type X in sorted order.

    Both prefixes are listed for every type seen, so a model can predict a
    `B-` tag the training data happens to lack.

    Example:
    >>> label_vocabulary([ConllSentence(["a", "b"], ["B-PER", "O"])])
    ['O', 'B-PER', 'I-PER']
    """
    types = sorted({split_tag(tag)[1] for s in sentences for tag in s.tags} - {""})
    return ["O"] + [f"{prefix}-{t}" for t in types for prefix in ("B", "I")]
