"""tests/data holds exactly the files its README lists, with the listed sizes and sha256, and stays small.

Issue 15: the vendored slices keep a README with the source, licence and
sha256 of each file, and stay "a few MB at most". This test reads the
README's file table and checks every row against the bytes on disk, and that
no data file is missing from the table.
"""

import hashlib
import pathlib
import re

import pytest

pytestmark = pytest.mark.multibackend  # reads files only

DATA = pathlib.Path(__file__).resolve().parent / "data"
_ROW = re.compile(r"^\| `((?:whole|slices)/[^`]+)` \| ([\d,]+) \| `([0-9a-f]{64})` \|", re.M)
MAX_TOTAL_BYTES = 4 * 1024 * 1024  # "a few MB at most"


def _table():
    return {m.group(1): (int(m.group(2).replace(",", "")), m.group(3))
            for m in _ROW.finditer((DATA / "README.md").read_text(encoding="utf-8"))}


def test_every_listed_file_has_its_size_and_sha256():
    table = _table()
    assert len(table) >= 10
    wrong = []
    for name, (size, sha256) in sorted(table.items()):
        path = DATA / name
        if not path.is_file():
            wrong.append(f"{name}: missing")
            continue
        data = path.read_bytes()
        if len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
            wrong.append(f"{name}: {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()} "
                         f"(README: {size:,}, {sha256})")
    assert not wrong, "tests/data/README.md disagrees with the files (python tests/data/cut.py prints the table):\n" \
        + "\n".join(wrong)


def test_no_unlisted_data_file_and_small_in_all():
    on_disk = {str(p.relative_to(DATA)) for top in ("whole", "slices") for p in (DATA / top).rglob("*") if p.is_file()}
    assert on_disk == set(_table()), f"not in the README's table: {sorted(on_disk - set(_table()))}"
    total = sum((DATA / name).stat().st_size for name in on_disk)
    assert total <= MAX_TOTAL_BYTES, f"tests/data holds {total:,} bytes"
