"""Tokenises pretraining text once into TFRecord shards of documents (or one NumPy `.npz` file).

For pod-scale runs: `pretraining_dataset` (and `recipes/pretrain.py --train_files
'prefix-*.tfrecord'`) then skips tokenisation; sentence pairs and masks are still
drawn on the fly every epoch. Use the vocabulary and casing of the model to train.

For a host without TensorFlow (a GPU machine running the JAX or torch backend),
`--output_format npz` writes `PREFIX.npz`: token ids, sentence and document
lengths and the vocabulary, read by `keras_bert_impl.data.array_pretraining`
(NumPy only, the same pairs and 80/10/10 masking).

Example:

    python recipes/prepare_pretraining_data.py --input 'text/train-*.txt' \
        --vocab vocab.txt --output_prefix gs://bucket/records/train --num_shards 64
    python recipes/prepare_pretraining_data.py --input train.txt --vocab vocab.txt \
        --output_prefix arrays/train --output_format npz
"""

import argparse
import json
import sys

from command_line import OneLineParser, exit_on_user_error, positive
from interruption import one_line_on_ctrl_c

if __name__ == "__main__" and "tensorflow" not in sys.modules:  # (not when a test runs it in its own process)
    from native_logs import quiet_native_logs

    quiet_native_logs()  # before the imports below (TensorFlow): its start-up log lines off stderr
    one_line_on_ctrl_c()  # before the imports below (TensorFlow: seconds): Ctrl-C then is one line too

from keras_bert_impl.data.array_pretraining import write_document_arrays
from keras_bert_impl.data.corpus import check_output_file
from keras_bert_impl.data.document_records import tokenize_documents, write_document_records
from keras_bert_impl.data.text_documents import check_text_files
from keras_bert_impl.text.tokenizer import BertTokenizer
from keras_bert_impl.text.vocabulary import check_vocabulary_file

# A Ctrl-C's line: every output file is written whole at the end (a temporary name, then renamed), never half.
INTERRUPTED = "Interrupted: no output was written (each file is written whole, at the end): rerun the same command."


def main(argv=None):
    parser = OneLineParser(description=__doc__.split("\n\n")[0], prog="prepare_pretraining_data.py")
    parser.add_argument("--input", nargs="+", required=True,
                        help="text files or globs: one sentence a line, blank line between documents")
    parser.add_argument("--vocab", required=True, help="vocab.txt of the model to pretrain")
    parser.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True,
                        help="uncased vocabulary (default) or --no-lowercase for a cased one")
    parser.add_argument("--output_prefix", required=True,
                        help="shards are written as PREFIX-00000-of-0000N.tfrecord (npz: PREFIX.npz)")
    parser.add_argument("--output_format", choices=("tfrecord", "npz"), default="tfrecord",
                        help="TFRecord shards for pretraining_dataset (default), or one .npz file for "
                             "ArrayPretrainingBatches on a host without TensorFlow")
    parser.add_argument("--num_shards", type=positive(int), default=1,
                        help="at least the number of input pipelines (hosts) that will read them (tfrecord only)")
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error")
    args = parser.parse_args(argv)

    def job():
        # Every flag and input file is checked before any work: a bad byte in the last file is found in seconds.
        if args.output_format == "npz" and args.num_shards != 1:
            raise ValueError(f"--num_shards {args.num_shards}: --output_format npz writes one file; drop --num_shards")
        try:
            paths = check_text_files(args.input)
        except ValueError as error:
            raise ValueError(f"--input: {error}") from None
        check_vocabulary_file(args.vocab, "--vocab")  # after the inputs, as recipes/pretrain.py checks them
        first = (args.output_prefix + ".npz" if args.output_format == "npz"
                 else f"{args.output_prefix}-00000-of-{args.num_shards:05d}.tfrecord")
        check_output_file(first, "--output_prefix", example="train")
        tokenizer = BertTokenizer(args.vocab, lowercase=args.lowercase)
        if args.output_format == "npz":
            return write_document_arrays(tokenize_documents(paths, tokenizer, check=False),
                                         tokenizer.get_vocabulary(), args.output_prefix + ".npz")
        return write_document_records(paths, tokenizer, args.output_prefix, num_shards=args.num_shards, check=False)

    stats = exit_on_user_error(job, debug=args.debug, interrupted_line=INTERRUPTED)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
