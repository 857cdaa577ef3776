"""Step 1, reading: SQuAD v1.1 / v2.0 JSON files (`.json` or `.json.gz`) -> `SquadExample`s.

- `load_squad_json(path)`: the parsed file (`.json` or `.json.gz`), with a
  clear error for a file that is not JSON.
- `read_squad_examples(path_or_dict)`: validates the official layout and
  returns `SquadExample`s. A malformed element raises `SquadFormatError`
  naming the file and the JSON path of the element (e.g.
  `data[3].paragraphs[0].qas[2].answers[0].answer_start`) and what was
  expected; empty contexts and questions are errors too. An answer whose
  `answer_start` does not point at its `text` in the context is dropped with
  a counted warning (`ReadStats.mismatched_answers`); never a wrong label.
  In training, a question without an `answers` key is skipped with one
  warning naming the file, the count and the first ids
  (`ReadStats.missing_answers`).
- `split_articles(dataset, num_train_articles)`: the article-level split of
  one file (the documented dev split used while the train file is absent).

Pure Python. The next steps: `features`, `batches`, `evaluation`, `outputs`, `prediction`, `run`.
"""

import dataclasses
import gzip
import json
import logging
import os

from keras_bert_impl.file_errors import FileFormatError, decode_utf8

logger = logging.getLogger(__name__)

SQUAD_FILE = "a SQuAD .json or .json.gz file"  # what a SQuAD file flag takes (`file_errors.check_input_file`)


class SquadFormatError(FileFormatError):
    """A SQuAD file that does not follow the official layout: a `FileFormatError` naming the file and the JSON path.

    Built as `SquadFormatError(path, line, column, problem)`; `.path` is the
    file (or the `source` name of a dict). A malformed element has no line:
    its JSON path starts the problem (`<file>: <JSON path>: expected ...,
    got ...`). Invalid JSON keeps its position in the problem (`<file>: not
    valid JSON at line 2 column 17: ...`), `.line` None; a byte that is not
    UTF-8 is a `SquadEncodingError` with `.line` and `.column`.

    Example:
    >>> error = SquadFormatError("dev.json", None, None, "data[0].title: expected a string, got 7.")
    >>> str(error), error.path, error.line, isinstance(error, FileFormatError)
    ('dev.json: data[0].title: expected a string, got 7.', 'dev.json', None, True)
    """


