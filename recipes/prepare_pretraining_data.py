"""Tokenises pretraining text once into TFRecord shards of documents.

For pod-scale runs: `pretraining_dataset` (and `recipes/pretrain.py --train_files
'prefix-*.tfrecord'`) then skips tokenisation; sentence pairs and masks are still
drawn on the fly every epoch. Use the vocabulary and casing of the model to train.

Example:

    python recipes/prepare_pretraining_data.py --input 'text/train-*.txt' \
        --vocab vocab.txt --output_prefix gs://bucket/records/train --num_shards 64
"""

import argparse
import json

from keras_bert_impl.data.document_records import write_document_records
from keras_bert_impl.text.tokenizer import BertTokenizer


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", nargs="+", required=True,
                        help="text files or globs: one sentence a line, blank line between documents")
    parser.add_argument("--vocab", required=True, help="vocab.txt of the model to pretrain")
    parser.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True,
                        help="uncased vocabulary (default) or --no-lowercase for a cased one")
    parser.add_argument("--output_prefix", required=True,
                        help="shards are written as PREFIX-00000-of-0000N.tfrecord")
    parser.add_argument("--num_shards", type=int, default=1,
                        help="at least the number of input pipelines (hosts) that will read them")
    args = parser.parse_args()

    try:
        tokenizer = BertTokenizer(args.vocab, lowercase=args.lowercase)
        stats = write_document_records(args.input, tokenizer, args.output_prefix, num_shards=args.num_shards)
    except ValueError as error:
        parser.exit(2, f"prepare_pretraining_data: error: {error}\n")
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
