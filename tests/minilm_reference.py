"""Helpers for checkpoint tests: a padded batch of real GLUE sentences and the transformers reference.

The batch mixes single sentences (SST-2 dev) and sentence pairs (MRPC dev, so
segment ids 1 occur), tokenised with the Hugging Face `tokenizers` library from
the checkpoint's own tokenizer.json, padded to the longest.
"""

import csv

import numpy as np


def real_batch(shared_data, minilm_dir, singles=3, pairs=2):
    from tokenizers import Tokenizer

    with open(shared_data / "glue" / "SST-2" / "dev.tsv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1 : 1 + singles]
    sentences = [row[0] for row in rows]
    with open(shared_data / "glue" / "MRPC" / "dev.tsv", encoding="utf-8-sig") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1 : 1 + pairs]
    sentence_pairs = [(row[3], row[4]) for row in rows]
    tokenizer = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    encodings = tokenizer.encode_batch(sentences + sentence_pairs)
    batch = {
        "token_ids": np.array([e.ids for e in encodings], "int32"),
        "segment_ids": np.array([e.type_ids for e in encodings], "int32"),
        "padding_mask": np.array([e.attention_mask for e in encodings], "int32"),
    }
    lengths = batch["padding_mask"].sum(axis=1)
    assert lengths.min() < lengths.max(), "the batch must contain padding"
    assert batch["segment_ids"].max() == 1, "the batch must contain sentence pairs"
    return batch


def transformers_outputs(model_dir, batch):
    """`(sequence_output, pooled_output)` of `transformers.BertModel` (torch CPU, eval) as NumPy."""
    import torch
    import transformers

    model = transformers.BertModel.from_pretrained(str(model_dir)).eval()
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(batch["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(batch["padding_mask"], dtype=torch.long),
        )
    return out.last_hidden_state.numpy(), out.pooler_output.numpy()


def numpy_outputs(model, batch):
    from keras import ops

    out = model(batch)
    return ops.convert_to_numpy(out["sequence_output"]), ops.convert_to_numpy(out["pooled_output"])


def max_diffs(outputs, reference, padding_mask):
    """Max |diff| of sequence_output over real (non-padded) positions, and of pooled_output."""
    real = padding_mask.astype(bool)
    sequence = np.abs(outputs[0] - reference[0])[real].max()
    pooled = np.abs(outputs[1] - reference[1]).max()
    return float(sequence), float(pooled)
