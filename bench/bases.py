#!/usr/bin/env python3
"""What one base per delta leaves on the table (issue 17; docs/BENCHMARKS.md, "One base per
chunk: what is left").

Reads a typescript-10 data directory (`node bench/reduction.mjs --keep DIR`, stopped cleanly):
every live chunk decoded to raw bytes (bench/levels.py), every version's manifest (zstd
frames, each possibly against its base version's JSON: docs/FORMAT.md "Stored form"). Each
chunk is attributed to the first file, in version and manifest order, whose recipe names it.
Then, for every chunk, its stored length today against a delta made with zstd at level 16
over a longer reference prefix (the smaller of the two counts; a delta pays 21 bytes of
header and 20 more per extra base fingerprint it would have to name):
- s1: its base today, then the chunk before it in its file;
- s2: the chunks around its base in the base's file (before, itself, after), then the chunk
  before it in its file.
Prints the totals and each version's share. Slow (minutes: a zstd dictionary per chunk).

Usage: python3 bench/bases.py DATA_DIR   (needs `pip install zstandard`)
"""
import collections
import json
import sqlite3
import sys

import zstandard as zs

from levels import decode_all, prefix_dict

LEVEL = 16


def manifests(db):
    """Each version's manifest JSON, by id."""
    out = {}
    for vid, base, blob in db.execute("SELECT id, manifest_base, manifest FROM versions ORDER BY id"):
        d = zs.ZstdDecompressor(dict_data=prefix_dict(out[base])) if base is not None else zs.ZstdDecompressor()
        out[vid] = d.decompress(blob, max_output_size=1 << 28)
    return {vid: json.loads(j) for vid, j in out.items()}


def first_use(db):
    """Each chunk's first use, in version and manifest order: fingerprint -> (its file's
    recipe, index in it, version), and the fingerprints in that order."""
    where = {}
    order = []
    for vid, m in sorted(manifests(db).items()):
        for e in m["entries"]:
            recipe = [bytes.fromhex(f) for f in e["recipe"]]
            for i, fp in enumerate(recipe):
                if fp not in where:
                    where[fp] = (recipe, i, vid)
                    order.append(fp)
    return where, order


def main(data_dir):
    db = sqlite3.connect(f"file:{data_dir}/ditto.sqlite3?mode=ro", uri=True)
    live = {bytes(fp) for (fp,) in db.execute("SELECT fp FROM chunks")}
    _, _, raw, stored, base = decode_all(data_dir, live)
    where, order = first_use(db)

    def delta(chunk, prefix):
        c = zs.ZstdCompressor(level=LEVEL, dict_data=prefix_dict(prefix), write_dict_id=False) if prefix else zs.ZstdCompressor(level=LEVEL)
        return len(c.compress(chunk))

    total = collections.Counter()
    for fp in order:
        recipe, i, vid = where[fp]
        b = base.get(fp)
        prev = recipe[i - 1] if i > 0 and recipe[i - 1] != fp else None
        before = raw[prev] if prev else b""
        around = raw[b] if b else b""
        if b in where:
            br, bi, _ = where[b]
            around = b"".join(raw[g] for g in br[max(0, bi - 1) : bi + 2])
        total["today", vid] += stored[fp]
        total["s1", vid] += min(stored[fp], delta(raw[fp], (raw[b] if b else b"") + before) + 21 + 20)
        total["s2", vid] += min(stored[fp], delta(raw[fp], around + before) + 21 + 60)
    versions = sorted({v for _, v in total})
    for k in ("today", "s1", "s2"):
        print(k, sum(total[k, v] for v in versions), [total[k, v] for v in versions])
    unnamed = live - set(where)
    print("chunks no manifest names (dictionaries):", len(unnamed), sum(stored[f] for f in unnamed))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