class SquadEncodingError(SquadFormatError):
    """A byte of a SQuAD file that is not UTF-8 (`keras_bert_impl.file_errors.decode_utf8`: file, line, column, byte).

    Example:
    >>> try:
    ...     decode_utf8(b'{"title": "caf\\xe9"}', "dev.json", SquadEncodingError)
    ... except SquadFormatError as error:
    ...     print(error.line, error.column, error.problem.split(" at ")[0])
    1 15 byte 0xe9
    """


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One question about one context.

    Attributes:
        qas_id: the question id of the file.
        title: the article title.
        question: question text.
        context: the paragraph, unchanged.
        answers: tuple of `(text, answer_start)` whose `answer_start` was
            verified against the context (character offsets).
        is_impossible: True for SQuAD v2.0 questions without an answer.
    """

    qas_id: str
    title: str
    question: str
    context: str
    answers: tuple
    is_impossible: bool = False


@dataclasses.dataclass
class ReadStats:
    """Counts of what `read_squad_examples` dropped.

    Attributes:
        questions: questions in the file.
        mismatched_answers: answers dropped because `answer_start` does not
            point at `text` in the context.
        unlabelled_questions: answerable questions left without any verified
            answer (they cannot be trained on; skipped when `is_training`).
        missing_answers: answerable questions without an `answers` key (skipped
            when `is_training`, with one warning naming the file, the count
            and the first ids).
        skipped_questions: questions not returned.
    """

    questions: int = 0
    mismatched_answers: int = 0
    unlabelled_questions: int = 0
    missing_answers: int = 0
    skipped_questions: int = 0


def load_squad_json(path):
    """Reads a SQuAD `.json` or `.json.gz` file into a dict.

    Raises:
        SquadFormatError: the file is not valid JSON (line and column given);
            `SquadEncodingError`, a byte that is not UTF-8 (file, line, column, byte).

    Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.json")
    >>> _ = open(path, "w").write('{"data": [], "version": "1.1"}')
    >>> load_squad_json(path)["version"]
    '1.1'
    """
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (gzip.BadGzipFile, EOFError) as error:
        raise SquadFormatError(path, None, None, f"not a valid gzip file ({error}).") from error
    text = decode_utf8(data, path, SquadEncodingError, reads_gz=True)  # (a .json.gz is read as it is)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        # Not JSON from its first character (a CSV, a text file): say what a SQuAD file is.
        kind = (" (a SQuAD file is one JSON object, {\"version\": ..., \"data\": [{\"title\": ..., \"paragraphs\": "
                "[...]}]}, in a .json or .json.gz file)" if (error.lineno, error.colno) == (1, 1) else "")
        raise SquadFormatError(
            path, None, None, f"not valid JSON at line {error.lineno} column {error.colno}: {error.msg}{kind}."
        ) from error


def _expect(condition, source, json_path, expected, value):
    if not condition:
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        raise SquadFormatError(source, None, None, f"{json_path}: expected {expected}, got {shown}.")


def _get(container, key, source, json_path, expected):
    """`container[key]`; a missing key is a `SquadFormatError` saying so (`<path>: no "context" key; expected
    "context": a string (...)`), not `expected a string, got None` as if the key held a null."""
    if key not in container:
        where = f"{json_path}: no" if json_path != "$" else "no"
        raise SquadFormatError(source, None, None, f'{where} "{key}" key; expected "{key}": {expected}.')
    return container[key]


def squad_version(dataset):
    """`"2.0"` if the file says so (`"version": "v2.0"`) or any question has `is_impossible`, else `"1.1"`."""
    version = str(dataset.get("version", "")).lstrip("v") if isinstance(dataset, dict) else ""
    if version.startswith("2"):
        return "2.0"
    for article in dataset.get("data", []) if isinstance(dataset, dict) else []:
        for paragraph in article.get("paragraphs", []) if isinstance(article, dict) else []:
            for qa in paragraph.get("qas", []) if isinstance(paragraph, dict) else []:
                if isinstance(qa, dict) and "is_impossible" in qa:
                    return "2.0"
    return "1.1"


def read_squad_examples(path_or_dataset, is_training=False, source=None):
    """Validates a SQuAD v1.1/v2.0 file and returns its questions.

    Args:
        path_or_dataset: path of a `.json`/`.json.gz` file, or the parsed dict.
        is_training: skip answerable questions without a verified answer (they
            would have no label); otherwise they are kept (for prediction).
        source: name used in error messages for a dict input.

    Returns:
        `(examples, stats)`: a list of `SquadExample` in file order and a `ReadStats`.

    Raises:
        SquadFormatError: naming the file, the JSON path of the bad element and
            what was expected.

    Example:
    >>> data = {"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": "The cat sat.",
    ...     "qas": [{"id": "q1", "question": "Who sat?", "answers": [{"text": "cat", "answer_start": 4}]}]}]}]}
    >>> examples, stats = read_squad_examples(data)
    >>> examples[0].answers, stats.mismatched_answers
    ((('cat', 4),), 0)
    """
    if isinstance(path_or_dataset, dict):
        dataset = path_or_dataset
        source = source or "<dict>"
    else:
        source = source or os.fspath(path_or_dataset)
        dataset = load_squad_json(path_or_dataset)
    _expect(isinstance(dataset, dict), source, "$", 'a JSON object {"data": [...], "version": ...}', dataset)
    data = _get(dataset, "data", source, "$", "a list of articles")
    _expect(isinstance(data, list), source, "data", "a list of articles", data)
    stats = ReadStats()
    examples = []
    mismatched_ids = []
    missing_ids = []
    for i, article in enumerate(dataset["data"]):
        article_path = f"data[{i}]"
        _expect(isinstance(article, dict), source, article_path, "an object with 'paragraphs'", article)
        title = article.get("title", "")
        _expect(isinstance(title, str), source, f"{article_path}.title", "a string", title)
        paragraphs = _get(article, "paragraphs", source, article_path, "a list of paragraphs")
        _expect(isinstance(paragraphs, list), source, f"{article_path}.paragraphs", "a list of paragraphs", paragraphs)
        for j, paragraph in enumerate(paragraphs):
            paragraph_path = f"{article_path}.paragraphs[{j}]"
            _expect(isinstance(paragraph, dict), source, paragraph_path, "an object with 'context' and 'qas'", paragraph)
            context = _get(paragraph, "context", source, paragraph_path, "a string (the paragraph's text)")
            _expect(isinstance(context, str), source, f"{paragraph_path}.context", "a string", context)
            _expect(bool(context.strip()), source, f"{paragraph_path}.context", "a non-empty context", context)
            qas = _get(paragraph, "qas", source, paragraph_path, "a list of questions")
            _expect(isinstance(qas, list), source, f"{paragraph_path}.qas", "a list of questions", qas)
            for k, qa in enumerate(qas):
                qa_path = f"{paragraph_path}.qas[{k}]"
                _expect(isinstance(qa, dict), source, qa_path, "an object with 'id', 'question', 'answers'", qa)
                qas_id = _get(qa, "id", source, qa_path, "a non-empty string")
                _expect(isinstance(qas_id, str) and qas_id, source, f"{qa_path}.id", "a non-empty string", qas_id)
                question = _get(qa, "question", source, qa_path, "a string")
                _expect(isinstance(question, str), source, f"{qa_path}.question", "a string", question)
                _expect(bool(question.strip()), source, f"{qa_path}.question", "a non-empty question", question)
                is_impossible = qa.get("is_impossible", False)
                _expect(isinstance(is_impossible, bool), source, f"{qa_path}.is_impossible", "true or false", is_impossible)
                answers = qa.get("answers", [])
                _expect(isinstance(answers, list), source, f"{qa_path}.answers", "a list of answers", answers)
                stats.questions += 1
                verified = []
                for m, answer in enumerate(answers):
                    answer_path = f"{qa_path}.answers[{m}]"
                    _expect(isinstance(answer, dict), source, answer_path, "an object with 'text' and 'answer_start'", answer)
                    text = _get(answer, "text", source, answer_path, "a string (the answer)")
                    _expect(isinstance(text, str), source, f"{answer_path}.text", "a string", text)
                    start = _get(answer, "answer_start", source, answer_path,
                                 "a non-negative int (character offset into the context)")
                    _expect(
                        isinstance(start, int) and not isinstance(start, bool) and start >= 0,
                        source,
                        f"{answer_path}.answer_start",
                        "a non-negative int (character offset into the context)",
                        start,
                    )
                    if context[start : start + len(text)] != text or not text:
                        stats.mismatched_answers += 1
                        mismatched_ids.append(f"{qas_id} ({answer_path})")
                        continue
                    verified.append((text, start))
                if not is_impossible and not verified and answers:
                    stats.unlabelled_questions += 1
                    if is_training:
                        stats.skipped_questions += 1
                        continue
                if is_training and not is_impossible and not answers:
                    stats.unlabelled_questions += 1
                    stats.skipped_questions += 1
                    if "answers" not in qa:
                        stats.missing_answers += 1
                        missing_ids.append(qas_id)
                    continue
                examples.append(
                    SquadExample(
                        qas_id=qas_id,
                        title=title,
                        question=question,
                        context=context,
                        answers=tuple(verified),
                        is_impossible=is_impossible,
                    )
                )
    if stats.mismatched_answers:
        logger.warning(
            "%s: %d answer(s) dropped because answer_start does not point at the answer text "
            "in the context (%d question(s) skipped); first: %s",
            source,
            stats.mismatched_answers,
            stats.skipped_questions,
            ", ".join(mismatched_ids[:5]),
        )
    if stats.missing_answers:
        logger.warning(
            "%s: %d question(s) have no 'answers' key and are skipped for training (first ids: %s); give each "
            "answerable question its answers, or mark it \"is_impossible\": true (SQuAD v2.0, --version 2.0)",
            source,
            stats.missing_answers,
            ", ".join(missing_ids[:5]),
        )
    return examples, stats


def select_questions(dataset, question_ids):
    """The SQuAD dict with only the questions in `question_ids`, in file order; the articles and paragraphs left
    without a question are dropped. The gold of a subset of questions, for the official metrics (`SpanQaConfig`'s
    `max_eval_samples`, the benchmark's `--eval_questions`).

    Example:
    >>> squad = {"version": "1.1", "data": [{"title": "a", "paragraphs": [
    ...     {"context": "x", "qas": [{"id": "q1"}, {"id": "q2"}]}, {"context": "y", "qas": [{"id": "q3"}]}]}]}
    >>> select_questions(squad, {"q2"})
    {'version': '1.1', 'data': [{'title': 'a', 'paragraphs': [{'context': 'x', 'qas': [{'id': 'q2'}]}]}]}
    """
    articles = []
    for article in dataset["data"]:
        paragraphs = [dict(paragraph, qas=[qa for qa in paragraph["qas"] if qa["id"] in question_ids])
                      for paragraph in article["paragraphs"]]
        paragraphs = [paragraph for paragraph in paragraphs if paragraph["qas"]]
        if paragraphs:
            articles.append(dict(article, paragraphs=paragraphs))
    return dict(dataset, data=articles)


def split_articles(dataset, num_train_articles):
    """Splits a SQuAD dict by article: the first `num_train_articles` and the rest (file order).

    Example:
    >>> first, rest = split_articles({"version": "1.1", "data": [{"title": "a"}, {"title": "b"}]}, 1)
    >>> [a["title"] for a in first["data"]], [a["title"] for a in rest["data"]]
    (['a'], ['b'])
    """
    articles = dataset["data"]
    if not 0 < num_train_articles < len(articles):
        raise ValueError(
            f"num_train_articles={num_train_articles} must be between 1 and {len(articles) - 1} "
            f"(the file has {len(articles)} articles)."
        )
    version = dataset.get("version")
    return (
        {"version": version, "data": articles[:num_train_articles]},
        {"version": version, "data": articles[num_train_articles:]},
    )


# Step 1's name in every task (`classification.read_examples`, `tagging.read_examples`, `span_qa.read_examples`; docs/architecture.md).
read_examples = read_squad_examples
