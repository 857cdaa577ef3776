"""Learn a WordPiece vocabulary (vocab.txt) for BertTokenizer from text files.

Example:
    python recipes/build_vocab.py --input '../shared/data/corpus/gutenberg/*.txt' \\
        --vocab_size 30522 --output vocab.txt --lowercase

The flags, the input files (UTF-8, with --errors strict) and --output are checked before any work; an error is one
line `error: ...` and exit status 2 (--debug shows the traceback).
"""

import argparse
import sys

from command_line import OneLineParser, exit_on_user_error, positive
from interruption import one_line_on_ctrl_c

if __name__ == "__main__" and "tensorflow" not in sys.modules:  # (not when a test runs it in its own process)
    from native_logs import quiet_native_logs

    quiet_native_logs()  # before the imports below (TensorFlow): its start-up log lines off stderr
    one_line_on_ctrl_c()  # before the imports below (TensorFlow: seconds): Ctrl-C then is one line too

from keras_bert_impl.text.tokenizer import SPECIAL_TOKENS
from keras_bert_impl.text.vocabulary import (
    build_vocabulary, check_input_files, expand_input_patterns, print_progress,
)

# A Ctrl-C's line: the vocabulary is written whole at the end (a temporary file, then renamed), never half.
INTERRUPTED = "Interrupted: no vocabulary was written (it is written whole, at the end): rerun the same command."


def vocab_size_value(text):
    """An argparse `type` for --vocab_size: an integer above the number of special tokens, which come first."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value <= len(SPECIAL_TOKENS):
        raise argparse.ArgumentTypeError(f"must be an integer > {len(SPECIAL_TOKENS)} (the special tokens "
                                         f"{' '.join(SPECIAL_TOKENS)} come first), got {text!r}")
    return value


def main(argv=None):
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                           prog="build_vocab.py")
    parser.add_argument("--input", required=True, nargs="+", help="text file(s) or glob pattern(s), one sentence or paragraph a line")
    parser.add_argument("--vocab_size", type=vocab_size_value, default=30522, help="maximum vocabulary size, special tokens included")
    parser.add_argument("--output", required=True, help="where to write vocab.txt")
    parser.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True, help="uncased vocabulary: lower-case, strip accents (default); --no-lowercase: cased")
    parser.add_argument("--no_lowercase", dest="lowercase", action="store_false", help="the same as --no-lowercase")
    parser.add_argument("--errors", choices=["strict", "replace", "ignore"], default="strict", help="invalid UTF-8 handling")
    parser.add_argument("--max_lines", type=positive(int), default=None, help="read at most this many lines")
    parser.add_argument("--max_unique_chars", type=positive(int), default=1000, help="alphabet size limit of the learner")
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error")
    args = parser.parse_args(argv)

    def job():
        from keras_bert_impl.data.corpus import check_output_file

        check_output_file(args.output, "--output", example="vocab.txt")
        try:  # every input file read once before any counting: a bad byte is found in seconds, not at the end
            files = expand_input_patterns(args.input)
            check_input_files(files, errors=args.errors, max_lines=args.max_lines)
        except ValueError as error:
            raise ValueError(f"--input: {error}") from None
        return build_vocabulary(
            files,
            args.vocab_size,
            lowercase=args.lowercase,
            output=args.output,
            errors=args.errors,
            max_lines=args.max_lines,
            learn_params={"max_unique_chars": args.max_unique_chars},
            progress=print_progress,
        )

    vocab = exit_on_user_error(job, debug=args.debug, interrupted_line=INTERRUPTED)
    print(f"{len(vocab)} tokens written to {args.output}")


if __name__ == "__main__":
    main()
