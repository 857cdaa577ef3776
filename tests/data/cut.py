"""Re-creates tests/data/whole and tests/data/slices from ../shared/data and prints their sha256.

    python tests/data/cut.py [SHARED_DATA]   # default: ../shared/data next to the checkout

Every output file is a byte range of one source file, or the source file itself (see README.md);
nothing is re-encoded, re-serialised or reordered.
"""

import gzip
import hashlib
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_SHARED = HERE.parents[2] / "shared" / "data"

# Files copied whole (same relative path as under shared/data).
WHOLE = [
    "bad_input/pg84_cp1252_excerpt.txt",
    "bad_input/pg2641_cp1252_excerpt.txt",
    "corpus/gutenberg/pg84.txt",
    "corpus/gutenberg/pg2641.txt",
]

# Gutenberg heads: the first N lines (LF-terminated, BOM kept).
HEADS = {
    "corpus/gutenberg/1400-0.txt": 6000,
    "corpus/gutenberg/98-0.txt": 1000,
    "corpus/gutenberg/76-0.txt": 3000,
    "corpus/gutenberg/pg84.txt": 600,
}

# STS-B: the header line plus a block of consecutive lines (1-based, inclusive) whose sentences come
# from the sub-corpora under CC BY-SA (`images`, `track5.en-en`); see README.md.
STSB_BLOCKS = {
    "glue/STS-B/train.tsv": (1002, 1101),  # 100 rows, main-captions images 2014
    "glue/STS-B/dev.tsv": (252, 626),  # 375 rows, images 2014 + images 2015 + track5.en-en 2017
    "glue/STS-B/test.tsv": (252, 351),  # 100 rows, main-captions images 2014
}

SQUAD = "squad/dev-v1.1.json.gz"
SQUAD_ARTICLES = 2


def lines_of(data):
    return data.splitlines(keepends=True)


def squad_head(raw, articles):
    """The official file's bytes up to the end of article `articles`, then the file's own closing bytes."""
    text = raw.decode("utf-8")
    decoder = json.JSONDecoder()
    position = text.index("[") + 1
    for _ in range(articles):
        _, end = decoder.raw_decode(text, position)
        position = end + len(", ")
    cut = len(text[:end].encode("utf-8"))
    tail = b'], "version": "1.1"}'
    assert raw.endswith(tail)
    return raw[:cut] + tail


def main(shared):
    outputs = {}
    for relative in WHOLE:
        outputs[f"whole/{relative}"] = (shared / relative).read_bytes()
    for relative, count in HEADS.items():
        outputs[f"slices/{relative}"] = b"".join(lines_of((shared / relative).read_bytes())[:count])
    for relative, (first, last) in STSB_BLOCKS.items():
        rows = lines_of((shared / relative).read_bytes())
        outputs[f"slices/{relative}"] = rows[0] + b"".join(rows[first - 1 : last])
    outputs["slices/glue/STS-B/LICENSE.txt"] = (shared / "glue/STS-B/LICENSE.txt").read_bytes()
    raw = gzip.decompress((shared / SQUAD).read_bytes())
    # Same gzip settings as shared/data (level 9, mtime 0, stored name dev-v1.1.json).
    head = squad_head(raw, SQUAD_ARTICLES)
    outputs[f"slices/{SQUAD}"] = gzip_bytes(head, "dev-v1.1.json")
    for relative, data in sorted(outputs.items()):
        path = HERE / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(f"| `{relative}` | {len(data):,} | `{hashlib.sha256(data).hexdigest()}` |")
    print(f"SQuAD slice decompressed: {len(head):,} bytes, sha256 {hashlib.sha256(head).hexdigest()}")


def gzip_bytes(data, name):
    import io

    buffer = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", compresslevel=9, fileobj=buffer, mtime=0) as f:
        f.write(data)
    return buffer.getvalue()


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SHARED)
