"""Turns raw books and articles into BERT's pretraining text format.

One sentence a line, a blank line between documents (one document per chapter
for Project Gutenberg books). See `keras_bert_impl.data.corpus`.

Example:

    python recipes/prepare_corpus.py \
        --input '../shared/data/corpus/gutenberg/pg*.txt' \
        --output /tmp/train.txt --valid_output /tmp/valid.txt --valid_every 10
"""

import argparse
import json

import sys

if __name__ == "__main__" and "tensorflow" not in sys.modules:  # (not when a test runs it in its own process)
    from native_logs import quiet_native_logs

    quiet_native_logs()  # before the imports below (TensorFlow): its start-up log lines off stderr

from keras_bert_impl.data import corpus


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", nargs="+", required=True, help="input files or glob patterns")
    parser.add_argument("--output", required=True, help="training text output file")
    parser.add_argument("--valid_output", help="optional held-out output file")
    parser.add_argument("--valid_every", type=int, default=0,
                        help="with --valid_output: every N-th document is held out")
    parser.add_argument("--format", default="auto", choices=corpus.INPUT_FORMATS,
                        help="input kind (auto: gutenberg if the PG start marker is present, else lines)")
    parser.add_argument("--errors", default="strict", choices=("strict", "replace"),
                        help="what to do with bytes that are not UTF-8")
    parser.add_argument("--min_document_words", type=int, default=20)
    parser.add_argument("--fallback_document_words", type=int, default=2000)
    parser.add_argument("--max_sentence_words", type=int, default=128)
    args = parser.parse_args()

    try:
        stats = corpus.prepare_corpus(
            args.input,
            args.output,
            valid_output=args.valid_output,
            valid_every=args.valid_every,
            input_format=args.format,
            errors=args.errors,
            min_document_words=args.min_document_words,
            fallback_document_words=args.fallback_document_words,
            max_sentence_words=args.max_sentence_words,
        )
    except ValueError as error:
        parser.exit(2, f"prepare_corpus: error: {error}\n")
    for split, counts in stats.items():
        if counts is not None:
            print(json.dumps({"split": split, **vars(counts)}))


if __name__ == "__main__":
    main()
