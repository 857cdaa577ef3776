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

if __name__ == "__main__" and "tensorflow" not in sys.modules:  # (not when a test runs it in its own process)
    from native_logs import quiet_native_logs

    quiet_native_logs()  # before the imports below (TensorFlow): its start-up log lines off stderr

from keras_bert_impl.data.array_pretraining import write_document_arrays
from keras_bert_impl.data.document_records import tokenize_documents, write_document_records
from keras_bert_impl.text.tokenizer import BertTokenizer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
    parser.add_argument("--num_shards", type=int, default=1,
                        help="at least the number of input pipelines (hosts) that will read them (tfrecord only)")
    args = parser.parse_args(argv)
    if args.output_format == "npz" and args.num_shards != 1:
        parser.error(f"--num_shards {args.num_shards}: --output_format npz writes one file; drop --num_shards")

    try:
        tokenizer = BertTokenizer(args.vocab, lowercase=args.lowercase)
        if args.output_format == "npz":
            stats = write_document_arrays(tokenize_documents(args.input, tokenizer), tokenizer.get_vocabulary(),
                                          args.output_prefix + ".npz")
        else:
            stats = write_document_records(args.input, tokenizer, args.output_prefix, num_shards=args.num_shards)
    except ValueError as error:
        parser.exit(2, f"prepare_pretraining_data: error: {error}\n")
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
