"""Turns raw books and articles into BERT's pretraining text format.

One sentence a line, a blank line between documents (one document per chapter
for Project Gutenberg books; one a row of a table's --text_column). See
`keras_bert_impl.data.corpus`.

Example:

    python recipes/prepare_corpus.py \
        --input '../shared/data/corpus/gutenberg/pg*.txt' \
        --output /tmp/train.txt --valid_output /tmp/valid.txt --valid_every 10

Your own texts in a table (.csv, .tsv or .jsonl, as the fine-tuning recipes read), one document a row (rows
without text are skipped, and their count and the first one's line printed):

    python recipes/prepare_corpus.py --input reviews.csv --text_column text --output train.txt
"""

import json
import os
import sys

from command_line import OneLineParser, exit_on_user_error
from interruption import one_line_on_ctrl_c

if __name__ == "__main__" and "tensorflow" not in sys.modules:  # (not when a test runs it in its own process)
    from native_logs import quiet_native_logs

    quiet_native_logs()  # before the imports below (TensorFlow): its start-up log lines off stderr
    one_line_on_ctrl_c()  # before the imports below (TensorFlow: seconds): Ctrl-C then is one line too

from keras_bert_impl.data import corpus
from keras_bert_impl.data.text_documents import table_file_problem
from keras_bert_impl.file_errors import check_input_file
from keras_bert_impl.file_patterns import expand_patterns

# A Ctrl-C's line: each output file is written whole at the end (a temporary file, then renamed), never half.
INTERRUPTED = "Interrupted: no output was written (each file is written whole, at the end): rerun the same command."


def table_documents(path, text_column, max_sentence_words=128):
    """The documents of a table file: each row's `text_column`, split into sentences.

    A row without text (an empty or whitespace-only cell, a JSON null) is no document: it is skipped, and a line
    on stdout says how many rows were and where the first was, e.g. ``reviews.csv: skipped 3 rows without text in
    column 'text' (the first: line 4)``. A table with no text in any row, a missing column, bytes that are not
    UTF-8 or a text that is not a string (a number in JSON Lines) are the reader's one-line errors (file, line,
    column). Only `text_column` is read: no pair or label column.
    """
    from keras_bert_impl.tasks.classification.table_files import read_table

    table = read_table(path, text_column, empty_texts="skip")
    if table.skipped_lines:
        count = len(table.skipped_lines)
        print(f"{table.path}: skipped {count} row{'s' if count != 1 else ''} without text in column "
              f"{text_column!r} (the first: line {table.skipped_lines[0]})")
    return [document for document in (
        [sentence for line in text.split("\n") for sentence in corpus.split_sentences(line, max_sentence_words)]
        for text in table.texts) if document]


def main():
    parser = OneLineParser(description=__doc__.split("\n\n")[0], prog="prepare_corpus.py")
    parser.add_argument("--input", nargs="+", required=True, help="input files or glob patterns")
    parser.add_argument("--output", required=True, help="training text output file")
    parser.add_argument("--valid_output", help="optional held-out output file")
    parser.add_argument("--valid_every", type=int, default=0,
                        help="with --valid_output (needed with it): every N-th document (N >= 2) is held out")
    parser.add_argument("--format", default="auto", choices=corpus.INPUT_FORMATS,
                        help="input kind (auto: gutenberg if the PG start marker is present, else lines)")
    parser.add_argument("--errors", default="strict", choices=("strict", "replace"),
                        help="bytes that are not UTF-8 in a text input: strict (default) stops on the first, naming "
                             "file, line and byte; replace writes U+FFFD for them. Tables are read strictly")
    parser.add_argument("--min_document_words", type=int, default=20,
                        help="books: documents (chapters) of fewer words are dropped, e.g. title pages (default 20)")
    parser.add_argument("--fallback_document_words", type=int, default=2000,
                        help="books with fewer than two chapter headings are cut into documents of about this many "
                             "words (default 2000)")
    parser.add_argument("--max_sentence_words", type=int, default=128,
                        help="longer sentences are cut into pieces of at most this many words (default 128)")
    parser.add_argument("--text_column", default=None,
                        help="the inputs are tables (.csv, .tsv, .jsonl): each row's text in this column (JSON key) "
                             "is a document, split into sentences; rows without text are skipped and counted")
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error")
    args = parser.parse_args()
    if (args.valid_output is None) != (args.valid_every == 0):
        parser.error("--valid_output and --valid_every go together: --valid_output FILE --valid_every N holds out "
                     "every N-th document (N >= 2)")
    if args.text_column is not None and args.errors == "replace":
        parser.error("--errors replace reads text inputs only; a table (--text_column) is read strictly: re-encode "
                     "it as UTF-8 (the error names the first byte that is not)")

    def job():
        # The outputs first: a directory or a read-only place was refused only after every input had been read.
        corpus.check_output_file(args.output, "--output")
        if args.valid_output is not None:
            corpus.check_output_file(args.valid_output, "--valid_output")
            if os.path.abspath(args.valid_output) == os.path.abspath(args.output):
                raise ValueError(f"--valid_output {args.valid_output} is --output too: pass another file")
        inputs = expand_patterns(args.input)
        for path in inputs:  # (an unreadable one was "[Errno 13] Permission denied: '...'")
            check_input_file(path, "--input", "a UTF-8 text file, or a table with --text_column")
        if args.text_column is None:  # a table read as text would train on its header, commas and labels
            tables = [path for path in inputs if table_file_problem(path)]
            if tables:
                raise ValueError(f"{tables[0]} is a table: pass --text_column, the column of its texts "
                                 "(each row becomes a document)")
        return corpus.prepare_corpus(
            inputs,  # (expanded once: each is a file's name)
            args.output,
            valid_output=args.valid_output,
            valid_every=args.valid_every,
            input_format=args.format,
            errors=args.errors,
            min_document_words=args.min_document_words,
            fallback_document_words=args.fallback_document_words,
            max_sentence_words=args.max_sentence_words,
            read_documents=None if args.text_column is None else (
                lambda path: table_documents(path, args.text_column, args.max_sentence_words)),
        )

    stats = exit_on_user_error(job, debug=args.debug, interrupted_line=INTERRUPTED)
    for split, counts in stats.items():
        if counts is not None:
            print(json.dumps({"split": split, **vars(counts)}))


if __name__ == "__main__":
    main()
