"""Step 1, reading: CoNLL-2003 column files (and any CoNLL-format tagging files), tag schemes.

- `read_conll(path, tag_scheme="iob1", tag_column=-1)` reads the shared-task column format
  (`word POS chunk NER`, or any `word ... tag` columns, one token a line, blank line between
  sentences, `-DOCSTART-` between documents) into `ConllSentence`s whose tags are IOB2.
  The original files use IOB1; with `tag_scheme="iob1"` an `I-X` that starts an
  entity becomes `B-X` (this is also the documented *repair* of ill-formed
  IOB2). With `tag_scheme="iob2"` such a tag is an error; `tag_scheme="iobes"`
  reads `S-`/`E-` tags. Every error is a `ConllFormatError`: one line naming
  file, line and column (a byte that is not UTF-8: its byte offset too).
- `iob1_to_iob2`, `iob2_to_iob1`, `iobes_to_iob2`, `iob2_to_iobes`, `convert_tags`:
  the tag conversions; `convert_conll_file`, `write_conll`: files in another scheme.
- `check_known_tags(sentences, label_names)`: validation/test tags must be training tags.
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
import logging
import os

from keras_bert_impl.file_errors import FileFormatError, decode_utf8
from keras_bert_impl.metrics.conll import split_tag
from keras_bert_impl.text.word_windows import IGNORE_LABEL  # noqa: F401 (re-exported: tagging.IGNORE_LABEL)

logger = logging.getLogger(__name__)

DOCSTART = "-DOCSTART-"
SPLIT_FILE_NAMES = {
    "train": ("eng.train", "train.txt"),
    "dev": ("eng.testa", "dev.txt", "valid.txt"),
    "test": ("eng.testb", "test.txt"),
}
# What a CoNLL file flag takes (the messages of a missing file or a directory, `file_errors.check_input_file`).
CONLL_FILE = "a CoNLL-format text file (a word and its tags a line, a blank line between sentences)"


@dataclasses.dataclass
class ConllSentence:
    """One sentence of a CoNLL file.

    Attributes:
        words: list of str.
        tags: list of str, IOB2 (converted on reading).
        document_index: int, 0-based index of the `-DOCSTART-` document in the file.
        path: str, the file it was read from.
        line_numbers: list of int, the 1-based line of each word.
        tag_column: int, the 1-based column of the tags in the file (None in memory).
        source_tags: list of str, the tags as written in the file (before conversion), or None.
    """

    words: list
    tags: list
    document_index: int = 0
    path: str = "<memory>"
    line_numbers: list = dataclasses.field(default_factory=list)
    tag_column: int = None
    source_tags: list = None

    def location(self, word_index=0):
        """`'file, line n'` of a word, for error messages."""
        line = self.line_numbers[word_index] if self.line_numbers else "?"
        return f"{self.path}, line {line}"


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


class ConllFormatError(FileFormatError):
    """A problem in a CoNLL file: the message is one line, `<file>, line <n>, column <c>: <problem>`.

    `column` is the 1-based column (field) of the line, or for an undecodable
    byte its 1-based character position in the line; None where no column
    applies. The format is `keras_bert_impl.file_errors.FileFormatError`'s.
    """


TAG_SCHEMES = ("iob1", "iob2", "iobes")
_SCHEME_PREFIXES = {"iob1": ("B", "I"), "iob2": ("B", "I"), "iobes": ("B", "I", "E", "S")}


def iobes_to_iob2(tags):
    """IOBES (`S-` single, `E-` end) to IOB2: `S-X` -> `B-X`, `E-X` -> `I-X`.

    Example:
    >>> iobes_to_iob2(["S-PER", "B-LOC", "E-LOC", "O"])
    ['B-PER', 'B-LOC', 'I-LOC', 'O']
    """
    result = []
    for tag in tags:
        prefix, entity_type = split_tag(tag)
        result.append({"S": f"B-{entity_type}", "E": f"I-{entity_type}"}.get(prefix, tag))
    return result


def iob2_to_iobes(tags):
    """IOB2 to IOBES: an entity of one word is `S-X`, the last word of a longer one `E-X`.

    Example:
    >>> iob2_to_iobes(["B-PER", "B-LOC", "I-LOC", "O", "B-ORG"])
    ['S-PER', 'B-LOC', 'E-LOC', 'O', 'S-ORG']
    """
    result = []
    for index, tag in enumerate(tags):
        prefix, entity_type = split_tag(tag)
        following = split_tag(tags[index + 1]) if index + 1 < len(tags) else ("O", "")
        continues = following == ("I", entity_type)
        if prefix == "B":
            tag = tag if continues else f"S-{entity_type}"
        elif prefix == "I":
            tag = tag if continues else f"E-{entity_type}"
        result.append(tag)
    return result


def convert_tags(tags, from_scheme, to_scheme):
    """Tags of one sentence from one scheme (`iob1`, `iob2`, `iobes`) to another, through IOB2.

    Example:
    >>> convert_tags(["I-PER", "I-PER", "O", "I-LOC"], "iob1", "iobes")
    ['B-PER', 'E-PER', 'O', 'S-LOC']
    """
    for scheme in (from_scheme, to_scheme):
        if scheme not in TAG_SCHEMES:
            raise ValueError(f"`tag_scheme` must be one of {', '.join(TAG_SCHEMES)}, got {scheme!r}.")
    tags = iobes_to_iob2(tags) if from_scheme == "iobes" else iob1_to_iob2(tags)
    if to_scheme == "iob1":
        return iob2_to_iob1(tags)
    if to_scheme == "iobes":
        return iob2_to_iobes(tags)
    return tags


def _check_sequence(tags, path, line_numbers, column, tag_scheme):
    """Well-formedness of IOB2 / IOBES tags: a continuation (I-, E-) must continue an entity of its type."""
    prev_prefix, prev_type = "O", ""
    for index, (tag, line) in enumerate(zip(tags, line_numbers)):
        prefix, entity_type = split_tag(tag)
        if tag_scheme == "iob2" and prefix == "I" and entity_type != prev_type:
            before = f"an entity of type {prev_type}" if prev_type else "'O' (or the sentence start)"
            raise ConllFormatError(
                path, line, column,
                f"tag {tag!r} follows {before}; in IOB2 every entity starts with 'B-{entity_type}'. If the file "
                f"is IOB1 (the original CoNLL-2003 files are), read it with tag_scheme='iob1' (--tag_scheme iob1), "
                f"which converts (I- starting an entity becomes B-).",
            )
        if tag_scheme == "iobes":
            open_entity = prev_prefix in ("B", "I")
            if prefix in ("I", "E") and not (open_entity and prev_type == entity_type):
                before = f"{prev_prefix}-{prev_type}" if prev_type else "'O' (or the sentence start)"
                raise ConllFormatError(
                    path, line, column,
                    f"tag {tag!r} follows {before}; in IOBES an entity is 'S-{entity_type}' or "
                    f"'B-{entity_type} (I-{entity_type}...) E-{entity_type}'. Is the file IOB1 or IOB2 "
                    f"(--tag_scheme iob1 / iob2)?",
                )
            if open_entity and not (prefix in ("I", "E") and entity_type == prev_type):
                raise ConllFormatError(
                    path, line_numbers[index - 1], column,
                    f"tag '{prev_prefix}-{prev_type}' is not followed by 'I-{prev_type}' or 'E-{prev_type}' "
                    f"(the next tag is {tag!r}); in IOBES an entity ends with 'E-' (or is one 'S-' word). "
                    f"Is the file IOB1 or IOB2 (--tag_scheme iob1 / iob2)?",
                )
        prev_prefix, prev_type = prefix, entity_type
    if tag_scheme == "iobes" and prev_prefix in ("B", "I"):
        raise ConllFormatError(
            path, line_numbers[-1], column,
            f"tag '{prev_prefix}-{prev_type}' ends the sentence; in IOBES an entity ends with 'E-{prev_type}' "
            f"(or is one 'S-{prev_type}' word). Is the file IOB1 or IOB2 (--tag_scheme iob1 / iob2)?",
        )


# === Reading ===


def _decode(path, data):
    return decode_utf8(data, path, ConllFormatError)


def read_conll(path, tag_scheme="iob1", num_columns=None, tag_column=-1):
    """Reads a CoNLL column file into sentences with IOB2 tags.

    The first column is the word, `tag_column` (default the last) the
    entity tag; other columns (CoNLL-2003's POS and chunk tags) are checked
    for count but not kept. `-DOCSTART-` lines separate documents and are not
    sentences. Every line of a file must have the same number of
    whitespace-separated columns (4 in the original files, 2 in `word tag`
    files). Any entity types may be used (`B-PER`, `I-gene`, `S-Drug`, ...).

    Args:
        path: file path (UTF-8; a byte-order mark is allowed).
        tag_scheme: the scheme of the file, converted to IOB2 on reading:
            `"iob1"` (the original CoNLL-2003 files; an `I-X` starting an
            entity becomes `B-X`), `"iob2"` (checked: an `I-X` not continuing
            an X entity is an error) or `"iobes"` (`S-X` single-word entities,
            `E-X` entity ends; checked).
        num_columns: None (take it from the file's first line) or the required
            column count (>= 2).
        tag_column: index of the tag column (0-based; negative counts from
            the end, -1 = last). Not 0, which holds the word.

    Returns:
        list of `ConllSentence` (`.words`, `.tags`: what `BertTokenClassifier.fit(words, tags)` takes). Its
        `tag_column` counts from 1, as the error messages name columns: `tag_column=-1` on a 4-column file
        gives 4.

    Raises:
        ConllFormatError (a ValueError), one line naming file, line and
            column: a byte that is not UTF-8 (with its byte offset), a line
            with the wrong number of columns, a tag that is not `O` or
            `<prefix>-<TYPE>` with a prefix of the scheme, an ill-formed
            IOB2/IOBES sequence, a file without any sentence.

    Example: see the module docstring.
    """
    if tag_scheme not in TAG_SCHEMES:
        raise ValueError(f"`tag_scheme` must be one of {', '.join(TAG_SCHEMES)}, got {tag_scheme!r}.")
    if isinstance(tag_column, bool) or not isinstance(tag_column, int):
        raise ValueError(f"`tag_column` must be an int (0-based column index, -1 = last), got {tag_column!r}.")
    path = os.fspath(path)
    with open(path, "rb") as f:
        text = _decode(path, f.read())
    expected_columns, columns_line, tag_index = num_columns, None, None
    prefixes = _SCHEME_PREFIXES[tag_scheme]
    sentences, words, tags, lines = [], [], [], []
    document_index, seen_docstart = 0, False

    def end_sentence():
        if not words:
            return
        _check_sequence(tags, path, lines, tag_index + 1, tag_scheme)
        converted = iobes_to_iob2(tags) if tag_scheme == "iobes" else iob1_to_iob2(tags)
        sentences.append(
            ConllSentence(list(words), converted, document_index, path, list(lines), tag_index + 1, list(tags))
        )
        words.clear(), tags.clear(), lines.clear()

    def resolve_tag_column(count, line_number):
        index = tag_column if tag_column >= 0 else count + tag_column
        if not 0 < index < count:
            raise ConllFormatError(
                path, line_number, None,
                f"tag_column={tag_column} (--tag_column) names no tag column: the line has {count} columns, the "
                f"first holds the word, so the tag column is 1..{count - 1} (0-based) or -1..-{count - 1}",
            )
        return index

    for line_number, raw_line in enumerate(text.split("\n"), start=1):
        line = raw_line.rstrip("\r")
        if not line.strip():
            end_sentence()
            continue
        columns = line.split()
        if expected_columns is None:
            if len(columns) < 2:
                raise ConllFormatError(
                    path, line_number, None,
                    f"expected at least 2 space-separated columns (word ... tag; CoNLL-2003 has 4: word POS chunk "
                    f"NER), got {len(columns)}: {line!r}",
                )
            expected_columns, columns_line = len(columns), line_number
        elif len(columns) != expected_columns:
            origin = f"as on line {columns_line}" if columns_line else "as requested"
            column = min(len(columns), expected_columns) + 1
            raise ConllFormatError(
                path, line_number, column,
                f"expected {expected_columns} space-separated columns {origin}, got {len(columns)}: {line!r}",
            )
        if tag_index is None:
            tag_index = resolve_tag_column(expected_columns, line_number)
        if columns[0] == DOCSTART:
            end_sentence()
            if seen_docstart or sentences:
                document_index += 1
            seen_docstart = True
            continue
        tag = columns[tag_index]
        try:
            prefix, _ = split_tag(tag)
        except ValueError as error:
            raise ConllFormatError(path, line_number, tag_index + 1, str(error)) from None
        if prefix != "O" and prefix not in prefixes:
            hint = "; is the file IOBES (--tag_scheme iobes)?" if prefix in ("E", "S") else ""
            raise ConllFormatError(
                path, line_number, tag_index + 1,
                f"tag {tag!r} has a prefix that {tag_scheme.upper()} does not use (it has O, "
                f"{', '.join(p + '-<TYPE>' for p in prefixes)}){hint}",
            )
        words.append(columns[0])
        tags.append(tag)
        lines.append(line_number)
    end_sentence()
    if not sentences:
        raise ConllFormatError(
            path, None, None,
            "no sentences found: expected CoNLL column lines 'word ... tag' (CoNLL-2003: 'word POS chunk NER') "
            "with a blank line after each sentence (is the file empty?)",
        )
    return sentences


def write_conll(path, sentences, tag_scheme="iob2"):
    """Writes sentences as a 2-column `word tag` file (blank line after each sentence), tags in `tag_scheme`.

    With `read_conll(path, tag_scheme=...)` it round-trips: the same words and IOB2 tags.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out.conll")
    >>> write_conll(path, [ConllSentence(["New", "York"], ["B-LOC", "I-LOC"])], tag_scheme="iobes")
    >>> open(path).read()
    'New B-LOC\\nYork E-LOC\\n\\n'
    """
    from keras_bert_impl.checkpoints.atomic_files import atomic_write_text

    lines = []
    for sentence in sentences:
        lines.extend(f"{w} {t}" for w, t in zip(sentence.words, convert_tags(sentence.tags, "iob2", tag_scheme)))
        lines.append("")
    atomic_write_text(os.fspath(path), "\n".join(lines) + "\n")


def convert_conll_file(source, target, from_scheme, to_scheme, tag_column=-1):
    """Rewrites a CoNLL file with its tags in another scheme; every other byte of each line is kept.

    Example:
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> _ = open(os.path.join(folder, "a"), "w").write("EU NNP I-NP I-ORG\\nsays VBZ I-VP O\\n\\n")
    >>> convert_conll_file(os.path.join(folder, "a"), os.path.join(folder, "b"), "iob1", "iobes")
    >>> open(os.path.join(folder, "b")).read()
    'EU NNP I-NP S-ORG\\nsays VBZ I-VP O\\n\\n'
    """
    from keras_bert_impl.checkpoints.atomic_files import atomic_write_text

    sentences = read_conll(source, tag_scheme=from_scheme, tag_column=tag_column)
    with open(os.fspath(source), "rb") as f:
        lines = _decode(os.fspath(source), f.read()).split("\n")
    for sentence in sentences:
        for line_number, tag in zip(sentence.line_numbers, convert_tags(sentence.tags, "iob2", to_scheme)):
            columns = lines[line_number - 1].split()
            index = sentence.tag_column - 1
            columns[index] = tag
            lines[line_number - 1] = " ".join(columns)
    atomic_write_text(os.fspath(target), "\n".join(lines))


def check_known_tags(sentences, label_names, training_file=None, source=None):
    """Every tag of `sentences` (validation or test) must be in `label_names` (from the training file).

    Raises:
        ConllFormatError naming file, line and column of the first unknown tag.
    """
    known = set(label_names)
    types = sorted({split_tag(t)[1] for t in label_names} - {""})
    if source is None:
        source = f"the training file {training_file}" if training_file else "the training data"
    for sentence in sentences:
        for index, tag in enumerate(sentence.tags):
            if tag not in known:
                original = sentence.source_tags[index] if sentence.source_tags else tag
                raise ConllFormatError(
                    sentence.path, sentence.line_numbers[index] if sentence.line_numbers else None,
                    sentence.tag_column,
                    f"tag {original!r} (type {split_tag(tag)[1]!r}) is not in {source}, whose entity types "
                    f"are {types}",
                )


def num_documents(sentences):
    """Number of distinct documents among `sentences` (per file)."""
    return len({(s.path, s.document_index) for s in sentences})


def find_split_files(data_dir):
    """Paths of the train/dev/test files in `data_dir`: the original names or the common renaming.

    Returns:
        dict `{"train": path, "dev": path, "test": path}` for the splits found.

    Raises:
        FileNotFoundError: no training or dev file, listing the names looked for.
        IsADirectoryError: the training or dev file's name is a directory (and no other name of it a file).

    Example:
    >>> find_split_files("../shared/data/conll2003")["dev"]  # doctest: +SKIP
    '../shared/data/conll2003/eng.testa'
    """
    found, folders = {}, {}
    for split, names in SPLIT_FILE_NAMES.items():
        for name in names:
            candidate = os.path.join(data_dir, name)
            if os.path.isfile(candidate):
                found[split] = candidate
                break
            if os.path.isdir(candidate):
                folders.setdefault(split, candidate)
    for split in ("train", "dev"):
        if split not in found and split in folders:  # (was "no CoNLL file for train" beside a folder eng.train)
            raise IsADirectoryError(f"{folders[split]}: a directory; expected the {split} split's file, {CONLL_FILE}")
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


# Step 1's name in every task (`classification.read_examples`, `tagging.read_examples`, `span_qa.read_examples`; docs/architecture.md).
read_examples = read_conll
