"""Learn a WordPiece vocabulary (vocab.txt) for BertTokenizer from text files.

Example:
    python recipes/build_vocab.py --input '../shared/data/corpus/gutenberg/*.txt' \\
        --vocab_size 30522 --output vocab.txt --lowercase
"""

import argparse

import sys

if __name__ == "__main__" and "tensorflow" not in sys.modules:  # (not when a test runs it in its own process)
    from native_logs import quiet_native_logs

    quiet_native_logs()  # before the imports below (TensorFlow): its start-up log lines off stderr

from keras_bert_impl.text.vocabulary import build_vocabulary, print_progress


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, nargs="+", help="text file(s) or glob pattern(s), one sentence or paragraph a line")
    parser.add_argument("--vocab_size", type=int, default=30522, help="maximum vocabulary size, special tokens included")
    parser.add_argument("--output", required=True, help="where to write vocab.txt")
    parser.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True, help="uncased vocabulary: lower-case, strip accents (default); --no-lowercase: cased")
    parser.add_argument("--no_lowercase", dest="lowercase", action="store_false", help="the same as --no-lowercase")
    parser.add_argument("--errors", choices=["strict", "replace", "ignore"], default="strict", help="invalid UTF-8 handling")
    parser.add_argument("--max_lines", type=int, default=None, help="read at most this many lines")
    parser.add_argument("--max_unique_chars", type=int, default=1000, help="alphabet size limit of the learner")
    args = parser.parse_args()

    vocab = build_vocabulary(
        args.input,
        args.vocab_size,
        lowercase=args.lowercase,
        output=args.output,
        errors=args.errors,
        max_lines=args.max_lines,
        learn_params={"max_unique_chars": args.max_unique_chars},
        progress=print_progress,
    )
    print(f"{len(vocab)} tokens written to {args.output}")


if __name__ == "__main__":
    main()
