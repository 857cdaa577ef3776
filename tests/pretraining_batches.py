"""Pretraining batches from real text for tests that must not wait for the tf.data pipeline.

Sentences from a Gutenberg novel in ../shared/data, WordPiece ids from the real
all-MiniLM-L6-v2 `tokenizer.json` (Hugging Face `tokenizers`), sentence pairs
(50% real continuation = label 0, 50% a line from far away = label 1) and BERT
masking (15%, 80/10/10) drawn with a seeded numpy generator. Same keys, dtypes
and static shapes as `keras_bert_impl.data.pretraining_dataset`.
"""

import pathlib

import numpy as np

BOOK = "1400-0.txt"  # Great Expectations


def real_lines(shared_data, count, start=2000):
    path = pathlib.Path(shared_data) / "corpus" / "gutenberg" / BOOK
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines[start:] if len(line.split()) >= 6]
    return lines[:count]


def make_batches(shared_data, tokenizer_json, num_examples, sequence_length=32, max_predictions=5, seed=0):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    vocab_size = tokenizer.get_vocab_size()
    cls_id, sep_id, mask_id = (tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[MASK]"))
    lines = real_lines(shared_data, num_examples * 2 + 50)
    ids = [tokenizer.encode(line, add_special_tokens=False).ids for line in lines]
    rng = np.random.default_rng(seed)
    out = {k: [] for k in ("token_ids", "segment_ids", "padding_mask", "mask_positions",
                           "mask_ids", "mask_weights", "next_sentence_labels")}
    budget = sequence_length - 3
    for i in range(num_examples):
        a = ids[2 * i]
        is_random = rng.random() < 0.5
        b = ids[(2 * i + 25 + int(rng.integers(0, 20))) % len(ids)] if is_random else ids[2 * i + 1]
        a, b = list(a), list(b)
        while len(a) + len(b) > budget:
            (a if len(a) > len(b) else b).pop()
        tokens = [cls_id] + a + [sep_id] + b + [sep_id]
        segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        candidates = [p for p, t in enumerate(tokens) if t not in (cls_id, sep_id)]
        n = min(max_predictions, max(1, round(0.15 * len(candidates))))
        positions = sorted(rng.choice(candidates, size=n, replace=False).tolist())
        labels = [tokens[p] for p in positions]
        for p in positions:
            r = rng.random()
            if r < 0.8:
                tokens[p] = mask_id
            elif r < 0.9:
                tokens[p] = int(rng.integers(999, vocab_size))
        pad = sequence_length - len(tokens)
        out["token_ids"].append(tokens + [0] * pad)
        out["segment_ids"].append(segments + [0] * pad)
        out["padding_mask"].append([1] * len(tokens) + [0] * pad)
        fill = max_predictions - n
        out["mask_positions"].append(positions + [0] * fill)
        out["mask_ids"].append(labels + [0] * fill)
        out["mask_weights"].append([1] * n + [0] * fill)
        out["next_sentence_labels"].append(int(is_random))
    return {k: np.asarray(v, dtype="int32") for k, v in out.items()}
